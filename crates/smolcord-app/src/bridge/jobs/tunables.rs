//! Knobs of the bridge that are not config keys: timings and concurrency
//! that tests shorten and that docs/budget.md names.

use crate::bridge::access::pairing::PairingRules;
use crate::bridge::jobs::backlog::ReadbackBounds;
use std::time::Duration;

/// How long a stop waits for work in flight (the README's figure). Work
/// left after it is abandoned, not lost: its messages are replayed on
/// resume. Short, because the whole stop (this, the final save, the
/// gateway close, the journal flush) must fit in the 10 s Docker and
/// systemd give before SIGKILL.
pub const DRAIN_BOUND: Duration = Duration::from_secs(2);

/// Knobs that are not config keys (tests shorten them).
#[derive(Clone, Copy, Debug)]
pub struct Tunables {
    /// Pairing code rules.
    pub pairing: PairingRules,
    /// Typing indicator renewal while the agent runs.
    pub typing_interval: Duration,
    /// Post a "working…" placeholder after this long (`None`: never).
    pub placeholder_after: Option<Duration>,
    /// With `stream_replies`: the placeholder shows the agent's output so
    /// far at most this often (an edit each; the channel's rate limits
    /// apply as to any edit).
    pub stream_interval: Duration,
    /// Bound on waiting for work in flight at shutdown ([`DRAIN_BOUND`]).
    pub drain_timeout: Duration,
    /// Bound on the final state save.
    pub save_timeout: Duration,
    /// Channel directory writes are debounced by this much.
    pub directory_debounce: Duration,
    /// Runtime state writes (bot id, failure counter) are debounced by
    /// this much; a message's processed mark is written at once and waited
    /// for.
    pub runtime_debounce: Duration,
    /// Transcriptions running at once.
    pub transcribe_concurrency: usize,
    /// How a task that cannot be written to `spool/tasks/` is tried again.
    pub spool_retry: SpoolRetry,
    /// What a read-back of the history (DMs, server channels) after a fresh
    /// session takes on.
    pub readback: ReadbackBounds,
    /// Bytes all tasks' files (`STATE_DIR/files/`, downloads and the
    /// agent's output) may hold on disk together.
    pub files_budget: u64,
    /// A task's files are removed this long after their directory was
    /// made, at the latest (a spool task never answered, a crash).
    pub files_max_age: Duration,
}

/// Retries of a task write that failed (a full or read-only disk): the
/// message stays unprocessed meanwhile, its channel's later messages wait
/// behind it in their bounded queue (processed marks are per channel, in
/// order: none may pass it), and the saved gateway seq stays before it.
/// Tries go on until the write succeeds or the bridge stops; a stop leaves
/// the message unprocessed, for the next start's resume.
#[derive(Clone, Copy, Debug)]
pub struct SpoolRetry {
    /// The first wait; it doubles after each failure.
    pub first: Duration,
    /// The longest wait between two tries.
    pub max_delay: Duration,
}

impl Default for SpoolRetry {
    /// 1 s doubling to 30 s: a disk freed (or remounted writable) is
    /// noticed within 30 s, at one failed write per 30 s per waiting
    /// channel meanwhile.
    fn default() -> Self {
        SpoolRetry {
            first: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
        }
    }
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            pairing: PairingRules::default(),
            typing_interval: Duration::from_secs(8),
            placeholder_after: Some(Duration::from_secs(10)),
            stream_interval: Duration::from_secs(3),
            drain_timeout: DRAIN_BOUND,
            // With the drain (2 s), the gateway close (2 s) and the journal
            // flush (2 s), a stop stays under the 10 s before SIGKILL.
            save_timeout: Duration::from_secs(3),
            directory_debounce: Duration::from_secs(2),
            runtime_debounce: Duration::from_millis(500),
            transcribe_concurrency: 2,
            spool_retry: SpoolRetry::default(),
            readback: ReadbackBounds::default(),
            // Two messages of ten 25 MiB files, the most Discord sends,
            // with room to spare; a Pi's SD card minds more than this.
            files_budget: 512 * 1024 * 1024,
            // Discord's signed attachment links last about a day: a task
            // older than that is stale, and so are its files.
            files_max_age: Duration::from_secs(24 * 60 * 60),
        }
    }
}
