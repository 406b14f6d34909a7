//! What the bridge keeps on disk: session and seq floor, spool, outbox, nonces, the channel
//! directory, each task's files, the runtime book (`runtime.json` and its writer).

pub mod directory;
pub(crate) mod files;
pub(crate) mod nonce;
pub(crate) mod outbox;
pub(crate) mod persist;
pub(crate) mod runtime;
pub mod spool;
pub mod state_files;
