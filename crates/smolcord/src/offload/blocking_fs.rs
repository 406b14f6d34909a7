//! The blocking filesystem primitives behind `offload`'s async functions.
//!
//! Everything here blocks (open, write, fsync, rename) and must only run
//! inside [`super::unblock`]: each public async function in `offload` makes
//! exactly one `unblock` call that runs one of these to completion, so a
//! write costs one thread hand-off, not one per syscall.

// This file is the sanctioned home of blocking std::fs calls; clippy.toml
// forbids them everywhere else, and callers reach them only through unblock.
#![allow(clippy::disallowed_methods)]

use std::collections::BinaryHeap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{Error, FileKind, STATE_FILE_MAX_BYTES};

/// Mode for files we create: state files may hold private data.
const FILE_MODE: u32 = 0o600;
/// Mode for directories we create.
const DIR_MODE: u32 = 0o700;
/// How many temp names to try before giving up (a clash needs a stale temp
/// file with the same random name: practically never more than once).
const TEMP_ATTEMPTS: usize = 16;

/// The directory holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// `<path>.bak`: the backup kept by the `_with_backup` writers.
pub(crate) fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    PathBuf::from(name)
}

/// Writes `bytes` to `path` so that a crash leaves the old or the new
/// content, never a mix: temp file in the same directory (0600, O_EXCL),
/// fsync it, rename over `path`, fsync the directory. Run as root in a
/// directory someone else owns, the file gets the directory's owner (see
/// [`owned_like_dir`]).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let Some(file_name) = path.file_name() else {
        return Err(Error::InvalidPath { path: path.into() });
    };
    let dir = parent_dir(path);
    let (tmp, mut file) = create_temp(dir, &file_name.to_string_lossy())?;
    let written = owned_like_dir(&file, dir)
        .map_err(|e| Error::io("give the directory's owner the temp file", &tmp, e))
        .and_then(|()| {
            file.write_all(bytes)
                .map_err(|e| Error::io("write temp file", &tmp, e))
        })
        .and_then(|()| {
            file.sync_all()
                .map_err(|e| Error::io("fsync temp file", &tmp, e))
        })
        .and_then(|()| {
            drop(file);
            fs::rename(&tmp, path).map_err(|e| Error::io("rename temp file over", path, e))
        });
    if let Err(e) = written {
        // Best effort: a leftover temp file is harmless but untidy.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fsync_dir(dir)
}

/// Gives a file root just created in `dir` the owner of `dir`, when that
/// is not root: `smolcord pair` run with sudo beside a bridge that runs as
/// another user (systemd's DynamicUser, the image's 65534) must not leave
/// it an `access.json` it cannot read (0600 root). Anyone else's files are
/// theirs already.
fn owned_like_dir(file: &File, dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    let owner = fs::metadata(dir)?;
    if owner.uid() == 0 {
        return Ok(());
    }
    rustix::fs::fchown(
        file,
        Some(rustix::fs::Uid::from_raw(owner.uid())),
        Some(rustix::fs::Gid::from_raw(owner.gid())),
    )?;
    Ok(())
}

/// Creates a fresh temp file next to the target. O_EXCL guarantees we never
/// write into a file someone else (or a crashed earlier run) is using.
fn create_temp(dir: &Path, file_name: &str) -> Result<(PathBuf, File), Error> {
    let mut last_err = None;
    for _ in 0..TEMP_ATTEMPTS {
        let tmp = dir.join(format!(".{file_name}.{:016x}.tmp", fastrand::u64(..)));
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&tmp)
        {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => return Err(Error::io("create temp file", tmp, e)),
        }
    }
    let e = last_err.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists));
    Err(Error::io("create temp file in", dir, e))
}

/// Makes a directory's entries (a rename, a new file) durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync directory", dir, e))
}

/// Reads a state file (at most [`STATE_FILE_MAX_BYTES`], a regular file
/// and not a link); `Ok(None)` if it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    read_capped(path, STATE_FILE_MAX_BYTES, FileKind::Regular)
}

