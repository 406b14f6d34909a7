//! Small async filesystem operations, each one trip to the blocking pool.
//!
//! These are the calls the rest of smolcord needs besides whole-file JSON:
//! reading raw bytes, listing a spool directory, moving a file durably,
//! appending a journal line with fsync. Missing files are ordinary outcomes
//! (`None`, empty list, `Ok`), not errors.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::{blocking_fs, unblock, Error};

/// Which files [`read_capped`] accepts. Only regular files either way: a
/// FIFO is never waited on (it would block the start forever), a device
/// (`/dev/zero`) never read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// A regular file, the path itself: a symbolic link is not followed
    /// (the state dir's own files, and files others can drop in, such as
    /// spool results).
    Regular,
    /// A regular file, the path itself or where its symbolic links lead:
    /// the files an operator names (config, `token_file`, CA file), which
    /// Kubernetes mounts from a Secret or ConfigMap as links.
    RegularBehindLink,
}

/// The most read from one state file (`session.json`, `access.json`,
/// `pairing.json`, `runtime.json`, `restart.json`, `status.json`, a journal
/// file; each `.bak` too). The largest real one is `session.json`, about
/// 10 KiB per shard (64 sessions of ~150 bytes), so 16 MiB holds well over
/// a thousand shards in one process, while a wrong file (a link to
/// `/dev/zero`, a log) is refused at once instead of filling a Pi's memory.
pub const STATE_FILE_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Reads a whole state file (at most [`STATE_FILE_MAX_BYTES`], a regular
/// file and not a symbolic link); `Ok(None)` if it does not exist.
pub async fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let path = path.to_path_buf();
    unblock(move || blocking_fs::read_optional(&path)).await
}

/// Reads at most `limit` bytes of `path` and hands them to `parse`, both on
/// the blocking pool (a large JSON parse costs the loop nothing).
/// `Ok(None)` if the file does not exist; [`Error::TooLarge`] past `limit`
/// (never reading more than `limit + 1` bytes); [`Error::NotRegular`] for
/// a FIFO, device, directory or socket, and a symbolic link under
/// [`FileKind::Regular`], before a byte is read.
pub async fn read_capped<T, F>(
    path: &Path,
    limit: u64,
    kind: FileKind,
    parse: F,
) -> Result<Option<T>, Error>
where
    F: FnOnce(Vec<u8>) -> T + Send + 'static,
    T: Send + 'static,
{
    let path = path.to_path_buf();
    unblock(move || Ok(blocking_fs::read_capped(&path, limit, kind)?.map(parse))).await
}

/// The size of the regular file `path` (not a symbolic link) and its last
/// byte, without reading the rest; `Ok(None)` if it does not exist.
pub async fn size_and_last_byte(path: &Path) -> Result<Option<(u64, Option<u8>)>, Error> {
    let path = path.to_path_buf();
    unblock(move || blocking_fs::size_and_last_byte(&path)).await
}

/// `Ok` if nothing is at `path` or a regular file (not a symbolic link) of
/// at most `limit` bytes; else what [`read_capped`] would refuse it for.
/// Nothing is read.
pub async fn check_regular(path: &Path, limit: u64) -> Result<(), Error> {
    let path = path.to_path_buf();
    unblock(move || blocking_fs::check_regular(&path, limit)).await
}

/// Whether anything is at `path` (a symbolic link is not followed).
pub async fn exists(path: &Path) -> Result<bool, Error> {
    let path = path.to_path_buf();
    unblock(move || blocking_fs::exists(&path)).await
}

/// One page of a directory that may hold very many files: the `limit`
/// smallest names greater than `after` that pass `keep`, sorted, and
/// whether more are left. Memory stays bounded by `limit`.
pub async fn list_dir_page(
    dir: &Path,
    after: Option<OsString>,
    limit: usize,
    keep: fn(&OsStr) -> bool,
) -> Result<(Vec<PathBuf>, bool), Error> {
    let dir = dir.to_path_buf();
    unblock(move || blocking_fs::list_dir_page(&dir, after.as_deref(), limit, keep)).await
}

/// The entries of `dir` as full paths, sorted; empty if `dir` does not exist.
pub async fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let dir = dir.to_path_buf();
    unblock(move || blocking_fs::list_dir(&dir)).await
}

/// Renames `from` to `to` and fsyncs the directory (both, if they differ),
/// so the move survives a power cut.
pub async fn rename_durable(from: &Path, to: &Path) -> Result<(), Error> {
    let (from, to) = (from.to_path_buf(), to.to_path_buf());
    unblock(move || blocking_fs::rename_durable(&from, &to)).await
}

/// Removes a file; a missing file is not an error.
pub async fn remove_file(path: &Path) -> Result<(), Error> {
    let path = path.to_path_buf();
    unblock(move || blocking_fs::remove_file(&path)).await
}

/// Creates a directory and any missing parents; new directories get mode 0700.
pub async fn create_dir_all(path: &Path) -> Result<(), Error> {
    let path = path.to_path_buf();
    unblock(move || blocking_fs::create_dir_all(&path)).await
}

/// Appends `line` to `path` and fsyncs it, in one blocking call.
///
/// A newline is added if `line` lacks one. The file is created 0600 if
/// missing. The line goes out in one `write`, so concurrent appenders (even
/// in other processes) do not interleave within a line on local filesystems.
pub async fn append_line_synced(path: &Path, line: Vec<u8>) -> Result<(), Error> {
    let path = path.to_path_buf();
    unblock(move || blocking_fs::append_line_synced(&path, line)).await
}
