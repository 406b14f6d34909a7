//! Application, not library API: a bounded background journal of failures that never delays a
//! reply.
//!
//! Why: a web bridge once awaited its failure recorder inside the response
//! path, and every response waited seconds for recorder clean-up. Here
//! [`Recorder::record`] is synchronous admission: it takes one of a fixed
//! number of in-flight slots (default 32) or drops the record with a warning
//! naming only the failure's kind, and returns at once. The caller never
//! awaits the write.
//!
//! An admitted record is written in the background: one shared deadline
//! (default 2 s) covers opening the journal, the append and the fsync, each
//! operation also bounded by its own limit (default 1 s); all blocking work
//! goes through [`smolcord::offload`]. A record keeps its slot until its
//! blocking work has really finished, even past its deadline, so a stalled
//! disk holds at most `capacity` writes. [`Recorder::shutdown`] closes
//! admission, waits a bounded time for the records in flight, says how many
//! were left, and only then closes the journal.
//!
//! Where the writes run: smolcord lives on one thread's `LocalExecutor`, and
//! `record()` has no handle to it. Each record's writer is a detached task
//! whose polls are short jobs on the `blocking` pool (see `background.rs`):
//! no executor handle to pass around, no extra executor thread, and no
//! thread held while a record merely waits.
//!
//! The journal is `STATE_DIR/failures.jsonl`, one JSON object per line
//! (time, kind, place, status, message, and a failed command's stderr
//! end), rotated by size; [`read_journal`]
//! reads it back, skipping a torn last line with a notice.
//!
//! ```no_run
//! # smol::block_on(async {
//! use std::time::Duration;
//! use smolcord_app::recorder::{Failure, FailureKind, Recorder, RecorderConfig};
//!
//! let recorder = Recorder::new(RecorderConfig::in_state_dir("state"));
//! recorder.record(Failure {
//!     kind: FailureKind::Rest,
//!     place: "POST /channels/{id}/messages".into(),
//!     status: Some(503),
//!     message: "service unavailable".into(),
//!     stderr: None,
//! }); // returns at once
//! let unfinished = recorder.shutdown(Duration::from_secs(2)).await;
//! # let _ = unfinished; });
//! ```

mod admission;
mod background;
mod clock;
mod failure;
mod file_sink;
mod journal;
mod sink;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_io::Timer;
use futures_lite::future;

use admission::{Refusal, Slots};
use writer::{Counters, Limits, Record};

pub use failure::{
    Admission, Failure, FailureKind, MAX_MESSAGE_BYTES, MAX_PLACE_BYTES, MAX_STDERR_BYTES,
};
pub use file_sink::FileSink;
pub use journal::{journal_path, read_journal, JournalContents, JournalEntry, FILE_NAME};
pub use sink::{JournalSink, NotStarted, SinkError};

/// Settings. Build with [`RecorderConfig::new`] (or `in_state_dir`) and
/// adjust the fields.
#[derive(Clone, Debug)]
pub struct RecorderConfig {
    /// The journal file (`STATE_DIR/failures.jsonl`).
    pub path: PathBuf,
    /// Records in flight at most.
    pub capacity: usize,
    /// One deadline per record for everything it does.
    pub deadline: Duration,
    /// Limit of each operation (open, append + fsync) inside the deadline.
    pub op_timeout: Duration,
    /// Rotate before a line would take the file past this size.
    pub max_bytes: u64,
    /// Rotated files kept (`failures.jsonl.1` ..).
    pub keep: usize,
}

impl RecorderConfig {
    /// Default capacity: 32 records in flight.
    pub const DEFAULT_CAPACITY: usize = 32;
    /// Default deadline per record: 2 s.
    pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(2);
    /// Default limit per operation: 1 s.
    pub const DEFAULT_OP_TIMEOUT: Duration = Duration::from_secs(1);
    /// Default rotation size: 512 KiB (a few thousand failures).
    pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024;
    /// Default rotated files kept: 3.
    pub const DEFAULT_KEEP: usize = 3;
    /// Default shutdown drain bound: 2 s.
    pub const DEFAULT_SHUTDOWN_BOUND: Duration = Duration::from_secs(2);

    /// Defaults, journal at `path`.
    pub fn new(path: impl Into<PathBuf>) -> RecorderConfig {
        RecorderConfig {
            path: path.into(),
            capacity: Self::DEFAULT_CAPACITY,
            deadline: Self::DEFAULT_DEADLINE,
            op_timeout: Self::DEFAULT_OP_TIMEOUT,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            keep: Self::DEFAULT_KEEP,
        }
    }

    /// Defaults, journal at `state_dir/failures.jsonl`.
    pub fn in_state_dir(state_dir: impl AsRef<Path>) -> RecorderConfig {
        RecorderConfig::new(journal_path(state_dir.as_ref()))
    }
}

/// Counters since the recorder was made (for the status snapshot and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecorderStats {
    /// Records in flight now.
    pub in_flight: usize,
    /// Records admitted.
    pub admitted: u64,
    /// Records dropped (full, or shutting down).
    pub dropped: u64,
    /// Lines made durable (late ones included).
    pub written: u64,
    /// Records whose operation failed.
    pub failed: u64,
    /// Records whose deadline or operation limit fired.
    pub timed_out: u64,
}

