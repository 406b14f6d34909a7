//! The rigs smolcord's tests share, in one place (never shipped):
//!
//! - [`wait`]: bounded waits — a whole test, one future, a condition —
//!   that panic naming what never happened;
//! - [`logs`]: one capturing logger per test binary;
//! - rigs per layer: [`shard`], a raw gateway and HTTP client for the
//!   simulator ([`sim_client`]), a test CA ([`tls`]), an identify queue
//!   service whose answers the test decides ([`queue_server`]);
//! - [`layers`]: the folder-layer check of the bridge and the simulator;
//! - [`default_test_threads!`]: more tests at once in a binary whose
//!   tests wait.
//!
//! The application's own rigs (the binary as a child process, the bridge,
//! the recorder) live in its test binary, beside the code they drive.
// Tests may block (files, processes, a stalled "disk"); the loop rule is
// for the shipped crates.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    missing_docs,
    clippy::missing_panics_doc
)]

pub mod layers;
pub mod logs;
pub mod queue_server;
pub mod shard;
pub mod sim_client;
pub mod threads;
pub mod tls;
pub mod wait;

/// The repository's root (the workspace), where the docs, scripts and
/// `clippy.toml` live.
pub fn repo_root() -> &'static std::path::Path {
    static ROOT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let kit = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        kit.ancestors()
            .nth(2)
            .expect("crates/smolcord-testkit has a grandparent")
            .to_owned()
    })
}
