//! The real journal: `failures.jsonl`, append-only JSON lines, rotated by
//! size into `failures.jsonl.1` (newest) .. `failures.jsonl.N`.
//!
//! Every file operation is one `offload` call (append + fsync, durable
//! rename, remove), so nothing here blocks the thread that polls it. One
//! async lock orders the operations: a size check and the rotation it
//! triggers cannot interleave with another record's append, and records
//! queued behind a stalled fsync wait on the lock without holding a thread.
//!
//! The size is learnt once, by reading the file on first use; the same read
//! notices a torn last line left by a crash, and the next append starts with
//! a newline so the new line is not glued onto the fragment.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use async_io::Timer;
use futures_lite::future::{self, Boxed};
use smol::lock::{Mutex, MutexGuard};

use super::journal::rotated_path;
use super::sink::{JournalSink, NotStarted, SinkError};
use smolcord::offload;

/// The journal file in a state directory, rotated by size.
pub struct FileSink {
    path: PathBuf,
    max_bytes: u64,
    keep: usize,
    state: Mutex<FileState>,
    closing: AtomicBool,
}

#[derive(Default)]
struct FileState {
    /// The current file's size; `None` until read (and after a failed
    /// append, whose partial write may have changed it).
    size: Option<u64>,
    /// The file ends without a newline (a torn write).
    torn_tail: bool,
}

impl FileSink {
    /// A journal at `path` that rotates before a line would take it past
    /// `max_bytes`, keeping `keep` rotated files (0: just start afresh).
    pub fn new(path: impl Into<PathBuf>, max_bytes: u64, keep: usize) -> FileSink {
        FileSink {
            path: path.into(),
            max_bytes,
            keep,
            state: Mutex::new(FileState::default()),
            closing: AtomicBool::new(false),
        }
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lock, if it comes before `start_by` and the journal is open.
    async fn turn(&self, start_by: Instant) -> Result<MutexGuard<'_, FileState>, SinkError> {
        let locked = future::or(async { Some(self.state.lock().await) }, async {
            Timer::at(start_by).await;
            None
        })
        .await;
        if self.closing.load(Ordering::Acquire) {
            return Err(NotStarted::Closed.into());
        }
        match locked {
            Some(guard) if Instant::now() <= start_by => Ok(guard),
            _ => Err(NotStarted::TooLate.into()),
        }
    }

    /// Reads the current file once for its size and its last byte.
    async fn learn(&self, state: &mut FileState) -> Result<u64, offload::Error> {
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            offload::create_dir_all(dir).await?;
        }
        // Only the size and the last byte: the journal is never read whole
        // here (and a link or FIFO in its place is refused, not followed).
        let (size, torn) = match offload::size_and_last_byte(&self.path).await? {
            Some((size, last)) => (size, last.is_some_and(|b| b != b'\n')),
            None => (0, false),
        };
        state.size = Some(size);
        state.torn_tail = torn;
        Ok(size)
    }

    /// `failures.jsonl.(n-1)` -> `.n`, ..., `failures.jsonl` -> `.1`; the
    /// oldest kept file is replaced by the rename.
    async fn rotate(&self) -> Result<(), offload::Error> {
        if self.keep == 0 {
            return offload::remove_file(&self.path).await;
        }
        for n in (1..self.keep).rev() {
            let from = rotated_path(&self.path, n);
            match offload::rename_durable(&from, &rotated_path(&self.path, n + 1)).await {
                Err(e) if e.io_kind() != Some(std::io::ErrorKind::NotFound) => return Err(e),
                _ => {}
            }
        }
        offload::rename_durable(&self.path, &rotated_path(&self.path, 1)).await
    }
}

impl JournalSink for FileSink {
    fn prepare(
        self: Arc<Self>,
        line_len: usize,
        start_by: Instant,
    ) -> Boxed<Result<(), SinkError>> {
        Box::pin(async move {
            let mut state = self.turn(start_by).await?;
            let size = match state.size {
                Some(size) => size,
                None => self.learn(&mut state).await?,
            };
            if size > 0 && size + line_len as u64 > self.max_bytes {
                self.rotate().await?;
                state.size = Some(0);
                state.torn_tail = false;
            }
            Ok(())
        })
    }

    fn append_synced(
        self: Arc<Self>,
        line: Vec<u8>,
        start_by: Instant,
    ) -> Boxed<Result<(), SinkError>> {
        Box::pin(async move {
            let mut state = self.turn(start_by).await?;
            let size = match state.size {
                Some(size) => size,
                None => self.learn(&mut state).await?,
            };
            let mut bytes = line;
            if state.torn_tail {
                bytes.insert(0, b'\n');
            }
            let written = bytes.len() as u64;
            match offload::append_line_synced(&self.path, bytes).await {
                Ok(()) => {
                    state.size = Some(size + written);
                    state.torn_tail = false;
                    Ok(())
                }
                Err(e) => {
                    state.size = None;
                    Err(e.into())
                }
            }
        })
    }

    fn close(self: Arc<Self>) -> Boxed<Result<(), SinkError>> {
        // Before the first await: from here on no operation starts.
        self.closing.store(true, Ordering::Release);
        Box::pin(async move {
            // Taking the lock waits out the write in progress, if any.
            drop(self.state.lock().await);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_operation_waiting_behind_another_gives_up_at_its_limit_without_writing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("failures.jsonl");
        let sink = Arc::new(FileSink::new(&path, 1 << 20, 2));
        smol::block_on(async {
            let held = sink.state.lock().await; // an earlier write in progress
            let started = Instant::now();
            let start_by = started + Duration::from_millis(50);
            let result = Arc::clone(&sink)
                .append_synced(b"{}\n".to_vec(), start_by)
                .await;
            let err = result.unwrap_err();
            assert_eq!(err.downcast_ref::<NotStarted>(), Some(&NotStarted::TooLate));
            assert!(started.elapsed() < Duration::from_secs(3));
            drop(held);
            assert_eq!(offload::read_bytes(&path).await.unwrap(), None);
        });
    }

    #[test]
    fn close_refuses_later_operations() {
        let dir = tempfile::tempdir().unwrap();
        let sink = Arc::new(FileSink::new(dir.path().join("j"), 1 << 20, 2));
        smol::block_on(async {
            Arc::clone(&sink).close().await.unwrap();
            let far = Instant::now() + Duration::from_secs(60);
            let err = Arc::clone(&sink).prepare(10, far).await.unwrap_err();
            assert_eq!(err.downcast_ref::<NotStarted>(), Some(&NotStarted::Closed));
        });
    }
}
