//! The simulator's integration tests, one binary.
// Tests may block (files, processes, a stalled "disk"); the loop rule is
// for the shipped crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use smolcord_testkit as support;

mod sim_cdn;
mod sim_channels;
mod sim_compat;
mod sim_faults;
mod sim_gateway;
mod sim_history;
mod sim_http;
mod sim_interactions;
mod sim_layers;
mod sim_members;
mod sim_nonce;
mod sim_ratelimit;
mod sim_refusals;
mod sim_replies;
mod sim_session;
