//! The `smolcord` binary's application: a bridge from Discord DMs to a
//! local agent command, built on the `smolcord` gateway library.
//!
//! Public so the tests and benchmarks can drive it, but not an API to
//! build on: it changes with the program. A bot of your own builds on the
//! `smolcord` crate.
//!
//! | module | what it is |
//! |---|---|
//! | [`cli`] | the command-line programs (`demo`, `run`, `sim`, `pair`, `status`, `failures`) |
//! | [`bridge`] | DMs to the agent and back: access, pairing, transcription, spool, delivery |
//! | [`config`] | the bridge's configuration file and environment |
//! | [`status`] | the status snapshot and `smolcord status` |
//! | [`recorder`] | the bounded failure journal |
//! | [`chart`] | terminal bar charts for `status` and the demo |
#![forbid(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

pub mod bridge;
pub mod chart;
pub mod cli;
pub mod config;
pub mod recorder;
pub mod status;
