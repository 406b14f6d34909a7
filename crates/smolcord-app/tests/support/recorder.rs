//! The recorder's rig: a journal sink that stalls on demand (a stalled
//! disk) and failures whose text must never leak. Its events wake
//! [`super::wait::wait_until`].

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_lite::future::Boxed;
use smolcord::offload;
use smolcord_app::recorder::{Failure, FailureKind, JournalSink, SinkError};

/// A gate the sink's "fsync" waits at while it is closed.
pub struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    /// Longest a stalled write waits, so a failed test cannot hang the binary.
    const SAFETY: Duration = Duration::from_secs(30);

    pub fn closed() -> Arc<Gate> {
        Arc::new(Gate {
            open: Mutex::new(false),
            opened: Condvar::new(),
        })
    }

    pub fn open(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.opened.notify_all();
    }

    /// Blocks (on the pool) until opened.
    fn pass(&self) {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = self
            .opened
            .wait_timeout_while(open, Self::SAFETY, |open| !*open);
    }
}

/// What the sink saw, with when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SinkEvent {
    AppendStarted,
    AppendReturned,
    Closed,
}

/// A journal whose append + fsync blocks a pool thread until its gate
/// opens (a stalled disk), then appends the line to `path` for real.
pub struct StallSink {
    pub path: PathBuf,
    pub gate: Arc<Gate>,
    events: Mutex<Vec<(Instant, SinkEvent)>>,
}

impl StallSink {
    pub fn new(path: &Path) -> Arc<StallSink> {
        Arc::new(StallSink {
            path: path.to_path_buf(),
            gate: Gate::closed(),
            events: Mutex::new(Vec::new()),
        })
    }

    fn note(&self, event: SinkEvent) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((Instant::now(), event));
        super::wait::changed();
    }

    /// When each `event` happened.
    pub fn times(&self, event: SinkEvent) -> Vec<Instant> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, e)| *e == event)
            .map(|(at, _)| *at)
            .collect()
    }

    pub fn count(&self, event: SinkEvent) -> usize {
        self.times(event).len()
    }
}

impl JournalSink for StallSink {
    fn prepare(
        self: Arc<Self>,
        _line_len: usize,
        _start_by: Instant,
    ) -> Boxed<Result<(), SinkError>> {
        Box::pin(async { Ok(()) })
    }

    fn append_synced(
        self: Arc<Self>,
        line: Vec<u8>,
        _start_by: Instant,
    ) -> Boxed<Result<(), SinkError>> {
        Box::pin(async move {
            self.note(SinkEvent::AppendStarted);
            let (gate, path) = (Arc::clone(&self.gate), self.path.clone());
            let written = offload::unblock(move || {
                gate.pass();
                let mut file = OpenOptions::new().append(true).create(true).open(&path)?;
                file.write_all(&line)?;
                file.sync_data()
            })
            .await;
            self.note(SinkEvent::AppendReturned);
            written.map_err(Into::into)
        })
    }

    fn close(self: Arc<Self>) -> Boxed<Result<(), SinkError>> {
        self.note(SinkEvent::Closed);
        Box::pin(async { Ok(()) })
    }
}

// ---- failures -------------------------------------------------------------

pub const KINDS: [FailureKind; 8] = [
    FailureKind::Rest,
    FailureKind::Transcription,
    FailureKind::Agent,
    FailureKind::Delivery,
    FailureKind::Fallback,
    FailureKind::AccessRefused,
    FailureKind::State,
    FailureKind::Gateway,
];

/// Failure number `n`: its place and message carry things a drop warning
/// must never show (a user id, user text).
pub fn failure(kind: FailureKind, n: usize) -> Failure {
    Failure {
        kind,
        place: format!("place-{n} user 912345678901234567"),
        status: Some(500 + n as i64),
        message: format!("message-{n}: user said hunter2"),
        stderr: None,
    }
}

/// The `place` of failure `n`.
pub fn place(n: usize) -> String {
    failure(FailureKind::Rest, n).place
}
