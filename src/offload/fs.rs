//! Small async filesystem operations, each one trip to the blocking pool.
//!
//! These are the calls the rest of smolcord needs besides whole-file JSON:
//! reading raw bytes, listing a spool directory, moving a file durably,
//! appending a journal line with fsync. Missing files are ordinary outcomes
//! (`None`, empty list, `Ok`), not errors.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use super::{blocking_fs, unblock, Error};

/// Which files [`read_capped`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// Whatever the path names, symbolic links followed (a config given as
    /// `<(...)` is a pipe).
    Any,
    /// Only a regular file, and the path itself: a symbolic link is not
    /// followed and a FIFO is not waited on (files others can drop in, such
    /// as spool results).
    Regular,
}

/// Reads a whole file; `Ok(None)` if it does not exist.
pub async fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let path = path.to_path_buf();
    unblock(move || blocking_fs::read_optional(&path)).await
}

/// Reads at most `limit` bytes of `path` and hands them to `parse`, both on
/// the blocking pool (a large JSON parse costs the loop nothing).
/// `Ok(None)` if the file does not exist; [`Error::TooLarge`] past `limit`
/// (never reading more than `limit + 1` bytes); [`Error::NotRegular`] for
/// a symbolic link, FIFO or device under [`FileKind::Regular`].
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
