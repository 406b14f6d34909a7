//! One job handled: the pure verdicts, the worker, the attachments downloaded, transcription,
//! the agent.

pub(crate) mod agent;
pub(crate) mod channel_gate;
pub(crate) mod context;
pub(crate) mod files_in;
pub(crate) mod owner_action;
pub(crate) mod owner_command;
pub(crate) mod stream_preview;
pub(crate) mod thread;
pub(crate) mod transcribe;
pub(crate) mod verdict;
pub(crate) mod worker;
