//! The REST requests the simulator received, kept for tests and the
//! control API (`GET /control/rest-log`): the most recent
//! [`REST_LOG_KEPT`], so a long run cannot grow it without end. A token in
//! a path (an interaction's, a webhook's: it authorises the request as the
//! bot token does) is kept as [`REDACTED_TOKEN`] ([`redact_path`]): the log is
//! served over HTTP and printed by failing tests.

use serde::Serialize;
use serde_json::Value;
use std::collections::VecDeque;

/// REST requests kept in the log.
pub(crate) const REST_LOG_KEPT: usize = 10_000;

/// What stands for a token in a logged path.
pub const REDACTED_TOKEN: &str = "[redacted]";

/// `path` with its token, if it has one, replaced by [`REDACTED_TOKEN`]:
/// `/api/v10/interactions/{interaction_id}/{token}/callback` and
/// `/api/v10/webhooks/{application_id}/{token}/…` (an interaction's
/// follow-ups and its original answer, or a webhook's own token).
pub(crate) fn redact_path(path: &str) -> String {
    let mut segments: Vec<&str> = path.split('/').collect();
    let is_id = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    for i in 0..segments.len().saturating_sub(2) {
        let (kind, id, token) = (segments[i], segments[i + 1], segments[i + 2]);
        if matches!(kind, "interactions" | "webhooks") && is_id(id) && !token.is_empty() {
            segments[i + 2] = REDACTED_TOKEN;
            break;
        }
    }
    segments.join("/")
}

/// One REST (or attachment) request as the simulator received it.
#[derive(Clone, Debug, Serialize)]
pub struct RestRecord {
    /// Milliseconds since the simulator started.
    pub at_ms: f64,
    /// HTTP method.
    pub method: String,
    /// Path without the query, a token in it redacted ([`REDACTED_TOKEN`]).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_in_a_path_is_redacted_and_nothing_else_is() {
        for (path, logged) in [
            (
                "/api/v10/interactions/55/aW50ZXJhY3Rpb24.s3cr3t/callback",
                "/api/v10/interactions/55/[redacted]/callback",
            ),
            (
                "/api/v10/webhooks/7/aW50ZXJhY3Rpb24.s3cr3t/messages/@original",
                "/api/v10/webhooks/7/[redacted]/messages/@original",
            ),
            ("/api/v9/webhooks/7/t0k", "/api/v9/webhooks/7/[redacted]"),
            (
                "/api/v10/channels/41/messages",
                "/api/v10/channels/41/messages",
            ),
            (
                "/api/v10/applications/7/commands",
                "/api/v10/applications/7/commands",
            ),
            ("/api/v10/webhooks/7", "/api/v10/webhooks/7"),
            ("/attachments/1/2/a.png", "/attachments/1/2/a.png"),
        ] {
            assert_eq!(redact_path(path), logged, "{path}");
        }
    }
}
