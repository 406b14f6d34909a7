//! Wakes the results poller when something changes on disk: a file renamed
//! into `spool/results/`, or `access.json` replaced (by `smolcord pair`).
//! With inotify (Linux) an idle bridge needs no polling timer at all; where
//! a directory cannot be watched, the poller falls back to its timer.

use async_io::Async;
use std::path::PathBuf;

#[cfg(target_os = "linux")]
use rustix::fs::inotify;
#[cfg(target_os = "linux")]
use std::os::fd::OwnedFd;

/// A watch on the results spool and the state dir's `access.json`.
pub(crate) struct DirWatch {
    #[cfg(target_os = "linux")]
    inner: Option<Watched>,
}

#[cfg(target_os = "linux")]
struct Watched {
    fd: Async<OwnedFd>,
    /// Watch descriptor of the state dir, where only `access_file` counts
    /// (status and session files are replaced there on every heartbeat).
    state_dir_wd: i32,
    access_file: &'static str,
}

impl DirWatch {
    /// Watches `results_dir` (any file moved or written into it) and
    /// `access_file` in `state_dir`. Never fails: without a watch,
    /// [`DirWatch::is_active`] is false and [`DirWatch::changed`] never fires.
    pub(crate) async fn new(
        results_dir: PathBuf,
        state_dir: PathBuf,
        access_file: &'static str,
    ) -> DirWatch {
        #[cfg(target_os = "linux")]
        {
            // inotify_add_watch resolves paths: off the loop, like all file work.
            let opened = crate::offload::unblock(move || open(&results_dir, &state_dir)).await;
            let inner = match opened.and_then(|(fd, wd)| Ok((Async::new(fd)?, wd))) {
                Ok((fd, state_dir_wd)) => Some(Watched {
                    fd,
                    state_dir_wd,
                    access_file,
                }),
                Err(err) => {
                    log::info!("cannot watch the spool with inotify ({err}); polling instead");
                    None
                }
            };
            DirWatch { inner }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (results_dir, state_dir, access_file);
            DirWatch {}
        }
    }

    /// Whether changes are watched (else the caller must poll).
    pub(crate) fn is_active(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.inner.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    /// Resolves after a relevant change (pending forever without a watch).
    pub(crate) async fn changed(&self) {
        #[cfg(target_os = "linux")]
        if let Some(watched) = &self.inner {
            loop {
                if watched.fd.readable().await.is_err() {
                    break;
                }
                if watched.drain() {
                    return;
                }
            }
        }
        futures_lite::future::pending::<()>().await
    }
}

#[cfg(target_os = "linux")]
fn open(
    results_dir: &std::path::Path,
    state_dir: &std::path::Path,
) -> std::io::Result<(OwnedFd, i32)> {
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
    let flags = inotify::WatchFlags::MOVED_TO | inotify::WatchFlags::CLOSE_WRITE;
    inotify::add_watch(&fd, results_dir, flags)?;
    let state_dir_wd = inotify::add_watch(&fd, state_dir, flags)?;
    Ok((fd, state_dir_wd))
}

#[cfg(target_os = "linux")]
impl Watched {
    /// Reads every queued event; true if one of them matters.
    fn drain(&self) -> bool {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(self.fd.get_ref(), &mut buf);
        let mut relevant = false;
        // Ends with EAGAIN once the queue is empty.
        while let Ok(event) = reader.next() {
            let is_access = event
                .file_name()
                .is_some_and(|name| name.to_bytes() == self.access_file.as_bytes());
            if event.wd() != self.state_dir_wd || is_access {
                relevant = true;
            }
        }
        relevant
    }
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
    fn fires_for_results_and_access_but_not_other_state_files() {
        let state = tempfile::tempdir().unwrap();
        let results = state.path().join("results");
        std::fs::create_dir(&results).unwrap();
        smol::block_on(async {
            let watch =
                DirWatch::new(results.clone(), state.path().to_owned(), "access.json").await;
            assert!(watch.is_active());
            std::fs::write(state.path().join("status.json"), "{}").unwrap();
            assert!(!fired(&watch).await, "status.json must not wake the poller");
            std::fs::write(results.join(".r.tmp"), "{}").unwrap();
            std::fs::rename(results.join(".r.tmp"), results.join("r.json")).unwrap();
            assert!(fired(&watch).await, "a result renamed into place");
            std::fs::write(state.path().join("access.json"), "{}").unwrap();
            assert!(fired(&watch).await, "access.json replaced");
        });
    }
}
