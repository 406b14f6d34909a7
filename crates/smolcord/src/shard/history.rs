//! The session history: the last [`KEPT`] gateway sessions, each with how
//! it started (Identify or Resume), when it was up, how it ended and how
//! punctual its heartbeat was. It answers the operator's first question
//! after "the bot showed offline": how many sessions, when, and why did each
//! end. It is persisted inside [`SessionState`](super::SessionState)
//! (`session.json`), so a restart keeps it.
//!
//! The driver calls three methods, all with the wall clock in unix ms:
//!
//! ```
//! use smolcord::shard::history::{EndReason, SessionHistory, StartKind};
//! use std::time::Duration;
//! let mut history = SessionHistory::default();
//! history.started(StartKind::Identify, 1_000); // Identify sent
//! history.established(1_200); // READY
//! history.ended(EndReason::Reconnect, 12, Duration::from_micros(350), 50_000); // op 7
//! let last = history.records().last().unwrap();
//! assert_eq!(last.end, Some(EndReason::Reconnect));
//! assert_eq!(last.beats, 12);
//! ```
//!
//! Nothing here changes per heartbeat: beats and lateness are handed over
//! once, when the session ends, so the state file is not rewritten on every
//! beat.

use crate::protocol::{CloseAction, CloseCode};
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

/// Sessions kept. 64 covers the incident smolcord was built after (49
/// fresh sessions in one window) with room to spare, and a whole day at one
/// flap every 23 minutes; past that the flap count says "at least 64",
/// which is alarm enough. About 150 bytes each in `session.json` (~10 KB
/// full), 64 bytes each in memory.
pub const KEPT: usize = 64;

/// How a session began.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StartKind {
    /// A fresh session (op 2 Identify; spends the daily identify budget).
    Identify,
    /// Resuming an earlier session (op 6 Resume; free).
    Resume,
}

impl StartKind {
    /// `identify` or `resume`.
    pub fn as_str(self) -> &'static str {
        match self {
            StartKind::Identify => "identify",
            StartKind::Resume => "resume",
        }
    }
}

/// Why a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EndReason {
    /// The gateway sent op 7 Reconnect.
    Reconnect,
    /// The gateway sent op 9 Invalid Session.
    InvalidSession {
        /// Its `d`: whether the session may be resumed.
        resumable: bool,
    },
    /// The gateway closed the connection with this code (its meaning and
    /// whether it is fatal come from [`CloseCode`]).
    Closed {
        /// The WebSocket close code.
        code: u16,
    },
    /// No heartbeat ACK for a whole interval: we left a zombie connection.
    Zombie,
    /// The connection ended without a close frame (TCP reset, EOF, a read
    /// or write error).
    Dropped,
    /// A frame the session depended on (READY, Hello) could not be decoded.
    Malformed,
    /// We shut down (SIGTERM, Ctrl-C); a restart resumes.
    Shutdown,
    /// The process stopped without recording an end (killed, crashed, power
    /// lost): found open when the next process started.
    Unrecorded,
    /// A cause this build does not know (written by a newer smolcord).
    #[serde(other)]
    Unknown,
}

impl EndReason {
    /// The end of a connection the gateway (or the network) ended: its close
    /// code, or `None` when it ended without a close frame.
    pub fn from_close(code: Option<u16>) -> EndReason {
        match code {
            Some(code) => EndReason::Closed { code },
            None => EndReason::Dropped,
        }
    }

    /// Whether smolcord stopped for good after it (a fatal close code).
    pub fn is_fatal(self) -> bool {
        matches!(self, EndReason::Closed { code } if CloseCode(code).action() == CloseAction::Fatal)
    }

    /// Whether it counts as a flap: anything but our own shutdown.
    pub fn is_flap(self) -> bool {
        self != EndReason::Shutdown
    }
}

