//! The simulator's folders are layers, bottom to top: `wire` (bytes in
//! and out), `model` (the configuration, Discord's objects, pure checks),
//! `state` (the books one lock holds, and the lock), `rest`, `gateway`,
//! `control`, then `server.rs` (the thread that hands each request to
//! them). A file imports from its own folder and the layers below, never
//! from a layer above, never from the crate root (`lib.rs` only assembles
//! the public handle and its re-exports); inside a folder, one way too.
//! The scanner is `smolcord_testkit::layers`, shared with the bridge's
//! check.

use smolcord_testkit::layers::{assert_layers, edges, folder_cycle, violations, Source};

/// The layers, bottom first; `server` is a file, the others folders.
const LAYERS: &[&str] = &[
    "wire", "model", "state", "rest", "gateway", "control", "server",
];

const PREFIX: &str = "crate::";

#[test]
fn the_simulator_layers_point_down() {
    let dir = smolcord_testkit::repo_root().join("crates/smolcord-sim/src");
    assert_layers(&dir, PREFIX, LAYERS);
}

#[test]
fn an_upward_import_is_caught() {
    // The circle this check was written against: the state naming the
    // REST side's record type.
    let state = Source {
        layer: "state".into(),
        name: "shared".into(),
        uses: edges(
            "use crate::rest::routes::RestRecord;\nuse super::session::SessionStore;\n",
            "state",
            PREFIX,
        ),
    };
    assert_eq!(
        violations(&[state], LAYERS, PREFIX),
        ["state/shared imports from rest, a layer above it"]
    );
    // The root's re-exports are no way around it.
    let root = Source {
        layer: "model".into(),
        name: "objects".into(),
        uses: edges("use crate::SimConfig;", "model", PREFIX),
    };
    assert_eq!(
        violations(&[root], LAYERS, PREFIX),
        ["model/objects imports crate::SimConfig from the root"]
    );
    // A doc link is no import.
    assert!(edges("/// [`Simulator`](crate::Simulator)\n", "state", PREFIX).is_empty());
    // Two files of one folder that name each other.
    let file = |name: &str, other: &str| Source {
        layer: "gateway".into(),
        name: name.into(),
        uses: edges(&format!("use super::{other}::X;"), "gateway", PREFIX),
    };
    let found = folder_cycle(&[
        file("connection", "identify"),
        file("identify", "connection"),
    ]);
    assert!(found.is_some(), "a cycle inside a folder is caught");
}
