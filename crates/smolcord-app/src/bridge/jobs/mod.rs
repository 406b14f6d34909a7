//! The per-channel job queues, what is in flight and the sequence floor over it, read-back gates,
//! the run's lifecycle (safe mode, stopping) and the tunables.

pub(crate) mod backlog;
pub(crate) mod floor;
pub(crate) mod inflight;
pub(crate) mod lifecycle;
pub(crate) mod queue;
pub(crate) mod tunables;