struct Shared {
    config: RecorderConfig,
    sink: Arc<dyn JournalSink>,
    slots: Arc<Slots>,
    counters: Arc<Counters>,
    closing_journal: AtomicBool,
}

/// The failure recorder. Cheap to clone; clones share one journal.
#[derive(Clone)]
pub struct Recorder {
    shared: Option<Arc<Shared>>,
}

impl Recorder {
    /// A recorder writing to `config.path` (created on the first failure).
    pub fn new(config: RecorderConfig) -> Recorder {
        let sink = Arc::new(FileSink::new(&config.path, config.max_bytes, config.keep));
        Recorder::with_sink(config, sink)
    }

    /// A recorder writing to `sink` (`config.path`, `max_bytes` and `keep`
    /// are then the sink's business).
    pub fn with_sink(config: RecorderConfig, sink: Arc<dyn JournalSink>) -> Recorder {
        Recorder {
            shared: Some(Arc::new(Shared {
                slots: Slots::new(config.capacity),
                config,
                sink,
                counters: Arc::default(),
                closing_journal: AtomicBool::new(false),
            })),
        }
    }

    /// A recorder that drops everything (for comparisons and tests).
    pub fn disabled() -> Recorder {
        Recorder { shared: None }
    }

    /// Admits or drops `failure` at once; never waits.
    pub fn record(&self, failure: Failure) -> Admission {
        let Some(shared) = &self.shared else {
            return Admission::Dropped;
        };
        let kind = failure.kind;
        let slot = match shared.slots.try_take() {
            Ok(slot) => slot,
            Err(refusal) => {
                shared.counters.dropped.fetch_add(1, Ordering::Relaxed);
                // The kind only: place and message may identify a person.
                match refusal {
                    Refusal::Full => log::warn!(
                        "failure journal full ({} records in flight): dropped a `{kind}` failure",
                        shared.slots.capacity()
                    ),
                    Refusal::Closed => {
                        log::warn!("failure journal is shutting down: dropped a `{kind}` failure")
                    }
                }
                return Admission::Dropped;
            }
        };
        shared.counters.admitted.fetch_add(1, Ordering::Relaxed);
        let record = Record {
            failure,
            time: SystemTime::now(),
            admitted: Instant::now(),
        };
        let limits = Limits {
            deadline: shared.config.deadline,
            op_timeout: shared.config.op_timeout,
        };
        background::spawn_detached(writer::write(
            Arc::clone(&shared.sink),
            limits,
            Arc::clone(&shared.counters),
            record,
            slot,
        ));
        Admission::Admitted
    }

    /// Records in flight now.
    pub fn in_flight(&self) -> usize {
        self.shared.as_ref().map_or(0, |s| s.slots.in_flight())
    }

    /// The counters.
    pub fn stats(&self) -> RecorderStats {
        let Some(shared) = &self.shared else {
            return RecorderStats::default();
        };
        let c = &shared.counters;
        RecorderStats {
            in_flight: shared.slots.in_flight(),
            admitted: c.admitted.load(Ordering::Relaxed),
            dropped: c.dropped.load(Ordering::Relaxed),
            written: c.written.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            timed_out: c.timed_out.load(Ordering::Relaxed),
        }
    }

    /// Waits at most `bound` until no record is in flight, admission staying
    /// open; returns how many still are.
    pub async fn wait_idle(&self, bound: Duration) -> usize {
        match &self.shared {
            Some(shared) => shared.slots.wait_idle(bound).await,
            None => 0,
        }
    }

    /// Stops admission and waits at most `bound` for records in flight;
    /// returns how many were left unfinished (and warns with the count).
    /// Then, and never before, closes the journal: no write starts after
    /// that. A second call only waits again.
    pub async fn shutdown(&self, bound: Duration) -> usize {
        let Some(shared) = &self.shared else {
            return 0;
        };
        shared.slots.close();
        let unfinished = shared.slots.wait_idle(bound).await;
        if unfinished > 0 {
            log::warn!(
                "failure journal: {unfinished} record(s) unfinished after waiting {bound:?} at \
                 shutdown; closing the journal without them"
            );
        }
        if !shared.closing_journal.swap(true, Ordering::AcqRel) {
            close_journal(shared, unfinished).await;
        }
        unfinished
    }
}

async fn close_journal(shared: &Shared, unfinished: usize) {
    // Closing takes effect when called (the sink contract): nothing starts
    // after this line.
    let closing = Arc::clone(&shared.sink).close();
    if unfinished > 0 {
        // A write is stuck; waiting for it again would only stretch the
        // shutdown past its bound. It finishes (or not) on its own.
        drop(closing);
        return;
    }
    let closed = future::or(async { Some(closing.await) }, async {
        Timer::after(shared.config.op_timeout).await;
        None
    })
    .await;
    match closed {
        Some(Ok(())) => log::debug!("failure journal closed"),
        Some(Err(e)) => log::warn!("failure journal: closing it failed: {e}"),
        None => log::warn!(
            "failure journal: a write still running after {:?} holds the journal; \
             nothing more will be written to it",
            shared.config.op_timeout
        ),
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.shared {
            None => f.write_str("Recorder(disabled)"),
            Some(shared) => f
                .debug_struct("Recorder")
                .field("path", &shared.config.path)
                .field("capacity", &shared.config.capacity)
                .field("in_flight", &shared.slots.in_flight())
                .finish(),
        }
    }
}
