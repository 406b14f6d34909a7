//! Where messages come from: the gateway dispatch, the read-back, spool results.

pub(crate) mod dispatch;
pub(crate) mod peek;
pub(crate) mod readback;
pub(crate) mod results;
pub(crate) mod watch;
