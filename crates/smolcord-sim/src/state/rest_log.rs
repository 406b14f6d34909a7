//! The REST requests the simulator received, kept for tests and the
//! control API (`GET /control/rest-log`): the most recent
//! [`REST_LOG_KEPT`], so a long run cannot grow it without end.

use serde::Serialize;
use serde_json::Value;
use std::collections::VecDeque;

/// REST requests kept in the log.
pub(crate) const REST_LOG_KEPT: usize = 10_000;

/// One REST (or attachment) request as the simulator received it.
#[derive(Clone, Debug, Serialize)]
pub struct RestRecord {
    /// Milliseconds since the simulator started.
    pub at_ms: f64,
    /// HTTP method.
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// Query string.
    pub query: String,
    /// The JSON body (`payload_json` for multipart), or null.
    pub body: Value,
    /// Names of uploaded files (multipart).
    pub files: Vec<String>,
    /// The status answered.
    pub status: u16,
}

/// The bounded log.
#[derive(Debug, Default)]
pub(crate) struct RestLog {
    records: VecDeque<RestRecord>,
}

impl RestLog {
    /// Keeps `record`, dropping the oldest beyond [`REST_LOG_KEPT`].
    pub(crate) fn push(&mut self, record: RestRecord) {
        if self.records.len() == REST_LOG_KEPT {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }

    /// The records kept, oldest first.
    pub(crate) fn records(&self) -> impl Iterator<Item = &RestRecord> {
        self.records.iter()
    }
}
