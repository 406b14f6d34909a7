//! Wakes the results poller when a file lands in `spool/results/` (inotify
//! on Linux), so an idle bridge needs no polling timer. Where the directory
//! cannot be watched — or stops being watchable: moved or deleted — the
//! poller falls back to its timer.

use smolcord::rt::Async;
use std::cell::Cell;
use std::path::PathBuf;

#[cfg(target_os = "linux")]
use rustix::fs::inotify;
#[cfg(target_os = "linux")]
use std::os::fd::OwnedFd;

/// A watch on one directory.
pub(crate) struct DirWatch {
    #[cfg(target_os = "linux")]
    fd: Option<Async<OwnedFd>>,
    /// The directory went away (moved, deleted): the watch sees nothing more.
    lost: Cell<bool>,
}

impl DirWatch {
    /// Watches `dir` for files moved or written into it. Never fails:
    /// without a watch, [`DirWatch::is_active`] is false and
    /// [`DirWatch::changed`] never fires.
    pub(crate) async fn new(dir: PathBuf) -> DirWatch {
        #[cfg(target_os = "linux")]
        {
            // inotify_add_watch resolves a path: off the loop, like all file work.
            let opened = smolcord::offload::unblock(move || open(&dir)).await;
            let fd = match opened.and_then(Async::new) {
                Ok(fd) => Some(fd),
                Err(err) => {
                    log::info!("cannot watch the spool with inotify ({err}); polling instead");
                    None
                }
            };
            DirWatch {
                fd,
                lost: Cell::new(false),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = dir;
            DirWatch {
                lost: Cell::new(true),
            }
        }
    }

    /// Whether changes are watched (else the caller must poll).
    pub(crate) fn is_active(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.fd.is_some() && !self.lost.get();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Resolves after a change, or when the watch is lost (then
    /// [`DirWatch::is_active`] turns false); pending forever without one.
    pub(crate) async fn changed(&self) {
        #[cfg(target_os = "linux")]
        if let Some(fd) = self.fd.as_ref().filter(|_| !self.lost.get()) {
            if fd.readable().await.is_ok() {
                if drain(fd.get_ref()) {
                    log::info!("the results spool is no longer watched (moved or deleted); polling it instead");
                    self.lost.set(true);
                }
                return;
            }
        }
        futures_lite::future::pending::<()>().await
    }
}

#[cfg(target_os = "linux")]
fn open(dir: &std::path::Path) -> std::io::Result<OwnedFd> {
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
    inotify::add_watch(
        &fd,
        dir,
        inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::CLOSE_WRITE
            | inotify::WatchFlags::DELETE_SELF
            | inotify::WatchFlags::MOVE_SELF,
    )?;
    Ok(fd)
}

/// Reads every queued event (any change means "scan again"; a queue
/// overflow too); stops at EAGAIN. True if the directory itself went away.
#[cfg(target_os = "linux")]
fn drain(fd: &OwnedFd) -> bool {
    use inotify::ReadFlags;
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut events = inotify::Reader::new(fd, &mut buf);
    let mut lost = false;
    while let Ok(event) = events.next() {
        lost |= event
            .events()
            .intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::IGNORED);
    }
    lost
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Whether the watch fires within 300 ms.
    async fn fired(watch: &DirWatch) -> bool {
        futures_lite::future::or(
            async {
                watch.changed().await;
                true
            },
            async {
                async_io::Timer::after(Duration::from_millis(300)).await;
                false
            },
        )
        .await
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // the test writes files directly
    fn fires_when_a_result_lands_and_not_otherwise() {
        let state = tempfile::tempdir().unwrap();
        let results = state.path().join("results");
        std::fs::create_dir(&results).unwrap();
        smol::block_on(async {
            let watch = DirWatch::new(results.clone()).await;
            assert!(watch.is_active());
            std::fs::write(state.path().join("status.json"), "{}").unwrap();
            assert!(
                !fired(&watch).await,
                "a file elsewhere must not wake the poller"
            );
            std::fs::write(results.join(".r.tmp"), "{}").unwrap();
            std::fs::rename(results.join(".r.tmp"), results.join("r.json")).unwrap();
            assert!(fired(&watch).await, "a result renamed into place");
            // Drained: quiet again.
            assert!(!fired(&watch).await);
            // The directory goes away: the watch says so, and stops.
            std::fs::remove_file(results.join("r.json")).unwrap();
            std::fs::remove_dir(&results).unwrap();
            assert!(fired(&watch).await, "the directory's removal");
            assert!(!watch.is_active(), "a lost watch must hand over to polling");
        });
    }
}
