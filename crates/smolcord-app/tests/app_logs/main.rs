//! The application's tests that read the log: one capturing logger per
//! process, so they share a binary of their own.
// Tests may block (files, processes, a stalled "disk"); the loop rule is
// for the shipped crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "sim")]
mod bridge_edges;
mod recorder_capacity;
mod recorder_deadline;
mod recorder_reply_path;
mod recorder_shutdown;
