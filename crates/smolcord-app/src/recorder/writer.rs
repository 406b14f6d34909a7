//! One admitted record's life: open the journal, append and fsync, within
//! one shared deadline, each operation also within its own limit.
//!
//! When a limit fires, the record says so and starts nothing more — but it
//! keeps waiting for the operation already running, and only then drops its
//! [`Slot`]. The blocking work cannot be cancelled, so giving the slot back
//! at the timeout would let a stalled disk collect unbounded writes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_io::Timer;
use futures_lite::future::{self, Boxed};

use super::admission::Slot;
use super::failure::{self, Failure, FailureKind};
use super::sink::{JournalSink, SinkError};

/// The time limits of one record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) deadline: Duration,
    pub(crate) op_timeout: Duration,
}

/// Counters since the recorder was made.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) admitted: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) written: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) timed_out: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// An admitted failure on its way to the journal.
pub(crate) struct Record {
    pub(crate) failure: Failure,
    pub(crate) time: SystemTime,
    pub(crate) admitted: Instant,
}

#[derive(Clone, Copy)]
enum Op {
    Open,
    Append,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Open => "opening the journal",
            Op::Append => "the append and fsync",
        }
    }
}

/// Why a record stopped before its line was durable.
struct Stopped;

/// Writes `record`, then gives `slot` back (by dropping it).
pub(crate) async fn write(
    sink: Arc<dyn JournalSink>,
    limits: Limits,
    counters: Arc<Counters>,
    record: Record,
    slot: Slot,
) {
    let kind = record.failure.kind;
    let line = match failure::encode(&record.failure, record.time) {
        Ok(line) => line,
        Err(e) => {
            bump(&counters.failed);
            log::warn!("failure journal: cannot encode a `{kind}` record: {e}");
            return;
        }
    };
    let run = Run {
        kind,
        deadline: record.admitted + limits.deadline,
        limits,
        admitted: record.admitted,
        counters: &counters,
    };
    let len = line.len();
    let open = run
        .step(Op::Open, |start_by| {
            Arc::clone(&sink).prepare(len, start_by)
        })
        .await;
    if open.is_ok()
        && run
            .step(Op::Append, |start_by| sink.append_synced(line, start_by))
            .await
            .is_ok()
    {
        bump(&counters.written);
    }
    // Every operation started has finished: only now may another record
    // take this slot.
    drop(slot);
}

struct Run<'a> {
    kind: FailureKind,
    deadline: Instant,
    limits: Limits,
    admitted: Instant,
    counters: &'a Counters,
}

impl Run<'_> {
    /// Starts one operation unless the deadline has passed, and waits for
    /// it to finish — past its limit too, if it must.
    async fn step(
        &self,
        op: Op,
        start: impl FnOnce(Instant) -> Boxed<Result<(), SinkError>>,
    ) -> Result<(), Stopped> {
        let kind = self.kind;
        let now = Instant::now();
        if now >= self.deadline {
            bump(&self.counters.timed_out);
            log::warn!(
                "failure journal: a `{kind}` record passed its {:?} deadline before {}; not written",
                self.limits.deadline,
                op.name()
            );
            return Err(Stopped);
        }
        let own_limit = now + self.limits.op_timeout;
        let (limit_at, which) = if own_limit < self.deadline {
            (own_limit, ("limit", self.limits.op_timeout))
        } else {
            (self.deadline, ("deadline", self.limits.deadline))
        };
        let mut running = start(limit_at);
        let in_time = future::or(async { Some((&mut running).await) }, async {
            Timer::at(limit_at).await;
            None
        })
        .await;
        let result = match in_time {
            Some(result) => result,
            None => {
                bump(&self.counters.timed_out);
                log::warn!(
                    "failure journal: {} for a `{kind}` record passed its {:?} {}; \
                     its slot stays taken until the operation returns",
                    op.name(),
                    which.1,
                    which.0
                );
                let late = running.await;
                log::info!(
                    "failure journal: {} for a `{kind}` record returned {:?} after admission{}",
                    op.name(),
                    self.admitted.elapsed(),
                    match (&late, op) {
                        (Ok(()), Op::Append) => " (written late)",
                        _ => "; not written",
                    }
                );
                if let (Ok(()), Op::Append) = (&late, op) {
                    bump(&self.counters.written);
                }
                return Err(Stopped);
            }
        };
        result.map_err(|e| {
            bump(&self.counters.failed);
            log::warn!(
                "failure journal: could not record a `{kind}` failure ({}): {e}",
                op.name()
            );
            Stopped
        })
    }
}