impl fmt::Display for EndReason {
    /// Short (at most 32 characters for the codes Discord documents), so a
    /// timeline row fits in 80 columns.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EndReason::Reconnect => f.write_str("op 7 reconnect"),
            EndReason::InvalidSession { resumable: true } => f.write_str("op 9 resumable"),
            EndReason::InvalidSession { resumable: false } => f.write_str("op 9 not resumable"),
            EndReason::Closed { code } => {
                let kind = if self.is_fatal() { "fatal" } else { "close" };
                write!(f, "{kind} {code} {}", CloseCode(code).description())
            }
            EndReason::Zombie => f.write_str("zombie (no ACK)"),
            EndReason::Dropped => f.write_str("dropped (no close frame)"),
            EndReason::Malformed => f.write_str("malformed frame"),
            EndReason::Shutdown => f.write_str("shutdown"),
            EndReason::Unrecorded => f.write_str("unrecorded (process died)"),
            EndReason::Unknown => f.write_str("unknown"),
        }
    }
}

/// One gateway session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Identify or Resume.
    pub start: StartKind,
    /// When Identify or Resume was sent (unix ms).
    pub started_unix_ms: u64,
    /// When READY or RESUMED arrived; `None` if it never did.
    #[serde(default)]
    pub up_unix_ms: Option<u64>,
    /// When it ended; `None` while live (or when the process vanished).
    #[serde(default)]
    pub ended_unix_ms: Option<u64>,
    /// Why it ended; `None` while live.
    #[serde(default)]
    pub end: Option<EndReason>,
    /// Scheduled heartbeats sent in it.
    #[serde(default)]
    pub beats: u64,
    /// The worst lateness (sent − scheduled) of its heartbeats, in µs.
    #[serde(default)]
    pub worst_lateness_us: u64,
}

impl SessionRecord {
    /// Whether it has not ended yet.
    pub fn is_open(&self) -> bool {
        self.end.is_none()
    }

    /// When it ended, or (for an unrecorded end) started: the moment a flap
    /// count places it at.
    fn flap_at(&self) -> u64 {
        self.ended_unix_ms.unwrap_or(self.started_unix_ms)
    }
}

/// Flaps (sessions that ended other than by our shutdown) in a window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FlapCount {
    /// How many.
    pub count: u64,
    /// False when the history is full and does not reach back over the
    /// whole window: then `count` is a lower bound.
    pub complete: bool,
}

/// The last [`KEPT`] sessions, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SessionHistory {
    records: VecDeque<SessionRecord>,
}

impl SessionHistory {
    /// Identify or Resume was sent at `now_unix_ms`: a new session begins.
    /// A session still open is closed first as [`EndReason::Unrecorded`].
    pub fn started(&mut self, kind: StartKind, now_unix_ms: u64) {
        self.close_unrecorded();
        if self.records.len() == KEPT {
            self.records.pop_front();
        }
        self.records.push_back(SessionRecord {
            start: kind,
            started_unix_ms: now_unix_ms,
            up_unix_ms: None,
            ended_unix_ms: None,
            end: None,
            beats: 0,
            worst_lateness_us: 0,
        });
    }

    /// READY or RESUMED arrived: the open session is up.
    pub fn established(&mut self, now_unix_ms: u64) {
        match self.open_mut() {
            Some(record) => record.up_unix_ms = Some(now_unix_ms),
            None => log::debug!("session history: READY/RESUMED with no session open"),
        }
    }

    /// The open session ended for `reason`, after `beats` scheduled beats,
    /// the worst of them `worst_lateness` late.
    pub fn ended(
        &mut self,
        reason: EndReason,
        beats: u64,
        worst_lateness: Duration,
        now_unix_ms: u64,
    ) {
        match self.open_mut() {
            Some(record) => {
                record.end = Some(reason);
                record.ended_unix_ms = Some(now_unix_ms);
                record.beats = beats;
                record.worst_lateness_us =
                    u64::try_from(worst_lateness.as_micros()).unwrap_or(u64::MAX);
            }
            None => log::debug!("session history: end ({reason}) with no session open"),
        }
    }

