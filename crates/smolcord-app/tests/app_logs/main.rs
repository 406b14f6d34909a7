//! The application's tests that read the log: one capturing logger per
//! process, so they share a binary of their own.
// Tests may block (files, processes, a stalled "disk"); the loop rule is
// for the shipped crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "../support/mod.rs"]
mod support;

// These tests wait (8 % of one core at two at once); each reads only its
// own lines (support::logs), so four run at once (9.7 s -> 5.4 s).
smolcord_testkit::default_test_threads!(4);

#[cfg(feature = "sim")]
mod bridge_edges;
mod recorder_capacity;
mod recorder_deadline;
mod recorder_reply_path;
mod recorder_shutdown;
