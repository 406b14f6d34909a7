//! Reporting a failure: to the recorder (synchronous admission, never
//! awaited) and to the `failures` counter. Messages carry types and
//! reasons only: no user content, no ids that identify a person, no token.
//!
//! The same failure repeated in a burst (a crowd of strangers refused, a
//! thousand results refused for one reason) is journalled
//! [`JOURNAL_BURST`] times per [`JOURNAL_WINDOW`]; the rest are counted and
//! the next record says how many were held back, so a flood of one kind
//! cannot fill the recorder's slots and push out the records that matter.

use crate::bridge::report::counters::{BridgeCounters, Counter};
use crate::bridge::report::throttle::{Throttle, Verdict};
use crate::recorder::{Admission, Failure, FailureKind, Recorder};
use smolcord::rest::RestError;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Records of one kind, place and reason journalled per window: enough to
/// see a pattern and when it started, well under the recorder's 32 slots.
pub(crate) const JOURNAL_BURST: u32 = 10;
/// The window of [`JOURNAL_BURST`].
pub(crate) const JOURNAL_WINDOW: Duration = Duration::from_secs(60);

/// The bridge's failure reporter. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Reporter {
    recorder: Recorder,
    counters: BridgeCounters,
    throttle: Arc<Throttle<(FailureKind, String, String)>>,
}

impl Reporter {
    pub fn new(recorder: Recorder, counters: BridgeCounters) -> Reporter {
        Reporter {
            recorder,
            counters,
            throttle: Arc::new(Throttle::new(JOURNAL_BURST, JOURNAL_WINDOW)),
        }
    }

    /// Records a failure; returns at once.
    pub fn fail(
        &self,
        kind: FailureKind,
        place: impl Into<String>,
        status: Option<i64>,
        message: impl Into<String>,
    ) {
        self.counters.bump(Counter::Failures);
        let key = (kind, place.into(), message.into());
        let verdict = self.throttle.check(&key, Instant::now());
        let (kind, place, mut message) = key;
        match verdict {
            Verdict::HoldBack => {
                log::debug!("failure record ({kind:?}, {place}) held back: repeated");
                return;
            }
            Verdict::Pass { held_back: 0 } => {}
            Verdict::Pass { held_back } => {
                message = format!("{message} (and {held_back} more like it, not journalled)");
            }
        }
        self.record(kind, place, status, message);
    }

    /// Records a failed REST call: its route, status and a type-only
    /// description (no Discord message text).
    pub fn rest_failure(&self, kind: FailureKind, e: &RestError) {
        let status = match e {
            RestError::Http { status, .. } => Some(i64::from(*status)),
            _ => None,
        };
        self.fail(kind, e.route(), status, rest_kind(e));
    }

    /// Journals the counts still held back (at shutdown), one record per
    /// kind of failure.
    pub fn flush_held_back(&self) {
        for ((kind, place, message), held_back) in self.throttle.take_held_back() {
            let message = format!("{message} ({held_back} more like it, not journalled)");
            self.record(kind, place, None, message);
        }
    }

    fn record(&self, kind: FailureKind, place: String, status: Option<i64>, message: String) {
        let failure = Failure {
            kind,
            place,
            status,
            message,
        };
        if self.recorder.record(failure) == Admission::Dropped {
            log::debug!("failure record ({kind:?}) dropped by the recorder");
        }
    }
}

/// A type-only description of a REST error (no Discord message text).
fn rest_kind(e: &RestError) -> String {
    match e {
        RestError::Http { status, code, .. } => match code {
            Some(code) => format!("HTTP {status}, Discord error {code}"),
            None => format!("HTTP {status}"),
        },
        RestError::RateLimitedTooLong { attempts, .. } => {
            format!("rate limited beyond the retry budget ({attempts} tries)")
        }
        RestError::Timeout { .. } => "timed out".into(),
        RestError::Transport { .. } => "transport error".into(),
        RestError::Decode { .. } => "unexpected response body".into(),
        RestError::TooLarge { limit, .. } => format!("larger than {limit} bytes"),
        RestError::InvalidInput { .. } => "invalid input".into(),
        RestError::LocalIo { .. } => "local file error".into(),
        _ => "REST error".into(),
    }
}
