//! Reporting a failure: to the recorder (synchronous admission, never
//! awaited) and to the `failures` counter. Messages carry types and
//! reasons only: no user content, no ids that identify a person, no token.

use super::counters::{BridgeCounters, Counter};
use crate::recorder::{Admission, Failure, FailureKind, Recorder};

/// The bridge's failure reporter. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Reporter {
    recorder: Recorder,
    counters: BridgeCounters,
}

impl Reporter {
    pub fn new(recorder: Recorder, counters: BridgeCounters) -> Reporter {
        Reporter { recorder, counters }
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
        let failure = Failure {
            kind,
            place: place.into(),
            status,
            message: message.into(),
        };
        if self.recorder.record(failure) == Admission::Dropped {
            log::debug!("failure record ({kind:?}) dropped by the recorder");
        }
    }
}
