//! What the simulator is told and how Discord's things look: the configuration, tokens, objects, time, and the pure checks on what clients send.

pub(crate) mod bot_token;
pub(crate) mod clock;
pub(crate) mod config;
pub(crate) mod content;
pub(crate) mod objects;
pub(crate) mod payload_checks;
pub(crate) mod sim_error;
