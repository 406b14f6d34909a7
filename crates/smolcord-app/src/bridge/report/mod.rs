//! What the bridge tells the operator: counters, the reporter, throttled warnings,
//! what was told once.

pub(crate) mod counters;
pub(crate) mod reporter;
pub(crate) mod throttle;
pub(crate) mod told_once;
