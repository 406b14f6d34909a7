//! smolcord: a Discord gateway bridge on the single-threaded smol runtime.
//!
//! The promise: the gateway heartbeat is never late because of the bot's own
//! work. Everything slow runs through [`offload`]; the heartbeat keeps an
//! account of how punctual it was.
#![forbid(unsafe_code)]
#![deny(rustdoc::broken_intra_doc_links)]
#![warn(missing_docs)]

pub mod app;
pub mod bridge;
pub mod chart;
pub mod config;
pub mod heartbeat;
pub mod loopwatch;
pub mod offload;
pub mod protocol;
pub mod recorder;
pub mod rest;
pub mod rt;
pub mod shard;
#[cfg(feature = "sim")]
pub mod sim;
pub mod status;
pub mod token;
pub mod transport;
pub mod wire;
