//! recorder: a bounded background journal of failures that never delays a
//! reply. (Interface only; the journal implementation is in progress.)

use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// What kind of thing failed (the only part named in a drop warning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// A REST call.
    Rest,
    /// A voice-note download or transcription.
    Transcription,
    /// The agent command.
    Agent,
    /// Delivering a reply or result.
    Delivery,
    /// The DM fallback command.
    Fallback,
    /// A stranger was refused.
    AccessRefused,
    /// Persisting state.
    State,
    /// The gateway connection.
    Gateway,
}

/// One failure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Failure {
    /// What failed.
    pub kind: FailureKind,
    /// Where (a route, a command name, a file).
    pub place: String,
    /// HTTP status, exit code or close code, if any.
    pub status: Option<i64>,
    /// A short message (no user content, no token).
    pub message: String,
}

/// Whether a record was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Taken; it is written in the background.
    Admitted,
    /// Dropped (over capacity, or shutting down).
    Dropped,
}

/// Settings.
#[derive(Clone, Debug)]
pub struct RecorderConfig {
    /// The journal file (`STATE_DIR/failures.jsonl`).
    pub path: PathBuf,
    /// Records in flight at most.
    pub capacity: usize,
    /// One deadline per record for everything it does.
    pub deadline: Duration,
}

/// The failure recorder. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Recorder {
    config: Option<RecorderConfig>,
}

impl Recorder {
    /// A recorder writing to `config.path`.
    pub fn new(config: RecorderConfig) -> Recorder {
        Recorder {
            config: Some(config),
        }
    }

    /// A recorder that drops everything (for comparisons and tests).
    pub fn disabled() -> Recorder {
        Recorder { config: None }
    }

    /// Admits or drops `failure` at once; never waits.
    pub fn record(&self, failure: Failure) -> Admission {
        let _ = (&self.config, failure);
        Admission::Dropped
    }

    /// Stops admission and waits at most `bound` for records in flight;
    /// returns how many were left unfinished.
    pub async fn shutdown(&self, bound: Duration) -> usize {
        let _ = bound;
        0
    }
}
