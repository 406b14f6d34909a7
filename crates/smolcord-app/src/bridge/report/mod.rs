//! What the bridge tells the operator: counters, the reporter, throttled warnings.

pub(crate) mod counters;
pub(crate) mod reporter;
pub(crate) mod throttle;
