//! What a failure is, and the one JSON line the journal keeps for it.
//!
//! The line is built on the writer's side (the blocking pool), not in
//! `record()`, so admission stays a counter bump. Place and message are cut
//! to a bounded length: the journal is for an operator's eyes, and a caller
//! passing a whole response body by mistake must not bloat it.

use std::fmt;
use std::time::SystemTime;

use serde::Serialize;

use super::clock;

/// Longest `place` kept, in bytes.
pub const MAX_PLACE_BYTES: usize = 160;
/// Longest `message` kept, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 400;
/// Longest `stderr` kept, in bytes: its end, where a program says why it
/// failed.
pub const MAX_STDERR_BYTES: usize = 1200;

/// What kind of thing failed (the only part named in a drop warning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
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

impl FailureKind {
    /// The name written to the journal and logs (`"access_refused"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Rest => "rest",
            FailureKind::Transcription => "transcription",
            FailureKind::Agent => "agent",
            FailureKind::Delivery => "delivery",
            FailureKind::Fallback => "fallback",
            FailureKind::AccessRefused => "access_refused",
            FailureKind::State => "state",
            FailureKind::Gateway => "gateway",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
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
    /// The end of a failed command's stderr, if it said anything (made fit
    /// for a log by its caller: no control characters, no token). Kept apart
    /// from `message` so that cutting a long message never cuts this.
    pub stderr: Option<String>,
}

/// Whether a record was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Taken; it is written in the background.
    Admitted,
    /// Dropped (over capacity, or shutting down).
    Dropped,
}

/// The journal's line format (see [`super::JournalEntry`] for reading it).
#[derive(Serialize)]
struct Line<'a> {
    time: String,
    kind: FailureKind,
    place: &'a str,
    status: Option<i64>,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    stderr: Option<&'a str>,
}

/// `failure` as one journal line, newline included.
pub(crate) fn encode(failure: &Failure, time: SystemTime) -> Result<Vec<u8>, serde_json::Error> {
    let line = Line {
        time: clock::rfc3339_utc_millis(time),
        kind: failure.kind,
        place: cut(&failure.place, MAX_PLACE_BYTES),
        status: failure.status,
        message: cut(&failure.message, MAX_MESSAGE_BYTES),
        stderr: failure
            .stderr
            .as_deref()
            .map(|text| end_of(text, MAX_STDERR_BYTES)),
    };
    let mut bytes = serde_json::to_vec(&line)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// At most the last `max` bytes of `text`, cut on a character boundary.
fn end_of(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn a_line_holds_time_kind_place_status_message_and_ends_in_a_newline() {
        let failure = Failure {
            kind: FailureKind::AccessRefused,
            place: "dm".into(),
            status: Some(403),
            message: "not on the list".into(),
            stderr: None,
        };
        let time = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let line = encode(&failure, time).unwrap();
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "{\"time\":\"2023-11-14T22:13:20.123Z\",\"kind\":\"access_refused\",\
             \"place\":\"dm\",\"status\":403,\"message\":\"not on the list\"}\n"
        );
    }

    #[test]
    fn long_fields_are_cut_on_a_character_boundary() {
        let text = "é".repeat(300); // 600 bytes, 2 per char
        assert_eq!(cut(&text, 401).len(), 400);
        assert_eq!(cut("short", 400), "short");
        let failure = Failure {
            kind: FailureKind::Rest,
            place: "p".repeat(1000),
            status: None,
            message: text,
            stderr: Some(format!("{}model not found", "é".repeat(1000))),
        };
        let line = encode(&failure, UNIX_EPOCH).unwrap();
        assert!(line.len() < MAX_PLACE_BYTES + MAX_MESSAGE_BYTES + MAX_STDERR_BYTES + 140);
        let value: serde_json::Value = serde_json::from_slice(&line).unwrap();
        // The stderr keeps its end, where the reason is.
        let stderr = value["stderr"].as_str().unwrap();
        assert!(stderr.ends_with("model not found"), "{stderr}");
        assert!(stderr.len() <= MAX_STDERR_BYTES);
    }
}
