//! smolcord: a Discord gateway library, and a bot bridge built on it, for
//! small hosts (a Raspberry Pi, a `FROM scratch` container), on one thread.
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
//! | [`transport`] | one WebSocket connection, `ws://` or `wss://`, zlib-stream |
//! | [`rest`] | the REST calls a bot needs, with Discord's rate limits |
//! | [`token`] | the token, wrapped so it cannot leak |
//! | [`rt`] | the single-threaded runtime (`rt::block_on`); the library also runs on any smol executor |
//! | [`wire`] | the redacted frame trace (`RUST_LOG=smolcord::wire=trace`) |
//! | [`offload`] | the only place that may block: the blocking pool, fsync'd writes, subprocesses (REST and the CA file use it) |
//! | [`loopwatch`] | names the task that stalled the event loop (the shard reports to it) |
//! | `sim` | the gateway + REST simulator to test any client against (feature `sim`) |
//!
//! `examples/bot.rs` is a complete bot written only against these, and
//! `docs/protocol.md` walks through a session frame by frame.
//!
//! # The application
//!
//! The `smolcord` binary: a bridge from Discord DMs to a local agent
//! command. Public so the tests and benchmarks can drive it, but not an API
//! to build on: it changes with the program.
//!
//! | module | what it is |
//! |---|---|
//! | [`app`] | the command-line programs (`demo`, `run`, `sim`, `pair`, `status`, `failures`) |
//! | [`bridge`] | DMs to the agent and back: access, pairing, transcription, spool, delivery |
//! | [`config`] | the bridge's configuration file and environment |
//! | [`status`] | the status snapshot and `smolcord status` |
//! | [`recorder`] | the bounded failure journal |
//! | [`chart`] | terminal bar charts for `status` and the demo |
#![forbid(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

// The gateway library.
pub mod heartbeat;
pub mod loopwatch;
pub mod offload;
pub mod protocol;
pub mod rest;
pub mod rt;
pub mod shard;
#[cfg(feature = "sim")]
pub mod sim;
pub mod token;
pub mod transport;
pub mod wire;

// The application.
pub mod app;
pub mod bridge;
pub mod chart;
pub mod config;
pub mod recorder;
pub mod status;
