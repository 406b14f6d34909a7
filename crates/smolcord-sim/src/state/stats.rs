//! The measurements: every client is timed the same way, so smolcord and
//! any other library can be compared side by side.
//!
//! Per connection: when Hello went out, when each heartbeat arrived and the
//! gap since the previous one (the first: since Hello), how many gaps were
//! *late* (over `interval × (1 + late_tolerance)`) or *missed the deadline*
//! (over `grace × interval`, the point where the simulator closes with
//! 4009), the worst gap, identify/resume counts and how the connection
//! ended. Times are milliseconds since the simulator started.

use crate::model::clock::scaled;
use serde::Serialize;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Heartbeat records kept per connection (the counters cover all beats).
const BEATS_KEPT: usize = 4096;
/// Connections kept in detail (the totals cover all of them).
const CONNS_KEPT: usize = 1000;

/// Everything measured so far (also `GET /control/stats`).
#[derive(Clone, Debug, Serialize)]
pub struct SimStats {
    /// Milliseconds since the simulator started.
    pub uptime_ms: f64,
    /// The configured heartbeat interval.
    pub heartbeat_interval_ms: u64,
    /// The configured grace factor (4009 after `grace × interval`).
    pub heartbeat_grace: f64,
    /// The configured late tolerance.
    pub late_tolerance: f64,
    /// Totals over the simulator's life.
    pub totals: Totals,
    /// The most recent connections (up to 1000), oldest first.
    pub connections: Vec<ConnStats>,
}

/// Counters over the simulator's life.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Totals {
    /// Websocket connections accepted.
    pub connections: u64,
    /// Identify commands received.
    pub identifies: u64,
    /// Identifies that got READY.
    pub sessions_started: u64,
    /// Resumes that got RESUMED.
    pub resumes: u64,
    /// op 9 frames sent.
    pub invalid_sessions: u64,
    /// Connections closed with 4009 (heartbeat timeout).
    pub heartbeat_timeouts: u64,
    /// Heartbeats received.
    pub heartbeats: u64,
    /// Late heartbeat gaps.
    pub late_heartbeats: u64,
    /// Gaps over the 4009 deadline.
    pub missed_deadlines: u64,
    /// REST requests answered.
    pub rest_requests: u64,
    /// Identifies per `max_concurrency` bucket (key: bucket number).
    pub identifies_by_bucket: std::collections::BTreeMap<u32, u64>,
    /// Identifies that came within `identify_window` of the previous one
    /// of their bucket (refused with op 9 when enforcement is on).
    pub identifies_too_early: u64,
    /// The shortest time between two identifies of one bucket, ms.
    pub min_identify_gap_ms: Option<f64>,
    /// Messages not created again because their `nonce` was seen within
    /// the window (`enforce_nonce`): the original was returned instead.
    pub duplicates_prevented: u64,
    /// Heartbeats whose `d` is a sequence number the session never sent
    /// (acknowledged all the same; a client bug Discord does not refuse).
    pub heartbeats_with_unsent_seq: u64,
    /// Gateway connections without `v` in the URL (served as v10; Discord
    /// would serve its default version).
    pub connections_without_version: u64,
    /// REST requests without a `User-Agent` (served; Discord asks for
    /// `DiscordBot (url, version)` and its edge may refuse them).
    pub rest_without_user_agent: u64,
}

/// How a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConnEnd {
    /// The client sent a close frame (`client_close_code`).
    ClientClose,
    /// The client's TCP went away without a close frame.
    ClientDrop,
    /// The simulator sent a close frame (`server_close_code`).
    ServerClose,
    /// The simulator dropped TCP (fault or a superseding resume).
    ServerDrop,
}

/// One heartbeat as it arrived.
#[derive(Clone, Debug, Serialize)]
pub struct BeatRecord {
    /// Arrival time.
    pub at_ms: f64,
    /// Its `d`.
    pub d: Option<u64>,
    /// Gap since the previous beat (the first: since Hello).
    pub gap_ms: f64,
    /// Whether the gap counted as late.
    pub late: bool,
}

/// Measurements of one websocket connection.
#[derive(Clone, Debug, Serialize)]
pub struct ConnStats {
    /// Connection number.
    pub id: u64,
    /// Request path (`/` or `/resume`).
    pub path: String,
    /// Query string as sent.
    pub query: String,
    /// `zlib-stream`, `zstd-stream`, `payload` (Identify `compress: true`) or null.
    pub compression: Option<String>,
    /// The handshake's `User-Agent` header, if any.
    pub user_agent: Option<String>,
    /// When the websocket was accepted.
    pub opened_at_ms: f64,
    /// When Hello was queued.
    pub hello_at_ms: Option<f64>,
    /// Heartbeats received.
    pub heartbeats: u64,
    /// The most recent heartbeats (up to 4096).
    pub beats: Vec<BeatRecord>,
    /// Gaps over `interval × (1 + late_tolerance)`.
    pub late: u64,
    /// Gaps over `grace × interval`.
    pub missed_deadlines: u64,
    /// The longest gap.
    pub worst_gap_ms: f64,
    /// Heartbeat ACKs sent.
    pub acks_sent: u64,
    /// Heartbeat ACKs withheld by `Fault::DropAcks`.
    pub acks_dropped: u64,
    /// Identify commands received.
    pub identifies: u32,
    /// Resumes accepted.
    pub resumes: u32,
    /// The session served on this connection, if any.
    pub session_id: Option<String>,
    /// Dispatches sent (replays included).
    pub dispatches_sent: u64,
    /// The client's close code (`None` with `ClientDrop`).
    pub client_close_code: Option<u16>,
    /// The close code the simulator sent.
    pub server_close_code: Option<u16>,
    /// How it ended; `None` while open.
    pub ended: Option<ConnEnd>,
    /// When its end began: close frame sent or received, or TCP gone.
    pub closed_at_ms: Option<f64>,
}

