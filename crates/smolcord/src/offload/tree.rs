//! Directories the bridge hands to other programs (an agent's input and
//! output files): what is in one, how much it holds, and removing it, each
//! one trip to the blocking pool.
//!
//! A program may leave anything in a directory it was given: links to
//! `/etc/shadow`, FIFOs, a million files, a deep tree. So nothing here
//! follows a symbolic link (a link is reported as one, and removed as the
//! link), and every walk is bounded: [`list_files`] by a count,
//! [`tree_bytes`] and [`remove_tree`] by a depth below which nothing is
//! counted (removal still goes all the way: `remove_dir_all` does not
//! follow links either).
// Each public function is one `unblock` trip; the blocking calls are the
// private helpers' and the closures' inside it.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{unblock, Error};

/// Levels below a tree's root that [`tree_bytes`] looks into.
pub const TREE_DEPTH: usize = 4;

/// What [`list_files`] found directly in a directory, sorted by name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DirFiles {
    /// Regular files and their sizes.
    pub files: Vec<(PathBuf, u64)>,
    /// Everything else (a symbolic link, a directory, a FIFO, …) and what
    /// it is.
    pub others: Vec<(PathBuf, &'static str)>,
    /// Entries past the `limit` given, not looked at.
    pub more: usize,
}

/// The first `limit` entries of `dir` by name, each a regular file or not
/// (a symbolic link is never followed); an empty listing if `dir` does not
/// exist. At most `limit` entries are examined and kept; the rest are
/// only counted.
pub async fn list_files(dir: &Path, limit: usize) -> Result<DirFiles, Error> {
    let dir = dir.to_path_buf();
    unblock(move || list_files_blocking(&dir, limit)).await
}

/// Bytes held by the regular files under `root` (to [`TREE_DEPTH`] levels;
/// links not followed, not counted); 0 if it does not exist.
pub async fn tree_bytes(root: &Path) -> Result<u64, Error> {
    let root = root.to_path_buf();
    unblock(move || bytes_under(&root, TREE_DEPTH)).await
}

/// Removes `root` and everything under it (a link is removed, never
/// followed); returns the bytes its regular files held (as
/// [`tree_bytes`] counts them). A missing `root` is not an error.
pub async fn remove_tree(root: &Path) -> Result<u64, Error> {
    let root = root.to_path_buf();
    unblock(move || {
        let bytes = bytes_under(&root, TREE_DEPTH)?;
        match fs::remove_dir_all(&root) {
            Ok(()) => Ok(bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(bytes),
            Err(e) => Err(Error::io("remove directory", &root, e)),
        }
    })
    .await
}

/// When `path` was last modified (a link's own time); `None` if it does
/// not exist.
pub async fn modified(path: &Path) -> Result<Option<SystemTime>, Error> {
    let path = path.to_path_buf();
    unblock(move || match fs::symlink_metadata(&path) {
        Ok(meta) => meta
            .modified()
            .map(Some)
            .map_err(|e| Error::io("read the time of", &path, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("inspect", &path, e)),
    })
    .await
}

fn list_files_blocking(dir: &Path, limit: usize) -> Result<DirFiles, Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(DirFiles::default()),
        Err(e) => return Err(Error::io("list directory", dir, e)),
    };
    // Names first (bounded), then one lstat each for those kept.
    let mut names = Vec::new();
    let mut more = 0;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list directory", dir, e))?;
        if names.len() < limit {
            names.push(entry.path());
        } else {
            more += 1;
        }
    }
    names.sort();
    let mut found = DirFiles {
        more,
        ..DirFiles::default()
    };
    for path in names {
        let meta = match fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            // Removed meanwhile by its writer: not there.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io("inspect", &path, e)),
        };
        if meta.file_type().is_file() {
            found.files.push((path, meta.len()));
        } else {
            found.others.push((path, kind_name(&meta.file_type())));
        }
    }
    Ok(found)
}

fn bytes_under(path: &Path, depth: usize) -> Result<u64, Error> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io("inspect", path, e)),
    };
    if meta.file_type().is_file() {
        return Ok(meta.len());
    }
    if !meta.file_type().is_dir() || depth == 0 {
        return Ok(0);
    }
    let entries = match fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io("list directory", path, e)),
    };
    let mut total = 0u64;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list directory", path, e))?;
        total = total.saturating_add(bytes_under(&entry.path(), depth - 1)?);
    }
    Ok(total)
}

fn kind_name(kind: &fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_reported_never_followed_and_removed_as_links() {
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, b"do not send").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("task");
        std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
        std::fs::write(root.join("b.png"), b"12345").unwrap();
        std::fs::write(root.join("a.txt"), b"1").unwrap();
        std::fs::write(root.join("sub/deeper/c"), b"123").unwrap();
        std::os::unix::fs::symlink(&secret, root.join("link")).unwrap();
        smol::block_on(async {
            let found = list_files(&root, 10).await.unwrap();
            let names = |v: &[(PathBuf, u64)]| -> Vec<String> {
                v.iter()
                    .map(|(p, n)| format!("{}={n}", p.file_name().unwrap().to_string_lossy()))
                    .collect()
            };
            assert_eq!(names(&found.files), ["a.txt=1", "b.png=5"]);
            let others: Vec<&str> = found.others.iter().map(|(_, k)| *k).collect();
            assert_eq!(others, ["a symbolic link", "a directory"]);
            assert_eq!(found.more, 0);
            let some = list_files(&root, 2).await.unwrap();
            assert_eq!(some.files.len() + some.others.len(), 2);
            assert_eq!(some.more, 2);

            assert_eq!(tree_bytes(&root).await.unwrap(), 9);
            assert!(modified(&root).await.unwrap().is_some());
            assert_eq!(remove_tree(&root).await.unwrap(), 9);
            assert!(!root.exists());
            assert_eq!(std::fs::read(&secret).unwrap(), b"do not send");
            assert_eq!(remove_tree(&root).await.unwrap(), 0);
            assert_eq!(list_files(&root, 10).await.unwrap(), DirFiles::default());
            assert_eq!(modified(&root).await.unwrap(), None);
        });
    }
}