/// Opens `path` for reading, or with `append` for appending, if it is a
/// regular file: the one door every file smolcord reads goes through.
/// `O_NONBLOCK`, so a FIFO opens at once (and is then refused) instead of
/// waiting for a writer forever; `O_NOFOLLOW` under [`FileKind::Regular`];
/// then fstat must say "regular file", so `/dev/zero`, a directory or a
/// socket is [`Error::NotRegular`] before a byte is read. `Ok(None)` if
/// nothing is there (only when not creating).
pub(crate) fn open_regular(
    path: &Path,
    kind: FileKind,
    append: bool,
) -> Result<Option<(File, fs::Metadata)>, Error> {
    let mut options = OpenOptions::new();
    if append {
        options.append(true);
    } else {
        options.read(true);
    }
    let mut flags = rustix::fs::OFlags::NONBLOCK;
    if kind == FileKind::Regular {
        flags |= rustix::fs::OFlags::NOFOLLOW;
    }
    options.custom_flags(flags.bits() as i32);
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // O_NOFOLLOW on a symbolic link fails with ELOOP.
        Err(e)
            if kind == FileKind::Regular
                && e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) =>
        {
            return Err(Error::NotRegular {
                path: path.into(),
                what: "a symbolic link",
            })
        }
        // A FIFO without a reader refuses a non-blocking writer (ENXIO).
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::NXIO.raw_os_error()) => {
            return Err(Error::NotRegular {
                path: path.into(),
                what: "a FIFO or socket",
            })
        }
        Err(e) => {
            return Err(Error::io(
                if append { "open for append" } else { "open" },
                path,
                e,
            ))
        }
    };
    let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    if !meta.is_file() {
        return Err(Error::NotRegular {
            path: path.into(),
            what: file_type_name(&meta.file_type()),
        });
    }
    Ok(Some((file, meta)))
}

/// Reads at most `limit` bytes of the regular file `path` (see
/// [`open_regular`]); more is [`Error::TooLarge`], found from its size
/// before reading and, should it grow meanwhile, after reading `limit + 1`
/// bytes, never the whole file. `Ok(None)` if it does not exist.
pub(crate) fn read_capped(
    path: &Path,
    limit: u64,
    kind: FileKind,
) -> Result<Option<Vec<u8>>, Error> {
    let Some((file, meta)) = open_regular(path, kind, false)? else {
        return Ok(None);
    };
    let too_large = || Error::TooLarge {
        path: path.into(),
        limit,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", path, e))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(Some(bytes))
}

/// The size of the regular file `path` (not a link) and its last byte, read
/// alone; `Ok(None)` if it does not exist.
pub(crate) fn size_and_last_byte(path: &Path) -> Result<Option<(u64, Option<u8>)>, Error> {
    use std::os::unix::fs::FileExt;
    let Some((file, meta)) = open_regular(path, FileKind::Regular, false)? else {
        return Ok(None);
    };
    let size = meta.len();
    if size == 0 {
        return Ok(Some((0, None)));
    }
    let mut last = [0u8; 1];
    let n = file
        .read_at(&mut last, size - 1)
        .map_err(|e| Error::io("read", path, e))?;
    Ok(Some((size, (n == 1).then_some(last[0]))))
}

/// Whether `path` is missing, or a regular file (not a link) of at most
/// `limit` bytes: [`read_capped`]'s refusals without reading a byte.
pub(crate) fn check_regular(path: &Path, limit: u64) -> Result<(), Error> {
    match open_regular(path, FileKind::Regular, false)? {
        Some((_, meta)) if meta.len() > limit => Err(Error::TooLarge {
            path: path.into(),
            limit,
        }),
        _ => Ok(()),
    }
}

fn file_type_name(kind: &fs::FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
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

/// Whether something (a symbolic link included, not followed) is at `path`.
pub(crate) fn exists(path: &Path) -> Result<bool, Error> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("stat", path, e)),
    }
}

/// Renames and fsyncs the directory (or both directories) involved.
pub(crate) fn rename_durable(from: &Path, to: &Path) -> Result<(), Error> {
    fs::rename(from, to).map_err(|e| Error::io("rename to", to, e))?;
    let (from_dir, to_dir) = (parent_dir(from), parent_dir(to));
    fsync_dir(to_dir)?;
    if from_dir != to_dir {
        fsync_dir(from_dir)?;
    }
    Ok(())
}

/// Removes a file; a missing file is not an error.
pub(crate) fn remove_file(path: &Path) -> Result<(), Error> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("remove", path, e)),
    }
}

/// Creates a directory and its parents; new ones get mode 0700.
pub(crate) fn create_dir_all(path: &Path) -> Result<(), Error> {
    DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)
        .map_err(|e| Error::io("create directory", path, e))
}

/// The entries of `dir`, sorted; empty if `dir` does not exist.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list directory", dir, e)),
    };
    let mut paths = entries
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::io("list directory", dir, e))?;
    paths.sort();
    Ok(paths)
}

