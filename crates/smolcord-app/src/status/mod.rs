//! Application, not library API: the status snapshot, and how `smolcord status` gets it.
//!
//! A running bridge answers on [`socket`] (`status.sock` in the state dir)
//! with its live snapshot; `status.json` holds the last one written — when
//! the session starts, when the connection drops, at shutdown, and every
//! heartbeat only where the socket could not be bound; last of all, once
//! the gateway closed, one marked [`Stopped`] — and is what `smolcord
//! status` reads when nothing answers. Healthy means the process did not
//! stop and the last heartbeat ACK is younger than two intervals (a
//! container health check).
//!
//! [`StatusSnapshot::render`] draws it for a person ([`render`]);
//! [`StatusSnapshot::report_json`] is `smolcord status --json`, whose shape
//! `docs/status.schema.json` documents.
//!
//! Every section is typed ([`sections`]): the renderer reads fields, not
//! JSON. The bridge fills [`CountersSnapshot`] and hands it to
//! [`StatusSnapshot::capture`]; nothing here imports the bridge.

pub mod socket;

pub mod render;
pub mod sections;

pub use sections::{CountersSnapshot, HeartbeatAccount, Stalls};

pub mod short;

use crate::chart::Charset;
use serde::{Deserialize, Serialize};
use smolcord::loopwatch;
use smolcord::offload;
use smolcord::shard::history::FlapCount;
use smolcord::shard::{SessionHistory, ShardStatus};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The file name inside the state dir.
pub const FILE_NAME: &str = "status.json";

/// What `status.json` holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusSnapshot {
    /// When this was written (unix ms).
    pub written_unix_ms: u64,
    /// The writing process.
    pub pid: u32,
    /// `[shard_id, shard_count]`.
    pub shard: [u32; 2],
    /// Whether a gateway session was live.
    pub connected: bool,
    /// The bot's user name.
    pub user: Option<String>,
    /// Fresh gateway sessions started by this process.
    pub sessions_started: u64,
    /// Resumes by this process.
    pub resumes: u64,
    /// The current heartbeat interval.
    pub heartbeat_interval_ms: Option<u64>,
    /// Last READY (unix ms).
    pub last_ready_unix_ms: Option<u64>,
    /// Last RESUMED (unix ms).
    pub last_resumed_unix_ms: Option<u64>,
    /// Last heartbeat ACK (unix ms).
    pub last_ack_unix_ms: Option<u64>,
    /// Replayed dispatches dropped (already delivered).
    pub duplicates_dropped: u64,
    /// Sequence gaps seen.
    pub gaps: u64,
    /// The heartbeat account (session and lifetime summaries).
    #[serde(default, deserialize_with = "sections::lenient")]
    pub heartbeat: HeartbeatAccount,
    /// Slow polls per task.
    #[serde(default, deserialize_with = "sections::lenient")]
    pub loop_stalls: BTreeMap<String, Stalls>,
    /// Application counters (the bridge's; `null` without one).
    #[serde(default, deserialize_with = "sections::lenient_counters")]
    pub bridge: Option<CountersSnapshot>,
    /// The last gateway sessions, oldest first (of the first shard).
    #[serde(default)]
    pub sessions: SessionHistory,
    /// Every shard of a process running several (empty for one): the
    /// fields above describe the first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardLine>,
    /// Set in the last snapshot of a process that stopped (written after
    /// its gateway connections closed): it is not running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stopped>,
}

/// How and when a process stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stopped {
    /// When (unix ms), after the gateway closed.
    pub at_unix_ms: u64,
    /// Why it stopped.
    pub why: StopCause,
}

/// Why a process stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopCause {
    /// A clean shutdown (SIGTERM, SIGINT).
    Shutdown,
    /// The owner's `!restart` (the supervisor starts it again).
    Restart,
    /// Discord refused it for good (token, intents, shards).
    Fatal,
}

impl StopCause {
    /// How `smolcord status` says it.
    pub fn describe(self) -> &'static str {
        match self {
            StopCause::Shutdown => "stopped cleanly",
            StopCause::Restart => "stopped for a restart",
            StopCause::Fatal => "stopped: Discord refused it for good",
        }
    }
}

