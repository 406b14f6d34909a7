//! offload: the only place that may block.
//!
//! Everything that would stall the event loop — fsync'd writes, subprocesses,
//! blocking library calls — goes through this module, which moves it to the
//! `blocking` thread pool or waits for it on the caller's reactor (a
//! subprocess's pipes and pidfd). `clippy.toml` forbids the
//! blocking std calls everywhere else, so this is the only way such work can
//! be written.
//!
//! - [`unblock`]: run any blocking closure on the pool.
//! - [`write_json_atomic`], [`read_json`] and friends: crash-safe state files,
//!   one pool trip per operation (not one per syscall).
//! - [`run_command`]: subprocesses with a timeout, process-group kill and
//!   capped output.
//!
//! ```no_run
//! # smol::block_on(async {
//! use std::path::Path;
//! use smolcord::offload::{read_json, write_json_atomic, Fallback};
//!
//! let path = Path::new("state/session.json");
//! write_json_atomic(path, &vec![1, 2, 3]).await?;
//! let back: Option<Vec<u32>> = read_json(path, Fallback::None).await?;
//! assert_eq!(back, Some(vec![1, 2, 3]));
//! # Ok::<(), smolcord::offload::Error>(()) });
//! ```

use std::future::Future;

mod atomic;
mod blocking_fs;
mod command;
mod error;
mod fs;
mod json;
mod leftovers;
mod lock;
mod program;
mod progress;
mod supervise;
mod tree;

pub use atomic::{
    write_bytes_atomic, write_json_atomic, write_json_atomic_owned, write_json_atomic_with_backup,
};
pub use command::{run_command, CommandEnv, CommandOutput, CommandSpec};
pub use error::Error;
pub use fs::{
    append_line_synced, check_regular, create_dir_all, exists, list_dir, list_dir_page, read_bytes,
    read_capped, remove_file, rename_durable, size_and_last_byte, FileKind, STATE_FILE_MAX_BYTES,
};
pub use json::{read_json, Fallback};
pub use leftovers::MARKER_VAR;
pub use lock::{lock_dir, DirLock, LOCK_FILE};
pub use program::{find_program, ProgramError};
pub use progress::{OutputProgress, PROGRESS_TAIL};
pub use tree::{list_files, modified, remove_tree, tree_bytes, DirFiles, TREE_DEPTH};

/// Runs a blocking closure on the `blocking` thread pool and awaits its result.
///
/// This is the one sanctioned door for blocking library calls (for example
/// the REST client's synchronous HTTP stack).
pub fn unblock<T, F>(f: F) -> impl Future<Output = T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    blocking::unblock(f)
}
