//! The application's integration tests, one binary: the bridge, the
//! command line, the binary as a process, the docs. Tests that read the
//! process-wide log live in `app_logs`.
// Tests may block (files, processes, a stalled "disk"); the loop rule is
// for the shipped crates.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "../support/mod.rs"]
mod support;

// These tests wait far more than they compute (two at once kept 28 % of
// one core busy for 138 s), so eight run at once.
smolcord_testkit::default_test_threads!(8);

// The crash harness, the longest test (~40 s): libtest starts tests in name
// order, and this name comes first, so it runs beside all the others
// rather than after most of them.
#[cfg(feature = "sim")]
mod across_sigkills;
#[cfg(feature = "sim")]
mod agent_errors;
#[cfg(feature = "sim")]
mod agent_schema;
#[cfg(feature = "sim")]
mod bridge_access;
#[cfg(feature = "sim")]
mod bridge_bounds;
#[cfg(feature = "sim")]
mod bridge_channels;
#[cfg(feature = "sim")]
mod bridge_commands;
#[cfg(feature = "sim")]
mod bridge_context;
#[cfg(feature = "sim")]
mod bridge_exactly_once;
#[cfg(feature = "sim")]
mod bridge_flow;
#[cfg(feature = "sim")]
mod bridge_guild_storm;
#[cfg(feature = "sim")]
mod bridge_heartbeat;
mod bridge_layers;
#[cfg(feature = "sim")]
mod bridge_lifecycle;
#[cfg(feature = "sim")]
mod bridge_reactions;
#[cfg(feature = "sim")]
mod bridge_readback;
#[cfg(feature = "sim")]
mod bridge_shards;
#[cfg(feature = "sim")]
mod bridge_state;
#[cfg(feature = "sim")]
mod bridge_streaming;
#[cfg(feature = "sim")]
mod bridge_threads;
#[cfg(feature = "sim")]
mod cli_hostile;
#[cfg(feature = "sim")]
mod cli_lifecycle;
#[cfg(feature = "sim")]
mod cli_run;
mod config_load;
mod contrib_whisper;
#[cfg(feature = "sim")]
mod demo_smoke;
mod doc_links;
#[cfg(feature = "sim")]
mod example_bot;
#[cfg(feature = "sim")]
mod examples_run;
#[cfg(feature = "sim")]
mod files_in;
#[cfg(feature = "sim")]
mod files_out;
#[cfg(feature = "sim")]
mod idle_state;
mod packaging_env;
#[cfg(feature = "sim")]
mod packaging_run;
#[cfg(feature = "sim")]
mod recorder_bridge;
mod recorder_journal;
#[cfg(feature = "sim")]
mod secrets_trace;
#[cfg(feature = "sim")]
mod shard_history;
#[cfg(feature = "sim")]
mod shard_processes;
#[cfg(feature = "sim")]
mod sim_pacing;
#[cfg(feature = "sim")]
mod sim_token;
#[cfg(feature = "sim")]
mod spool_flood;
#[cfg(feature = "sim")]
mod status_schema;
#[cfg(feature = "sim")]
mod tls_end_to_end;
