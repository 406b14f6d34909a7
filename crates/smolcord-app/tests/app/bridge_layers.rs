//! The bridge's folders are layers along the message's path, bottom to top:
//! `report`, `access`, `store`, `jobs`, then `ctx` (the shared context
//! over them), `deliver`, `work`, `intake`. A file may import from its own
//! folder and the layers below it, never from a layer above, and never
//! from the bridge root (`mod.rs` only assembles). Inside a folder the
//! files import one way too (no cycle). Read from the sources: every
//! `crate::bridge::…` path and `super::…` path in non-test code is an edge
//! (the scanner is `smolcord_testkit::layers`, shared with the
//! simulator's check). (Between crates, the compiler keeps the arrows: the
//! library cannot name the application.)

use smolcord_testkit::layers::{assert_layers, edges, segments, violations, Source};

/// The layers, bottom first; `ctx` is a file, the others folders.
const LAYERS: &[&str] = &[
    "report", "access", "store", "jobs", "ctx", "deliver", "work", "intake",
];

const PREFIX: &str = "crate::bridge::";

#[test]
fn the_bridge_layers_point_down() {
    let dir = smolcord_testkit::repo_root().join("crates/smolcord-app/src/bridge");
    assert_layers(&dir, PREFIX, LAYERS);
}

#[test]
fn an_upward_import_is_caught() {
    let code = "use crate::bridge::work::worker::Job;\nuse super::outbox;\n";
    let store = Source {
        layer: "store".into(),
        name: "persist".into(),
        uses: edges(code, "store", PREFIX),
    };
    assert_eq!(
        violations(&[store], LAYERS, PREFIX),
        ["store/persist imports from work, a layer above it"]
    );
    let root = Source {
        layer: "jobs".into(),
        name: "queue".into(),
        uses: edges("use crate::bridge::Tunables;", "jobs", PREFIX),
    };
    assert_eq!(violations(&[root], LAYERS, PREFIX).len(), 1);
    assert_eq!(segments("{a, b}::c"), ["a"]);
    assert_eq!(
        segments("store::outbox::{Outbox, X}"),
        ["store", "outbox", "Outbox"]
    );
}
