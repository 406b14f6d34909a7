//! loopwatch: names the task that stalled the event loop.
//!
//! On a single-threaded executor one slow `poll` delays everything,
//! heartbeat included. [`watch`] wraps a task so each poll is timed (one
//! `Instant::now()` pair per poll, no timers, no wake-ups when idle); a poll
//! longer than the threshold (default 50 ms) logs
//! `task "NAME" blocked the event loop for X ms` and is counted per task, so
//! a late heartbeat can say who made it late.
//!
//! ```
//! let task = smolcord::loopwatch::watch("example", async { 1 + 1 });
//! assert_eq!(smol::block_on(task), 2);
//! ```

use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

static THRESHOLD_US: AtomicU64 = AtomicU64::new(50_000);
static STALLS: Mutex<Registry> = Mutex::new(Registry {
    per_task: BTreeMap::new(),
    last: None,
});

struct Registry {
    per_task: BTreeMap<&'static str, TaskStalls>,
    last: Option<Stall>,
}

/// Slow polls of one named task.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct TaskStalls {
    /// How many polls exceeded the threshold.
    pub count: u64,
    /// The longest, in ms.
    pub worst_ms: f64,
    /// All of them together, in ms.
    pub total_ms: f64,
}

/// The most recent slow poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    /// The task's name.
    pub task: &'static str,
    /// How long the poll took.
    pub duration: Duration,
    /// When the poll ended.
    pub ended: Instant,
}

/// Sets the slow-poll threshold (process-wide).
pub fn set_threshold(threshold: Duration) {
    THRESHOLD_US.store(
        u64::try_from(threshold.as_micros()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

/// Slow polls per task name, sorted by name.
pub fn stalls() -> BTreeMap<&'static str, TaskStalls> {
    registry().per_task.clone()
}

/// The most recent slow poll that ended at or after `since`.
pub fn last_stall_since(since: Instant) -> Option<Stall> {
    registry().last.filter(|stall| stall.ended >= since)
}

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    // A panic while holding the lock cannot leave the registry inconsistent
    // (every update is a few field writes), so a poisoned lock is still usable.
    STALLS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn record(task: &'static str, duration: Duration, ended: Instant) {
    let ms = duration.as_secs_f64() * 1000.0;
    log::warn!("task \"{task}\" blocked the event loop for {ms:.0} ms");
    let mut registry = registry();
    let entry = registry.per_task.entry(task).or_default();
    entry.count += 1;
    entry.total_ms += ms;
    entry.worst_ms = entry.worst_ms.max(ms);
    registry.last = Some(Stall {
        task,
        duration,
        ended,
    });
}

/// A future whose polls are timed.
pub struct Watched<F> {
    name: &'static str,
    inner: Pin<Box<F>>,
}

impl<F> std::fmt::Debug for Watched<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Wraps `future` so every poll longer than the threshold is logged and
/// counted under `name`.
pub fn watch<F: Future>(name: &'static str, future: F) -> Watched<F> {
    Watched {
        name,
        inner: Box::pin(future),
    }
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let start = Instant::now();
        let result = self.inner.as_mut().poll(cx);
        let end = Instant::now();
        let took = end.saturating_duration_since(start);
        if took.as_micros() as u64 >= THRESHOLD_US.load(Ordering::Relaxed) {
            record(self.name, took, end);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods)] // the test blocks on purpose
    fn a_blocking_poll_is_named_and_counted() {
        let before = Instant::now();
        smol::block_on(watch("loopwatch-test-blocker", async {
            std::thread::sleep(Duration::from_millis(80));
        }));
        let stall = last_stall_since(before).expect("stall recorded");
        assert_eq!(stall.task, "loopwatch-test-blocker");
        assert!(stall.duration >= Duration::from_millis(80));
        let per_task = stalls();
        let entry = per_task["loopwatch-test-blocker"];
        assert_eq!(entry.count, 1);
        assert!(entry.worst_ms >= 80.0);
        // A quick task is not recorded.
        smol::block_on(watch("loopwatch-test-quick", async {}));
        assert!(!stalls().contains_key("loopwatch-test-quick"));
    }
}