/// The simulator's record of all connections.
pub(crate) struct StatsBook {
    started: Instant,
    interval: Duration,
    late_after: Duration,
    deadline: Duration,
    pub(crate) totals: Totals,
    conns: VecDeque<ConnStats>,
}

impl StatsBook {
    pub(crate) fn new(
        started: Instant,
        interval: Duration,
        late_tolerance: f64,
        grace: f64,
    ) -> StatsBook {
        StatsBook {
            started,
            interval,
            late_after: scaled(interval, 1.0 + late_tolerance.max(0.0)),
            deadline: scaled(interval, grace),
            totals: Totals::default(),
            conns: VecDeque::new(),
        }
    }

    pub(crate) fn ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.started).as_secs_f64() * 1000.0
    }

    pub(crate) fn open(&mut self, id: u64, path: &str, query: &str, at: Instant) {
        self.totals.connections += 1;
        if self.conns.len() == CONNS_KEPT {
            self.conns.pop_front();
        }
        self.conns.push_back(ConnStats {
            id,
            path: path.to_owned(),
            query: query.to_owned(),
            compression: None,
            user_agent: None,
            opened_at_ms: self.ms(at),
            hello_at_ms: None,
            heartbeats: 0,
            beats: Vec::new(),
            late: 0,
            missed_deadlines: 0,
            worst_gap_ms: 0.0,
            acks_sent: 0,
            acks_dropped: 0,
            identifies: 0,
            resumes: 0,
            session_id: None,
            dispatches_sent: 0,
            client_close_code: None,
            server_close_code: None,
            ended: None,
            closed_at_ms: None,
        });
    }

    /// The record of connection `id`, if still kept. Connection ids grow,
    /// so search from the back.
    pub(crate) fn conn(&mut self, id: u64) -> Option<&mut ConnStats> {
        self.conns.iter_mut().rev().find(|c| c.id == id)
    }

    /// Records how connection `id` ended; the first account wins (a server
    /// close stays a server close when the client's echo comes back).
    pub(crate) fn end(&mut self, id: u64, end: ConnEnd, at: Instant) {
        let at_ms = self.ms(at);
        if let Some(conn) = self.conn(id) {
            if conn.ended.is_none() {
                conn.ended = Some(end);
                conn.closed_at_ms = Some(at_ms);
            }
        }
    }

    /// Records a heartbeat that arrived `gap` after the previous one.
    pub(crate) fn heartbeat(&mut self, id: u64, d: Option<u64>, gap: Duration, at: Instant) {
        let at_ms = self.ms(at);
        let late = gap > self.late_after;
        let missed = gap > self.deadline;
        self.totals.heartbeats += 1;
        self.totals.late_heartbeats += u64::from(late);
        self.totals.missed_deadlines += u64::from(missed);
        if let Some(conn) = self.conn(id) {
            let gap_ms = gap.as_secs_f64() * 1000.0;
            conn.heartbeats += 1;
            conn.late += u64::from(late);
            conn.missed_deadlines += u64::from(missed);
            conn.worst_gap_ms = conn.worst_gap_ms.max(gap_ms);
            if conn.beats.len() == BEATS_KEPT {
                conn.beats.remove(0);
            }
            conn.beats.push(BeatRecord {
                at_ms,
                d,
                gap_ms,
                late,
            });
        }
    }

    pub(crate) fn snapshot(&self, grace: f64, late_tolerance: f64) -> SimStats {
        SimStats {
            uptime_ms: self.ms(Instant::now()),
            heartbeat_interval_ms: self.interval.as_millis() as u64,
            heartbeat_grace: grace,
            late_tolerance,
            totals: self.totals.clone(),
            connections: self.conns.iter().cloned().collect(),
        }
    }
}

impl SimStats {
    /// The connection with number `id`, if still kept.
    pub fn connection(&self, id: u64) -> Option<&ConnStats> {
        self.connections.iter().find(|c| c.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_and_missed_are_counted_against_the_interval() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let mut book = StatsBook::new(start, ms(1000), 0.05, 1.5);
        book.open(1, "/", "v=10", start);
        book.heartbeat(1, None, ms(400), start + ms(400));
        book.heartbeat(1, Some(1), ms(1040), start + ms(1440));
        book.heartbeat(1, Some(1), ms(1100), start + ms(2540));
        book.heartbeat(1, Some(2), ms(1600), start + ms(4140));
        let stats = book.snapshot(1.5, 0.05);
        let conn = stats.connection(1).unwrap();
        assert_eq!(conn.heartbeats, 4);
        assert_eq!(conn.late, 2);
        assert_eq!(conn.missed_deadlines, 1);
        assert!((conn.worst_gap_ms - 1600.0).abs() < 0.01);
        assert_eq!(stats.totals.late_heartbeats, 2);
        assert!(conn.beats[1].d == Some(1) && !conn.beats[1].late);
    }
}
