//! Where messages come from: the gateway dispatch, the read-back, spool results.

pub(crate) mod dispatch;
pub(crate) mod interactions;
pub(crate) mod peek;
pub(crate) mod readback;
pub(crate) mod register_commands;
pub(crate) mod results;
pub(crate) mod watch;
