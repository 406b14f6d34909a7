//! The gateway side: one websocket connection, Identify and Resume, op 8, and the identify queue stand-in.

pub(crate) mod connection;
pub(crate) mod identify;
pub(crate) mod members;
pub(crate) mod queue;
pub(crate) mod session_start;
