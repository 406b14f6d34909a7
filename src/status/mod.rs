//! The status snapshot, and how `smolcord status` gets it.
//!
//! A running bridge answers on [`socket`] (`status.sock` in the state dir)
//! with its live snapshot; `status.json` holds the last one written — when
//! the session starts, when the connection drops, at shutdown, and every
//! heartbeat only where the socket could not be bound — and is what
//! `smolcord status` reads when nothing answers. Healthy means the last
//! heartbeat ACK is younger than two intervals (a container health check).

pub mod socket;

use crate::loopwatch;
use crate::offload;
use crate::shard::ShardStatus;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
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
    pub heartbeat: serde_json::Value,
    /// Slow polls per task.
    pub loop_stalls: serde_json::Value,
    /// Application counters (the bridge's).
    #[serde(default)]
    pub bridge: serde_json::Value,
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
    pub fn capture(shard: &ShardStatus, bridge: serde_json::Value) -> StatusSnapshot {
        StatusSnapshot {
            written_unix_ms: now_unix_ms(),
            pid: std::process::id(),
            shard: shard.shard,
            connected: shard.connected,
            user: shard.user.as_ref().map(|user| user.username.clone()),
            sessions_started: shard.sessions_started,
            resumes: shard.resumes,
            heartbeat_interval_ms: shard.heartbeat_interval_ms,
            last_ready_unix_ms: shard.last_ready.map(unix_ms),
            last_resumed_unix_ms: shard.last_resumed.map(unix_ms),
            last_ack_unix_ms: shard.last_ack.map(unix_ms),
            duplicates_dropped: shard.duplicates_dropped,
            gaps: shard.gaps,
            heartbeat: serde_json::to_value(&shard.heartbeat).unwrap_or_default(),
            loop_stalls: serde_json::to_value(loopwatch::stalls()).unwrap_or_default(),
            bridge,
        }
    }

    /// Healthy when the last ACK is younger than two heartbeat intervals.
    pub fn is_healthy(&self, now_ms: u64) -> bool {
        match (self.last_ack_unix_ms, self.heartbeat_interval_ms) {
            (Some(ack), Some(interval)) => now_ms.saturating_sub(ack) < 2 * interval,
            _ => false,
        }
    }

    /// A readable rendering for `smolcord status`.
    pub fn render(&self, now_ms: u64) -> String {
        let ago = |at: Option<u64>| match at {
            Some(at) => format!("{:.1} s ago", now_ms.saturating_sub(at) as f64 / 1000.0),
            None => "never".to_owned(),
        };
        let lateness = |key: &str| {
            self.heartbeat["lifetime"]["lateness"][key]
                .as_f64()
                .map_or("-".to_owned(), |ms| format!("{ms:.2} ms"))
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "smolcord (pid {}) shard {}/{} as {} — {}",
            self.pid,
            self.shard[0],
            self.shard[1],
            self.user.as_deref().unwrap_or("?"),
            if self.is_healthy(now_ms) {
                "healthy"
            } else {
                "UNHEALTHY"
            }
        );
        let _ = writeln!(
            out,
            "  snapshot written   {}",
            ago(Some(self.written_unix_ms))
        );
        let _ = writeln!(
            out,
            "  gateway sessions   {} started, {} resumed; connected: {}",
            self.sessions_started, self.resumes, self.connected
        );
        let _ = writeln!(out, "  last READY         {}", ago(self.last_ready_unix_ms));
        let _ = writeln!(
            out,
            "  last RESUMED       {}",
            ago(self.last_resumed_unix_ms)
        );
        let _ = writeln!(
            out,
            "  last heartbeat ACK {} (interval {} ms)",
            ago(self.last_ack_unix_ms),
            self.heartbeat_interval_ms
                .map_or("-".to_owned(), |ms| ms.to_string())
        );
        let life = &self.heartbeat["lifetime"];
        let _ = writeln!(
            out,
            "  heartbeats         {} sent, {} acked, {} zombies; lateness p50 {} p99 {} max {}",
            life["beats_sent"].as_u64().unwrap_or(0),
            life["acks"].as_u64().unwrap_or(0),
            life["zombies"].as_u64().unwrap_or(0),
            lateness("p50_ms"),
            lateness("p99_ms"),
            lateness("max_ms"),
        );
        let _ = writeln!(
            out,
            "  round trip         latest {} avg {}",
            life["rtt_latest_ms"]
                .as_f64()
                .map_or("-".into(), |ms| format!("{ms:.1} ms")),
            life["rtt_avg_ms"]
                .as_f64()
                .map_or("-".into(), |ms| format!("{ms:.1} ms")),
        );
        if let Some(stalls) = self.loop_stalls.as_object().filter(|s| !s.is_empty()) {
            for (task, entry) in stalls {
                let _ = writeln!(
                    out,
                    "  loop stalls        task \"{task}\": {} times, worst {:.0} ms",
                    entry["count"].as_u64().unwrap_or(0),
                    entry["worst_ms"].as_f64().unwrap_or(0.0)
                );
            }
        }
        if !self.bridge.is_null() {
            let _ = writeln!(out, "  bridge             {}", self.bridge);
        }
        out
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
    }

    #[test]
    fn renders_readably() {
        let (s, now) = snapshot(1000, 41_250);
        let text = s.render(now);
        assert!(text.contains("healthy"), "{text}");
        assert!(text.contains("last heartbeat ACK 1.0 s ago"), "{text}");
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
