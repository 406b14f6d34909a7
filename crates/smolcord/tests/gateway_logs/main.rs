//! The library's tests that read the log: one capturing logger per
//! process, so they share a binary of their own (a test elsewhere would
//! write into the log they read).
// Tests may block (files, processes, a stalled "disk"); the loop rule is
// for the shipped crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use smolcord_testkit as support;

// These tests wait (2 % of one core at two at once); each reads only its
// own lines (support::logs), so four run at once (33 s -> 18 s). Six failed
// two timing bounds under load.
smolcord_testkit::default_test_threads!(4);

mod heartbeat_schedule;
mod identify_queue_remote;
mod log_capture;
mod offload_command;
mod shard_comeback;
mod shard_hostile;
mod shard_identify_budget;
mod shard_secrets;
mod shard_set;
mod shard_set_hostile;