/// One shard of a set, for the status.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardLine {
    /// `[shard_id, shard_count]`.
    pub shard: [u32; 2],
    /// Whether its gateway session is live.
    pub connected: bool,
    /// Fresh sessions it started.
    pub sessions_started: u64,
    /// Its resumes.
    pub resumes: u64,
    /// Its heartbeat interval.
    pub heartbeat_interval_ms: Option<u64>,
    /// Its last heartbeat ACK (unix ms).
    pub last_ack_unix_ms: Option<u64>,
}

impl ShardLine {
    fn healthy(&self, now_ms: u64) -> bool {
        healthy(self.last_ack_unix_ms, self.heartbeat_interval_ms, now_ms)
    }
}

/// Healthy when the last ACK is younger than two heartbeat intervals.
fn healthy(last_ack_ms: Option<u64>, interval_ms: Option<u64>, now_ms: u64) -> bool {
    match (last_ack_ms, interval_ms) {
        (Some(ack), Some(interval)) => now_ms.saturating_sub(ack) < 2 * interval,
        _ => false,
    }
}

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Now, as unix milliseconds.
pub fn now_unix_ms() -> u64 {
    unix_ms(SystemTime::now())
}

impl StatusSnapshot {
    /// A snapshot of a shard (plus the loop stall counters and `bridge`).
    pub fn capture(shard: &ShardStatus, bridge: Option<CountersSnapshot>) -> StatusSnapshot {
        StatusSnapshot {
            written_unix_ms: now_unix_ms(),
            pid: std::process::id(),
            shard: shard.shard,
            connected: shard.connected,
            // After a resume only, the name saved from an earlier READY.
            user: shard
                .user
                .as_ref()
                .map(|user| user.username.clone())
                .or_else(|| shard.state.bot_name.clone()),
            sessions_started: shard.sessions_started,
            resumes: shard.resumes,
            heartbeat_interval_ms: shard.heartbeat_interval_ms,
            last_ready_unix_ms: shard.last_ready.map(unix_ms),
            last_resumed_unix_ms: shard.last_resumed.map(unix_ms),
            last_ack_unix_ms: shard.last_ack.map(unix_ms),
            duplicates_dropped: shard.duplicates_dropped,
            gaps: shard.gaps,
            heartbeat: HeartbeatAccount::from(&shard.heartbeat),
            loop_stalls: loopwatch::stalls()
                .into_iter()
                .map(|(task, stalls)| (task.to_owned(), Stalls::from(stalls)))
                .collect(),
            bridge,
            sessions: shard.state.history.clone(),
            shards: Vec::new(),
            stopped: None,
        }
    }

    /// A snapshot of a set of shards: the first in full, every one as a
    /// line (none for a set of one).
    pub fn capture_set(shards: &[ShardStatus], bridge: Option<CountersSnapshot>) -> StatusSnapshot {
        let Some(first) = shards.first() else {
            return StatusSnapshot::default();
        };
        let mut snapshot = StatusSnapshot::capture(first, bridge);
        if shards.len() > 1 {
            snapshot.shards = shards
                .iter()
                .map(|shard| ShardLine {
                    shard: shard.shard,
                    connected: shard.connected,
                    sessions_started: shard.sessions_started,
                    resumes: shard.resumes,
                    heartbeat_interval_ms: shard.heartbeat_interval_ms,
                    last_ack_unix_ms: shard.last_ack.map(unix_ms),
                })
                .collect();
        }
        snapshot
    }

    /// Marks the snapshot as the last of a process that stopped `why`, at
    /// `at_unix_ms`: no shard connected.
    pub fn mark_stopped(&mut self, why: StopCause, at_unix_ms: u64) {
        self.connected = false;
        for shard in &mut self.shards {
            shard.connected = false;
        }
        self.stopped = Some(Stopped { at_unix_ms, why });
    }

    /// Healthy when the last ACK is younger than two heartbeat intervals —
    /// on every shard of a set — and the process did not stop.
    pub fn is_healthy(&self, now_ms: u64) -> bool {
        self.stopped.is_none()
            && healthy(self.last_ack_unix_ms, self.heartbeat_interval_ms, now_ms)
            && self.shards.iter().all(|shard| shard.healthy(now_ms))
    }

    /// A readable rendering for `smolcord status`, at most 80 columns.
    pub fn render(&self, now_ms: u64, charset: Charset) -> String {
        render::status(self, now_ms, charset)
    }

