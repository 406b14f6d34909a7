//! Atomic, fsync'd whole-file writes, serialised per path.
//!
//! A write goes to a temp file in the same directory, is fsynced, renamed
//! over the target, and the directory is fsynced: a crash leaves the old or
//! the new file, never a torn one. The whole sequence is one `unblock`.
//!
//! Writes to the same path are serialised and *the last call wins*: each call
//! takes a ticket when first polled, and a write whose ticket is older than
//! the one already on disk is skipped (its value would be overwritten at once
//! anyway). So two concurrent writers never interleave, and the later value is
//! never lost to lock scheduling. The lock guard travels into the blocking
//! closure, so a caller that drops its future mid-write cannot let the next
//! write overtake the one still running on the pool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, PoisonError, Weak};

use serde::de::IgnoredAny;
use serde::Serialize;
use smol::lock::{Mutex, MutexGuardArc};

use super::{blocking_fs, unblock, Error};

/// Serialises `value` as JSON and writes it to `path` atomically (see the module docs).
///
/// Serialisation happens on the calling task (it is CPU work, and failing
/// early keeps the file untouched); the write is one trip to the blocking pool.
pub async fn write_json_atomic<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), Error> {
    let bytes = to_json(path, value)?;
    write_bytes_atomic(path, bytes).await
}

/// Like [`write_json_atomic`], but serialises `value` on the blocking pool,
/// inside the same trip as the write: for a value too large to serialise on
/// the event loop (a snapshot of the channel directory).
pub async fn write_json_atomic_owned<T: Serialize + Send + 'static>(
    path: &Path,
    value: T,
) -> Result<(), Error> {
    let (ticket, lock) = take_ticket(path);
    let guard = lock.lock_arc().await;
    let path = path.to_path_buf();
    unblock(move || {
        let bytes = to_json(&path, &value)?;
        drop(value);
        write_in_turn(guard, ticket, &path, &bytes, false)
    })
    .await
}

/// Writes `bytes` to `path` atomically (see the module docs).
pub async fn write_bytes_atomic(path: &Path, bytes: Vec<u8>) -> Result<(), Error> {
    write_serialised(path, bytes, false).await
}

/// Like [`write_json_atomic`], but first keeps the current file as `<path>.bak`.
///
/// The current file is copied (atomically) only if it parses as JSON, so a
/// corrupt primary never replaces a good backup. At every moment at least one
/// of the two files holds a good value; read with
/// [`read_json`](super::read_json)`(path, Fallback::Backup)`.
pub async fn write_json_atomic_with_backup<T: Serialize + ?Sized>(
    path: &Path,
    value: &T,
) -> Result<(), Error> {
    let bytes = to_json(path, value)?;
    write_serialised(path, bytes, true).await
}

fn to_json<T: Serialize + ?Sized>(path: &Path, value: &T) -> Result<Vec<u8>, Error> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| Error::Serialize {
        path: path.into(),
        source,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

async fn write_serialised(path: &Path, bytes: Vec<u8>, keep_backup: bool) -> Result<(), Error> {
    let (ticket, lock) = take_ticket(path);
    let guard = lock.lock_arc().await;
    let path = path.to_path_buf();
    unblock(move || write_in_turn(guard, ticket, &path, &bytes, keep_backup)).await
}

/// Runs on the blocking pool, holding the path's lock until the write is done.
fn write_in_turn(
    mut on_disk: MutexGuardArc<u64>,
    ticket: u64,
    path: &Path,
    bytes: &[u8],
    keep_backup: bool,
) -> Result<(), Error> {
    if *on_disk > ticket {
        // A later call already wrote its value; ours would only undo it.
        return Ok(());
    }
    if keep_backup {
        back_up_current(path)?;
    }
    blocking_fs::write_atomic(path, bytes)?;
    *on_disk = ticket;
    Ok(())
}

fn back_up_current(path: &Path) -> Result<(), Error> {
    let Some(current) = blocking_fs::read_optional(path)? else {
        return Ok(());
    };
    if let Err(e) = serde_json::from_slice::<IgnoredAny>(&current) {
        log::warn!(
            "not backing up {}: it is not valid JSON ({e}); keeping the old backup",
            path.display()
        );
        return Ok(());
    }
    blocking_fs::write_atomic(&blocking_fs::backup_path(path), &current)
}

/// Per-path state: the next ticket to hand out, and the lock (holding the
/// ticket of the last write on disk). Entries whose lock nobody holds are
/// pruned, so the map stays as small as the set of paths being written.
#[derive(Default)]
struct Slot {
    next_ticket: u64,
    lock: Weak<Mutex<u64>>,
}

static SLOTS: LazyLock<std::sync::Mutex<HashMap<PathBuf, Slot>>> = LazyLock::new(Default::default);

fn take_ticket(path: &Path) -> (u64, Arc<Mutex<u64>>) {
    // Same file, same key, however it was spelled relative to the cwd.
    let key = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    // Held only for a map lookup: never across an await or I/O.
    let mut slots = SLOTS.lock().unwrap_or_else(PoisonError::into_inner);
    if !slots.contains_key(&key) {
        slots.retain(|_, slot| slot.lock.strong_count() > 0);
    }
    let slot = slots.entry(key).or_default();
    let lock = slot.lock.upgrade().unwrap_or_else(|| {
        // Nobody is writing: tickets may restart, the lock starts at "none written".
        slot.next_ticket = 0;
        let lock = Arc::new(Mutex::new(0));
        slot.lock = Arc::downgrade(&lock);
        lock
    });
    slot.next_ticket += 1;
    (slot.next_ticket, lock)
}