    /// Closes a session left open by a process that is gone. A new shard
    /// calls this: it never owns a session it restored from disk.
    pub fn close_unrecorded(&mut self) {
        if let Some(record) = self.open_mut() {
            record.end = Some(EndReason::Unrecorded);
        }
    }

    /// The sessions, oldest first.
    pub fn records(&self) -> impl DoubleEndedIterator<Item = &SessionRecord> + ExactSizeIterator {
        self.records.iter()
    }

    /// Flaps that happened after `since_unix_ms`.
    pub fn flaps_since(&self, since_unix_ms: u64) -> FlapCount {
        let count = self
            .records
            .iter()
            .filter(|r| r.end.is_some_and(EndReason::is_flap) && r.flap_at() >= since_unix_ms)
            .count() as u64;
        let reaches_back = self
            .records
            .front()
            .is_none_or(|oldest| oldest.started_unix_ms < since_unix_ms);
        FlapCount {
            count,
            complete: self.records.len() < KEPT || reaches_back,
        }
    }

    fn open_mut(&mut self) -> Option<&mut SessionRecord> {
        self.records.back_mut().filter(|record| record.is_open())
    }
}

/// Reads leniently: a history that does not parse is dropped with a
/// warning rather than costing the session it is stored with, and only the
/// newest [`KEPT`] records of a longer one are kept.
impl<'de> Deserialize<'de> for SessionHistory {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        match serde_json::from_value::<VecDeque<SessionRecord>>(value) {
            Ok(mut records) => {
                let excess = records.len().saturating_sub(KEPT);
                records.drain(..excess);
                Ok(SessionHistory { records })
            }
            Err(err) => {
                log::warn!(
                    "session history in the state file is unreadable ({err}); starting a new one"
                );
                Ok(SessionHistory::default())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;

    fn session(history: &mut SessionHistory, at: u64, reason: EndReason) {
        history.started(StartKind::Resume, at);
        history.established(at + 100);
        history.ended(reason, 3, Duration::from_micros(250), at + 1_000);
    }

    #[test]
    fn records_start_up_and_end() {
        let mut history = SessionHistory::default();
        history.started(StartKind::Identify, 1_000);
        assert!(history.records().last().unwrap().is_open());
        history.established(1_300);
        history.ended(
            EndReason::Closed { code: 4000 },
            7,
            Duration::from_millis(2),
            9_000,
        );
        let record = history.records().last().unwrap();
        assert_eq!(
            *record,
            SessionRecord {
                start: StartKind::Identify,
                started_unix_ms: 1_000,
                up_unix_ms: Some(1_300),
                ended_unix_ms: Some(9_000),
                end: Some(EndReason::Closed { code: 4000 }),
                beats: 7,
                worst_lateness_us: 2_000,
            }
        );
        // A second end, or an end with nothing open, changes nothing.
        history.ended(EndReason::Zombie, 1, Duration::ZERO, 10_000);
        assert_eq!(
            history.records().last().unwrap().end,
            Some(EndReason::Closed { code: 4000 })
        );
    }

    #[test]
    fn keeps_the_newest_sixty_four() {
        let mut history = SessionHistory::default();
        for n in 0..100 {
            session(&mut history, n * 10_000, EndReason::Reconnect);
        }
        assert_eq!(history.records().len(), KEPT);
        assert_eq!(
            history.records().next().unwrap().started_unix_ms,
            36 * 10_000
        );
    }

    #[test]
    fn an_open_session_found_at_the_next_start_is_unrecorded() {
        let mut history = SessionHistory::default();
        history.started(StartKind::Identify, 1_000);
        history.established(1_100);
        history.started(StartKind::Resume, 5_000);
        let ends: Vec<_> = history.records().map(|r| r.end).collect();
        assert_eq!(ends, [Some(EndReason::Unrecorded), None]);
        history.close_unrecorded();
        assert_eq!(
            history.records().last().unwrap().end,
            Some(EndReason::Unrecorded)
        );
    }

    #[test]
    fn flaps_count_the_window_and_not_shutdowns() {
        let now = 30 * HOUR;
        let mut history = SessionHistory::default();
        session(&mut history, now - 26 * HOUR, EndReason::Zombie); // outside the day
        session(&mut history, now - 5 * HOUR, EndReason::Reconnect);
        session(&mut history, now - 2 * HOUR, EndReason::Shutdown); // not a flap
        session(&mut history, now - HOUR / 2, EndReason::Dropped);
        session(
            &mut history,
            now - HOUR / 4,
            EndReason::InvalidSession { resumable: false },
        );
        history.started(StartKind::Identify, now - 60_000); // live: not a flap yet
        let hour = history.flaps_since(now - HOUR);
        assert_eq!(
            hour,
            FlapCount {
                count: 2,
                complete: true
            }
        );
        assert_eq!(history.flaps_since(now - 24 * HOUR).count, 3);
    }

    #[test]
    fn a_full_history_younger_than_the_window_is_a_lower_bound() {
        let now = 30 * HOUR;
        let mut history = SessionHistory::default();
        for n in 0..KEPT as u64 {
            session(&mut history, now - HOUR + n * 10_000, EndReason::Zombie);
        }
        let day = history.flaps_since(now - 24 * HOUR);
        assert_eq!(
            day,
            FlapCount {
                count: 64,
                complete: false
            }
        );
    }

    #[test]
    fn serialises_plainly_and_reads_leniently() {
        let mut history = SessionHistory::default();
        session(
            &mut history,
            1_000,
            EndReason::InvalidSession { resumable: true },
        );
        let json = serde_json::to_value(&history).unwrap();
        assert_eq!(
            json[0]["end"],
            serde_json::json!({"cause": "invalid_session", "resumable": true})
        );
        assert_eq!(json[0]["start"], "resume");
        let back: SessionHistory = serde_json::from_value(json).unwrap();
        assert_eq!(back, history);

        // A cause from a newer build, missing optional fields.
        let newer = serde_json::json!([{"start": "identify", "started_unix_ms": 5, "end": {"cause": "solar_flare"}}]);
        let read: SessionHistory = serde_json::from_value(newer).unwrap();
        assert_eq!(read.records().next().unwrap().end, Some(EndReason::Unknown));
        // Garbage is dropped, not an error.
        let read: SessionHistory = serde_json::from_value(serde_json::json!({"x": 1})).unwrap();
        assert_eq!(read, SessionHistory::default());
        // Too many records: the newest are kept.
        let many: Vec<_> = (0..100)
            .map(|n| serde_json::json!({"start": "resume", "started_unix_ms": n}))
            .collect();
        let read: SessionHistory = serde_json::from_value(serde_json::Value::from(many)).unwrap();
        assert_eq!(read.records().len(), KEPT);
        assert_eq!(read.records().next().unwrap().started_unix_ms, 36);
    }

    #[test]
    fn end_reasons_read_as_causes() {
        assert_eq!(
            EndReason::Closed { code: 4004 }.to_string(),
            "fatal 4004 authentication failed"
        );
        assert_eq!(
            EndReason::Closed { code: 4000 }.to_string(),
            "close 4000 unknown error"
        );
        let documented = [
            1000, 1001, 4000, 4001, 4002, 4003, 4004, 4005, 4007, 4008, 4009,
        ];
        for code in documented.into_iter().chain(4010..=4014) {
            let text = EndReason::Closed { code }.to_string();
            assert!(text.len() <= 32, "{text}");
        }
        assert!(EndReason::Closed { code: 4014 }.is_fatal());
        assert_eq!(
            EndReason::from_close(Some(4009)),
            EndReason::Closed { code: 4009 }
        );
        assert_eq!(EndReason::from_close(None), EndReason::Dropped);
        assert!(!EndReason::Zombie.is_fatal());
        assert!(!EndReason::Shutdown.is_flap());
    }
}
