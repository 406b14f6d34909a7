//! The simulator's state: the books one lock holds (sessions, history, nonces, rate limits, pacing, faults, statistics, events) and the lock.

pub(crate) mod app_commands;
pub(crate) mod cdn;
pub(crate) mod conns;
pub(crate) mod directory;
pub(crate) mod events;
pub(crate) mod faults;
pub(crate) mod gateway_limits;
pub(crate) mod history;
pub(crate) mod interactions;
pub(crate) mod nonces;
pub(crate) mod pacing;
pub(crate) mod ratelimit;
pub(crate) mod rest_faults;
pub(crate) mod rest_log;
pub(crate) mod session;
pub(crate) mod shared;
pub(crate) mod stats;