    /// `smolcord status --json`: the snapshot plus what is judged at read
    /// time (`checked_unix_ms`, `healthy`, `flaps`). The shape is
    /// documented in `docs/status.schema.json`.
    pub fn report_json(&self, now_ms: u64) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        if let Some(object) = value.as_object_mut() {
            object.insert("checked_unix_ms".into(), now_ms.into());
            object.insert("healthy".into(), self.is_healthy(now_ms).into());
            let [hour, day] = self.flaps(now_ms);
            let flaps = serde_json::json!({ "last_hour": hour, "last_day": day });
            object.insert("flaps".into(), flaps);
        }
        value
    }

    /// Sessions lost (any end but a shutdown) in the last hour and the last
    /// day before `now_ms`.
    pub fn flaps(&self, now_ms: u64) -> [FlapCount; 2] {
        const HOUR_MS: u64 = 3_600_000;
        [HOUR_MS, 24 * HOUR_MS]
            .map(|window| self.sessions.flaps_since(now_ms.saturating_sub(window)))
    }
}

/// Where the snapshot lives in `state_dir`.
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

/// Writes the snapshot atomically (through offload).
pub async fn write(state_dir: &Path, snapshot: &StatusSnapshot) -> Result<(), offload::Error> {
    offload::write_json_atomic(&path(state_dir), snapshot).await
}

/// Reads the snapshot; `Ok(None)` when there is none yet.
pub async fn read(state_dir: &Path) -> Result<Option<StatusSnapshot>, offload::Error> {
    offload::read_json(&path(state_dir), offload::Fallback::None).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(ack_ago_ms: u64, interval: u64) -> (StatusSnapshot, u64) {
        let now = 1_000_000;
        let snapshot = StatusSnapshot {
            last_ack_unix_ms: Some(now - ack_ago_ms),
            heartbeat_interval_ms: Some(interval),
            ..StatusSnapshot::default()
        };
        (snapshot, now)
    }

    #[test]
    fn healthy_while_the_last_ack_is_younger_than_two_intervals() {
        let (s, now) = snapshot(81_000, 41_250);
        assert!(s.is_healthy(now));
        let (s, now) = snapshot(83_000, 41_250);
        assert!(!s.is_healthy(now));
        assert!(!StatusSnapshot::default().is_healthy(now));
        let (mut s, now) = snapshot(1000, 41_250);
        s.mark_stopped(StopCause::Shutdown, now);
        assert!(!s.is_healthy(now));
        assert!(s.render(now, Charset::Ascii).contains("stopped cleanly"));
    }

    #[test]
    fn a_set_is_healthy_only_when_every_shard_is() {
        let (mut s, now) = snapshot(1000, 41_250);
        let line = |ack_ago: u64| ShardLine {
            heartbeat_interval_ms: Some(41_250),
            last_ack_unix_ms: Some(now - ack_ago),
            ..ShardLine::default()
        };
        s.shards = vec![line(1000), line(2000)];
        assert!(s.is_healthy(now));
        s.shards.push(line(90_000));
        assert!(!s.is_healthy(now));
    }

    #[test]
    fn renders_readably() {
        let (s, now) = snapshot(1000, 41_250);
        let text = s.render(now, Charset::Ascii);
        assert!(text.contains("healthy"), "{text}");
        assert!(text.contains("last heartbeat ACK  1.0 s ago"), "{text}");
    }

    #[test]
    fn the_json_report_adds_the_verdicts() {
        let (s, now) = snapshot(1000, 41_250);
        let json = s.report_json(now);
        assert_eq!(json["healthy"], true);
        assert_eq!(json["checked_unix_ms"], now);
        assert_eq!(json["flaps"]["last_day"]["count"], 0);
        assert_eq!(json["sessions"], serde_json::json!([]));
        let (s, now) = snapshot(100_000, 41_250);
        assert_eq!(s.report_json(now)["healthy"], false);
    }

    #[test]
    fn round_trips_through_disk() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = snapshot(1000, 41_250);
        smol::block_on(async {
            assert_eq!(read(dir.path()).await.unwrap(), None);
            write(dir.path(), &s).await.unwrap();
            assert_eq!(read(dir.path()).await.unwrap(), Some(s));
        });
    }
}
