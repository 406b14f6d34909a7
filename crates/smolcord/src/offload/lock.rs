//! One bridge per state dir: an exclusive `flock` on `smolcord.lock` in
//! it, held for the life of the process.
//!
//! Two bridges on one state dir resume each other's gateway session over
//! and over and run the agent twice per message; the second must not start.
//! The kernel drops the lock when the holder exits, however it exits, so a
//! crash never leaves a stale lock. The holder writes its pid into the file
//! for the refusal to name. The descriptor is close-on-exec: an agent that
//! outlives the bridge does not keep it locked. `status`, `pair` and
//! `failures` take no lock: they work beside the running bridge.
//!
//! Close-on-exec closes it only at the exec, though: a child the bridge
//! was spawning when it died (between fork and exec, on a busy host
//! milliseconds or more) holds a copy of the descriptor, and with it the
//! lock, for that long after the bridge is gone. A restart right after a
//! crash (systemd's, the crash harness's) then found the lock held and
//! exited 73, which systemd does not restart on: the bot stayed down. So
//! a lock held while the pid written in it is no longer alive is waited
//! for ([`DEAD_HOLDER_WAIT`]); a live holder is refused at once.
//! (POSIX record locks are not inherited by a fork at all, but any close
//! of the file anywhere in the process drops them.)

// Start-up only, and on the blocking pool (see `lock_dir`).
#![allow(clippy::disallowed_methods)]

use super::{blocking_fs, unblock, Error, FileKind};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lock file's name in the state dir.
pub const LOCK_FILE: &str = "smolcord.lock";
/// The most read from a lock file (a pid and a newline).
const LOCK_FILE_MAX_BYTES: u64 = 64;
/// How long a lock whose writer is dead is waited for: what holds it is a
/// child of the dead bridge about to exec (see the module doc). Short of
/// any supervisor's restart interval; far above the exec of a loaded Pi.
pub const DEAD_HOLDER_WAIT: Duration = Duration::from_secs(5);
/// How often it is tried meanwhile.
const DEAD_HOLDER_POLL: Duration = Duration::from_millis(20);

/// The held lock; dropping it (or exiting) releases it.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Takes the exclusive lock on `dir` (created 0700 if missing), at once or
/// not at all: [`Error::Locked`] naming the holder's pid when another
/// process holds it.
pub async fn lock_dir(dir: &Path) -> Result<DirLock, Error> {
    let dir = dir.to_path_buf();
    unblock(move || lock_blocking(&dir)).await
}

fn lock_blocking(dir: &Path) -> Result<DirLock, Error> {
    use rustix::fs::{flock, FlockOperation};
    use std::os::unix::fs::OpenOptionsExt;
    blocking_fs::create_dir_all(dir)?;
    let path = dir.join(LOCK_FILE);
    // Created if missing (0600), never truncated before the lock is ours:
    // the holder's pid is in it.
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags((rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK).bits() as i32)
        .open(&path)
        .map_err(|e| Error::io("create", &path, e))?;
    // Reopened through the one checked door: a regular file, not a link.
    let Some((file, _)) = blocking_fs::open_regular(&path, FileKind::Regular, true)? else {
        return Err(Error::io(
            "open",
            &path,
            std::io::ErrorKind::NotFound.into(),
        ));
    };
    let started = Instant::now();
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => break,
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let pid = holder_pid(&path);
                let dead = pid.is_some_and(|pid| !alive(pid));
                if !dead || started.elapsed() >= DEAD_HOLDER_WAIT {
                    return Err(Error::Locked {
                        dir: dir.into(),
                        pid,
                    });
                }
                std::thread::sleep(DEAD_HOLDER_POLL);
            }
            Err(e) => return Err(Error::io("lock", &path, e.into())),
        }
    }
    if started.elapsed() >= DEAD_HOLDER_POLL {
        log::info!(
            "{} was held for {:.2} s after its bridge died (a child it was spawning); taken",
            path.display(),
            started.elapsed().as_secs_f64()
        );
    }
    write_pid(&file, &path)?;
    Ok(DirLock { _file: file })
}

/// Replaces the file's content with our pid (append mode: truncate first).
fn write_pid(mut file: &File, path: &PathBuf) -> Result<(), Error> {
    file.set_len(0)
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .map_err(|e| Error::io("write", path, e))
}

/// Whether process `pid` exists (a pid of another user's process counts).
fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

/// The pid the holder wrote, if it has yet.
fn holder_pid(path: &Path) -> Option<u32> {
    let bytes = blocking_fs::read_capped(path, LOCK_FILE_MAX_BYTES, FileKind::Regular).ok()??;
    std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_dir_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let held = lock_blocking(dir.path()).unwrap();
        let pid = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
        // flock locks belong to the open file description: a second open in
        // this process conflicts like another process would.
        match lock_blocking(dir.path()) {
            Err(Error::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Locked, got {other:?}"),
        }
        drop(held);
        lock_blocking(dir.path()).expect("free again once dropped");
    }

    #[test]
    fn a_lock_outliving_its_dead_writer_is_waited_for_and_taken() {
        use rustix::fs::{flock, FlockOperation};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        // A dead bridge's pid in the file, and its lock still held by
        // another descriptor (a child between fork and exec).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        std::fs::write(&path, format!("{dead}\n")).unwrap();
        let inherited = File::open(&path).unwrap();
        flock(&inherited, FlockOperation::NonBlockingLockExclusive).unwrap();
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(inherited);
        });
        let started = Instant::now();
        lock_blocking(dir.path()).expect("taken once the child lets go");
        assert!(started.elapsed() >= Duration::from_millis(250));
        release.join().unwrap();
    }

    #[test]
    fn a_lock_held_by_a_live_process_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let _held = lock_blocking(dir.path()).unwrap();
        let started = Instant::now();
        assert!(matches!(
            lock_blocking(dir.path()),
            Err(Error::Locked { .. })
        ));
        assert!(started.elapsed() < DEAD_HOLDER_WAIT / 2);
    }
}
