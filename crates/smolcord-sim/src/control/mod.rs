//! Driving the simulator: the control API over HTTP and the ready-made dispatches it and the Rust handle inject.

pub(crate) mod api;
pub(crate) mod cdn;
pub(crate) mod commands;
pub(crate) mod commands_api;
pub(crate) mod fields;
pub(crate) mod inject;
