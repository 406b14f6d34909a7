//! The library's tests that read the log: one capturing logger per
//! process, so they share a binary of their own (a test elsewhere would
//! write into the log they read).
// Tests may block (files, processes, a stalled "disk"); the loop rule is
// for the shipped crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use smolcord_testkit as support;

mod heartbeat_schedule;
mod identify_queue_remote;
mod offload_command;
mod shard_comeback;
mod shard_hostile;
mod shard_identify_budget;
mod shard_secrets;
mod shard_set;
mod shard_set_hostile;
