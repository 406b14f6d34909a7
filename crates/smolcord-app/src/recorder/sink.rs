//! Where journal lines go: the [`JournalSink`] trait, so tests can put a
//! sink there that stalls on demand, and the real one is [`FileSink`].
//!
//! A record does two operations, each timed by the recorder: `prepare`
//! (open the journal: learn its size on first use, rotate it when full) and
//! `append_synced` (append the line and fsync). The recorder awaits every
//! operation it started until it resolves — past its limit too — because
//! that is when the blocking work behind it has really finished and the
//! record's capacity slot may be given back.

use std::error::Error;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use futures_lite::future::Boxed;

/// An error from a sink, shown in a warning (it must not hold user content).
pub type SinkError = Box<dyn Error + Send + Sync>;

/// A journal the recorder writes to. Methods return futures that run on the
/// blocking pool's polls (never on the event loop) and may do blocking work
/// only through `smolcord::offload`.
///
/// Contract:
/// - a future resolves only once any blocking work it started has finished;
/// - it must not *start* blocking work after `start_by` (the record's limit
///   for that operation): it resolves with [`NotStarted::TooLate`] instead;
/// - after `close` has been called, no operation starts any more
///   ([`NotStarted::Closed`]); `close` may be dropped unfinished (the
///   shutdown bound), so it must take effect before its first await.
pub trait JournalSink: Send + Sync + 'static {
    /// Gets the journal ready for a line of `line_len` bytes (open, rotate).
    fn prepare(self: Arc<Self>, line_len: usize, start_by: Instant)
        -> Boxed<Result<(), SinkError>>;

    /// Appends `line` (newline included) and makes it durable.
    fn append_synced(
        self: Arc<Self>,
        line: Vec<u8>,
        start_by: Instant,
    ) -> Boxed<Result<(), SinkError>>;

    /// Refuses further lines, then waits for a write still in progress.
    fn close(self: Arc<Self>) -> Boxed<Result<(), SinkError>>;
}

/// Why a sink did not start an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStarted {
    /// The journal was closed (shutdown).
    Closed,
    /// The operation's limit passed while it waited for its turn.
    TooLate,
}

impl fmt::Display for NotStarted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotStarted::Closed => "the journal is closed",
            NotStarted::TooLate => {
                "not started: its limit passed while an earlier write held the journal"
            }
        })
    }
}

impl Error for NotStarted {}
