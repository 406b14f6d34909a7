//! The application's rigs, beside the shared ones of `smolcord-testkit`
//! (re-exported here, so a test names every helper as `support::…`):
//!
//! - [`binary`] and [`image`]: the smolcord binary as a child process (as
//!   a test runs it, and as the container image runs it);
//! - [`bridge`] and [`recorder`]: the bridge and the failure journal
//!   against the simulator;
//! - [`schema`]: the documented JSON schemas and their validator.
// Not every binary uses every helper.
#![allow(dead_code, unused_imports)]

pub use smolcord_testkit::{logs, queue_server, shard, sim_client, tls, wait};

pub mod binary;
pub mod image;
pub mod recorder;
pub mod schema;

#[cfg(feature = "sim")]
pub mod bridge;
