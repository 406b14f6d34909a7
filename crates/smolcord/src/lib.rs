//! smolcord: a Discord gateway v10 library for small hosts (a Raspberry
//! Pi, a `FROM scratch` container), on one thread.
//!
//! The promise: the gateway heartbeat is never late because of the
//! program's own work. The heartbeat runs on a fixed schedule and keeps an
//! account of how punctual it was; the bridge sends everything slow through
//! [`offload`].
//!
//! # The gateway library
//!
//! What a bot of your own builds on. These modules speak of the protocol
//! only, never of the bridge's files or config keys, and are the API this
//! crate means to keep: a breaking change to them is called out in the
//! changelog of the release that makes it (the crate is 0.x and not yet on
//! crates.io, so "stable" means "changed on purpose", not semver-frozen).
//!
//! | module | what it is |
//! |---|---|
//! | [`protocol`] | the gateway v10 wire model: frames, opcodes, commands, events, close codes, intents (no I/O) |
//! | [`shard`] | one gateway session that stays online ([`shard::Shard`]), and sets of shards on one thread ([`shard::ShardSet`]); identify queues |
//! | [`heartbeat`] | the fixed-deadline heartbeat schedule and its account book |
//! | [`transport`] | one WebSocket connection, `ws://` or `wss://`, zlib-stream and zstd-stream (features `zlib`, `zstd`) |
//! | [`rest`] | the REST calls a bot needs, with Discord's rate limits |
//! | [`token`] | the token, wrapped so it cannot leak |
//! | [`rt`] | the single-threaded runtime (`rt::block_on`); the library also runs on any smol executor |
//! | [`wire`] | the redacted frame trace (`RUST_LOG=smolcord::wire=trace`) |
//! | [`offload`] | the only place that may block: the blocking pool, fsync'd writes, subprocesses (REST and the CA file use it) |
//! | [`loopwatch`] | names the task that stalled the event loop (the shard reports to it) |
//!
//! # Use it
//!
//! ```toml
//! [dependencies]
//! smolcord = { git = "https://github.com/smolcord/smolcord", default-features = false, features = ["zlib"] }
//! smol = "2"
//! [dev-dependencies]
//! smolcord-sim = { git = "https://github.com/smolcord/smolcord" } # to test against
//! ```
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `zlib` | yes | zlib-stream transport compression (pure Rust) |
//! | `zstd` | yes | zstd-stream transport compression (the C zstd library) |
//! | `tls12` | no | TLS 1.2 besides 1.3 |
//!
//! The crate's README has a complete bot;
//! `crates/smolcord/examples/bot.rs` is a bigger one written only against these, and
//! `docs/protocol.md` walks through a session frame by frame.
//!
#![forbid(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs, missing_debug_implementations)]

// The gateway library.
pub mod heartbeat;
pub mod loopwatch;
pub mod offload;
pub mod protocol;
pub mod rest;
pub mod rt;
pub mod shard;
pub mod token;
pub mod transport;
pub mod wire;

// The crate README's examples are compiled (and the simulator one run) as
// doctests, so the page a bot author starts from cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
