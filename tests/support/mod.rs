//! The helpers every integration test shares, in one place:
//!
//! - [`wait`]: bounded waits — a whole test, one future, a condition —
//!   that panic naming what never happened;
//! - [`logs`]: one capturing logger per test binary;
//! - [`binary`] and [`image`]: the smolcord binary as a child process (as
//!   a test runs it, and as the container image runs it);
//! - rigs per layer: [`shard`], [`bridge`], [`recorder`], a raw gateway and
//!   HTTP client for the simulator ([`sim_client`]), a test CA ([`tls`]),
//!   an identify queue service whose answers the test decides
//!   ([`queue_server`]).
//!
//! Each test binary declares `mod support;` and uses the parts it needs.
// Tests may block (files, processes, a stalled "disk"); the loop rule is
// for the crate. Not every binary uses every helper.
#![allow(clippy::disallowed_methods, clippy::disallowed_types, dead_code)]

pub mod binary;
pub mod image;
pub mod logs;
pub mod queue_server;
pub mod recorder;
pub mod wait;

#[cfg(feature = "sim")]
pub mod bridge;
#[cfg(feature = "sim")]
pub mod shard;
#[cfg(feature = "sim")]
pub mod sim_client;
#[cfg(feature = "sim")]
pub mod tls;