/// The `limit` smallest names in `dir` that are greater than `after` and
/// pass `keep`, sorted, as full paths; and whether more names would have
/// qualified. Memory is bounded by `limit` however many entries there are.
pub(crate) fn list_dir_page(
    dir: &Path,
    after: Option<&OsStr>,
    limit: usize,
    keep: fn(&OsStr) -> bool,
) -> Result<(Vec<PathBuf>, bool), Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(e) => return Err(Error::io("list directory", dir, e)),
    };
    // A max-heap of the smallest names so far: its top is the one to evict.
    let mut page: BinaryHeap<OsString> = BinaryHeap::with_capacity(limit.min(1024) + 1);
    let mut more = false;
    for entry in entries {
        let name = entry
            .map_err(|e| Error::io("list directory", dir, e))?
            .file_name();
        if !keep(&name) || after.is_some_and(|after| name.as_os_str() <= after) {
            continue;
        }
        if page.len() < limit {
            page.push(name);
        } else {
            more = true;
            if page.peek().is_some_and(|largest| name < *largest) {
                page.pop();
                page.push(name);
            }
        }
    }
    let names = page.into_sorted_vec();
    Ok((names.into_iter().map(|n| dir.join(n)).collect(), more))
}

/// Appends `line` (plus a newline if it lacks one) in a single write, then
/// fsyncs; a newly created file (0600) also gets its directory fsynced.
pub(crate) fn append_line_synced(path: &Path, mut line: Vec<u8>) -> Result<(), Error> {
    if line.last() != Some(&b'\n') {
        line.push(b'\n');
    }
    // The journal's path is not followed through a link and never waits on
    // a FIFO: whatever is there must be a regular file.
    let (mut file, created) = match open_regular(path, FileKind::Regular, true)? {
        Some((file, _)) => (file, false),
        None => {
            let file = OpenOptions::new()
                .append(true)
                .create(true)
                .mode(FILE_MODE)
                .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                .open(path)
                .map_err(|e| Error::io("create", path, e))?;
            (file, true)
        }
    };
    // One write_all of one buffer: with O_APPEND, concurrent appenders'
    // lines do not interleave on local filesystems.
    file.write_all(&line)
        .map_err(|e| Error::io("append to", path, e))?;
    file.sync_data().map_err(|e| Error::io("fsync", path, e))?;
    if created {
        fsync_dir(parent_dir(path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_writing_in_someone_elses_directory_leaves_the_file_theirs() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: needs root (chown)");
            return;
        }
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let owned = dir.path().join("state");
        fs::create_dir(&owned).unwrap();
        std::os::unix::fs::chown(&owned, Some(65534), Some(65534)).unwrap();
        let file = owned.join("access.json");
        write_atomic(&file, b"{}").unwrap();
        write_atomic(&backup_path(&file), b"{}").unwrap();
        for path in [file.clone(), backup_path(&file)] {
            let meta = fs::metadata(&path).unwrap();
            assert_eq!(
                (meta.uid(), meta.gid()),
                (65534, 65534),
                "{}",
                path.display()
            );
            assert_eq!(meta.mode() & 0o777, FILE_MODE, "{}", path.display());
        }
        // Root's own directory: root's file, as before.
        let mine = dir.path().join("mine.json");
        write_atomic(&mine, b"{}").unwrap();
        assert_eq!(fs::metadata(&mine).unwrap().uid(), 0);
    }

    #[test]
    fn a_directory_is_paged_in_name_order_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["d", "b", ".hidden", "e", "a", "c"] {
            fs::write(dir.path().join(name), "").unwrap();
        }
        let visible = |name: &OsStr| !name.to_string_lossy().starts_with('.');
        let names = |paths: Vec<PathBuf>| -> Vec<String> {
            paths
                .iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        let (page, more) = list_dir_page(dir.path(), None, 2, visible).unwrap();
        assert_eq!((names(page), more), (vec!["a".into(), "b".into()], true));
        let (page, more) = list_dir_page(dir.path(), Some("b".as_ref()), 2, visible).unwrap();
        assert_eq!((names(page), more), (vec!["c".into(), "d".into()], true));
        let (page, more) = list_dir_page(dir.path(), Some("d".as_ref()), 2, visible).unwrap();
        assert_eq!((names(page), more), (vec!["e".to_owned()], false));
        let missing = dir.path().join("missing");
        assert_eq!(
            list_dir_page(&missing, None, 2, visible).unwrap(),
            (vec![], false)
        );
    }

    #[test]
    fn a_capped_read_stops_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        fs::write(&path, b"12345").unwrap();
        assert_eq!(
            read_capped(&path, 5, FileKind::RegularBehindLink).unwrap(),
            Some(b"12345".to_vec())
        );
        assert!(matches!(
            read_capped(&path, 4, FileKind::Regular),
            Err(Error::TooLarge { limit: 4, .. })
        ));
        assert!(matches!(
            read_capped(Path::new("/dev/zero"), 4, FileKind::RegularBehindLink),
            Err(Error::NotRegular {
                what: "a device",
                ..
            })
        ));
        assert!(matches!(
            read_capped(Path::new("/dev/zero"), 4, FileKind::Regular),
            Err(Error::NotRegular {
                what: "a device",
                ..
            })
        ));
        assert_eq!(
            read_capped(&dir.path().join("none"), 4, FileKind::RegularBehindLink).unwrap(),
            None
        );
    }
}
