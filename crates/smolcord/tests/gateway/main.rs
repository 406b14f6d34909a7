//! The gateway library's integration tests, one binary: the shard, REST,
//! offload, the layout script. Tests that read the process-wide log live
//! in `gateway_logs`; those that read process-wide state (threads, RSS,
//! the pool's size, a logger of their own) have a file each.
// Tests may block (files, processes, a stalled "disk"); the loop rule is
// for the shipped crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use smolcord_testkit as support;

// These tests wait far more than they compute (two at once kept 18 % of
// one core busy for 22 s), so six run at once.
smolcord_testkit::default_test_threads!(6);

mod layout_link;
mod offload_clippy_guard;
mod offload_crash;
mod offload_fs;
mod offload_proof;
mod rest_client;
mod rest_split;
mod rest_upload;
mod shard_library;
mod shard_session;
