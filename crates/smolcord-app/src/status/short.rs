//! The status in a few lines, for the owner's `/status` command: the same
//! facts `smolcord status` starts with (healthy or not, the gateway, the
//! heartbeat) and the bridge's main counters, within one Discord message.

use super::StatusSnapshot;
use crate::chart;
use std::fmt::Write;

/// `snapshot` at `now_ms`, with `pending_codes` pairing codes waiting for
/// the owner, as plain text (no Markdown surprises: ids and names only).
pub fn short(snapshot: &StatusSnapshot, now_ms: u64, pending_codes: usize) -> String {
    let ago = |at: Option<u64>| match at {
        Some(at) => format!("{} ago", chart::span(now_ms.saturating_sub(at))),
        None => "never".to_owned(),
    };
    let verdict = if snapshot.is_healthy(now_ms) {
        "healthy"
    } else {
        "UNHEALTHY"
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "smolcord (pid {}) shard {}/{}: {verdict}",
        snapshot.pid, snapshot.shard[0], snapshot.shard[1]
    );
    let _ = writeln!(
        out,
        "gateway: {}; {} sessions started, {} resumed; last READY {}",
        if snapshot.connected {
            "connected"
        } else {
            "not connected"
        },
        snapshot.sessions_started,
        snapshot.resumes,
        ago(snapshot.last_ready_unix_ms)
    );
    let life = &snapshot.heartbeat.lifetime;
    let _ = writeln!(
        out,
        "heartbeat: last ACK {}; {} sent, {} acked, {} zombies, worst {}",
        ago(snapshot.last_ack_unix_ms),
        life.beats_sent,
        life.acks,
        life.zombies,
        life.lateness
            .max_ms
            .map_or("-".to_owned(), |ms| format!("{ms:.0} ms late"))
    );
    let counters = snapshot.bridge.unwrap_or_default();
    let _ = write!(
        out,
        "bridge: {} messages handled, {} replies delivered, {} undelivered, {} refused, {} failures; {pending_codes} pairing code(s) waiting{}",
        counters.messages_handled,
        counters.replies_delivered,
        counters.undelivered,
        counters.refused,
        counters.failures,
        if counters.safe_mode { "; SAFE MODE" } else { "" }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_says_what_smolcord_status_says_first_in_a_few_lines() {
        let snapshot = StatusSnapshot {
            pid: 42,
            shard: [0, 1],
            connected: true,
            sessions_started: 1,
            last_ack_unix_ms: Some(9_000),
            heartbeat_interval_ms: Some(41_250),
            bridge: Some(crate::bridge::CountersSnapshot {
                messages_handled: 3,
                replies_delivered: 3,
                ..Default::default()
            }),
            ..StatusSnapshot::default()
        };
        let text = short(&snapshot, 10_000, 2);
        assert!(
            text.starts_with("smolcord (pid 42) shard 0/1: healthy"),
            "{text}"
        );
        assert!(text.contains("connected; 1 sessions started"), "{text}");
        assert!(text.contains("last ACK 1.0 s ago"), "{text}");
        assert!(
            text.contains("3 messages handled, 3 replies delivered"),
            "{text}"
        );
        assert!(text.contains("2 pairing code(s) waiting"), "{text}");
        assert!(text.lines().count() <= 4 && text.len() < 2000);
        let stale = short(&snapshot, 200_000, 0);
        assert!(stale.contains("UNHEALTHY"), "{stale}");
    }
}
