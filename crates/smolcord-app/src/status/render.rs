//! Drawing a [`StatusSnapshot`] for a person: a pure function of the
//! snapshot, the time and the [`Charset`], at most [`WIDTH`] columns, so it
//! reads the same whether the snapshot came from the file or the running
//! process, and tests can check every line.
//!
//! The sections: a header with the health verdict, the gateway facts, the
//! heartbeat lateness and round-trip charts ([`heartbeat_charts`], which the
//! demo's report draws too), the session timeline with the flap rate, loop
//! stalls, and the bridge counters as labelled lines.

pub use super::sections::{Bucket, HistogramData, Summary};
use super::sections::{CountersSnapshot, Stalls};
use super::StatusSnapshot;
use crate::chart::{self, Bar, Charset};
use smolcord::heartbeat::BOUNDS_US;
use smolcord::shard::history::{FlapCount, SessionRecord};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// The terminal width everything is drawn for.
pub const WIDTH: usize = 80;
/// Sessions the timeline shows (the rest are in `--json`).
pub const TIMELINE_ROWS: usize = 8;
/// Longest user name shown in the header.
const USER_CHARS: usize = 32;

/// The whole `smolcord status` text.
pub fn status(snapshot: &StatusSnapshot, now_ms: u64, charset: Charset) -> String {
    let mut out = String::new();
    header(&mut out, snapshot, now_ms, charset);
    out.push('\n');
    out.push_str(&heartbeat_charts(&snapshot.heartbeat.lifetime, charset));
    out.push('\n');
    out.push_str(&sessions(snapshot, now_ms, charset));
    stalls(&mut out, &snapshot.loop_stalls);
    counters(&mut out, &snapshot.bridge);
    out
}

fn header(out: &mut String, s: &StatusSnapshot, now_ms: u64, charset: Charset) {
    let ago = |at: Option<u64>| match at {
        Some(at) => format!("{} ago", chart::span(now_ms.saturating_sub(at))),
        None => "never".to_owned(),
    };
    let user = s.user.as_deref().map_or("?".to_owned(), |user| {
        chart::fit(&charset.clean(user), USER_CHARS, charset)
    });
    let verdict = match &s.stopped {
        Some(_) => "NOT RUNNING",
        None if s.is_healthy(now_ms) => "healthy",
        None => "UNHEALTHY",
    };
    let _ = writeln!(
        out,
        "smolcord (pid {}) shard {}/{} as {user} {} {verdict}",
        s.pid,
        s.shard[0],
        s.shard[1],
        charset.dash()
    );
    if let Some(stopped) = &s.stopped {
        let _ = writeln!(
            out,
            "  not running         {} {}",
            stopped.why.describe(),
            ago(Some(stopped.at_unix_ms))
        );
    }
    let _ = writeln!(
        out,
        "  snapshot written    {}",
        ago(Some(s.written_unix_ms))
    );
    let _ = writeln!(
        out,
        "  gateway             {}; {} sessions started, {} resumed",
        if s.connected {
            "connected"
        } else {
            "not connected"
        },
        s.sessions_started,
        s.resumes
    );
    let _ = writeln!(out, "  last READY          {}", ago(s.last_ready_unix_ms));
    let _ = writeln!(out, "  last RESUMED        {}", ago(s.last_resumed_unix_ms));
    let _ = writeln!(
        out,
        "  last heartbeat ACK  {} (interval {})",
        ago(s.last_ack_unix_ms),
        s.heartbeat_interval_ms
            .map_or("-".to_owned(), |ms| format!("{ms} ms"))
    );
    let life = &s.heartbeat.lifetime;
    let _ = writeln!(
        out,
        "  heartbeats          {} sent, {} acked, {} zombies, {} deadlines skipped",
        life.beats_sent, life.acks, life.zombies, life.deadlines_skipped
    );
    if s.duplicates_dropped > 0 || s.gaps > 0 {
        let _ = writeln!(
            out,
            "  dispatches          {} replays dropped, {} sequence gaps",
            s.duplicates_dropped, s.gaps
        );
    }
    if !s.shards.is_empty() {
        let _ = writeln!(
            out,
            "  shards              {} in this process (the figures above: the first)",
            s.shards.len()
        );
        for line in &s.shards {
            let _ = writeln!(
                out,
                "    {:>4}/{:<4} {:<10} {:>3} started {:>3} resumed  last ACK {}",
                line.shard[0],
                line.shard[1],
                if line.healthy(now_ms) {
                    "healthy"
                } else {
                    "UNHEALTHY"
                },
                line.sessions_started,
                line.resumes,
                ago(line.last_ack_unix_ms)
            );
        }
    }
}

/// The lateness and round-trip charts of one heartbeat summary (the
/// `lifetime` or `session` object of the account in the status file).
pub fn heartbeat_charts(summary: &Summary, charset: Charset) -> String {
    let mut out = String::new();
    let ms = |value: Option<f64>| value.map_or("-".to_owned(), |v| chart::millis(v, charset));
    let le = charset.le();
    let late = &summary.lateness;
    let _ = writeln!(
        out,
        "  heartbeat lateness (sent {} scheduled: the loop's own delay), {} beats",
        charset.minus(),
        late.count
    );
    if late.count > 0 {
        let _ = writeln!(
            out,
            "    p50 {le} {}   p99 {le} {}   max {}",
            ms(late.p50_ms),
            ms(late.p99_ms),
            ms(late.max_ms)
        );
        out.push_str(&chart::bars(&late.bars(charset), WIDTH, charset));
    }
    let rtt = &summary.rtt;
    let _ = writeln!(
        out,
        "  heartbeat round trip (sent {} ACK: the network), {} ACKs",
        charset.arrow(),
        summary.acks
    );
    if summary.acks > 0 {
        let recent: Vec<String> = summary
            .rtt_recent_ms
            .iter()
            .map(|&v| chart::millis(v, charset))
            .collect();
        let _ = writeln!(
            out,
            "    latest {}   avg {}   recent {}",
            ms(summary.rtt_latest_ms),
            ms(summary.rtt_avg_ms),
            chart::fit(&recent.join(", "), 40, charset)
        );
        out.push_str(&chart::bars(&rtt.bars(charset), WIDTH, charset));
    }
    out
}

/// The session timeline (the newest [`TIMELINE_ROWS`]) and the flap rate.
pub fn sessions(s: &StatusSnapshot, now_ms: u64, charset: Charset) -> String {
    let mut out = String::new();
    let total = s.sessions.records().len();
    if total == 0 {
        let _ = writeln!(out, "  gateway sessions: none recorded yet");
        return out;
    }
    let shown = total.min(TIMELINE_ROWS);
    let _ = writeln!(
        out,
        "  gateway sessions (newest last; {shown} of {total} kept)"
    );
    let _ = writeln!(
        out,
        "    {:>7}  {:<8}  {:>7}  {:>5}  {:>7}  ended by",
        "ago", "start", "up for", "beats", "worst"
    );
    for record in s.sessions.records().skip(total - shown) {
        let row = session_row(record, now_ms, charset);
        let _ = writeln!(out, "{row}");
    }
    let [hour, day] = s.flaps(now_ms);
    let count = |flaps: FlapCount| {
        if flaps.complete {
            flaps.count.to_string()
        } else {
            format!("at least {}", flaps.count)
        }
    };
    let _ = writeln!(
        out,
        "  flaps: {} in the last hour, {} in the last day (any end but a shutdown)",
        count(hour),
        count(day)
    );
    out
}

fn session_row(record: &SessionRecord, now_ms: u64, charset: Charset) -> String {
    let ago = chart::span(now_ms.saturating_sub(record.started_unix_ms));
    let until = record.ended_unix_ms.unwrap_or(now_ms);
    let up_for = match record.up_unix_ms {
        Some(up) if record.end.is_none() || record.ended_unix_ms.is_some() => {
            chart::span(until.saturating_sub(up))
        }
        Some(_) => "?".to_owned(),
        None => "never".to_owned(),
    };
    // Known once the session ended (not for a live or an unrecorded one).
    let (beats, worst) = if record.ended_unix_ms.is_some() {
        (
            record.beats.to_string(),
            chart::duration(Duration::from_micros(record.worst_lateness_us), charset),
        )
    } else {
        ("-".to_owned(), "-".to_owned())
    };
    let ended_by = match (record.end, record.up_unix_ms) {
        (Some(reason), _) => reason.to_string(),
        (None, Some(_)) => "live".to_owned(),
        (None, None) => "connecting".to_owned(),
    };
    let prefix = format!(
        "    {ago:>7}  {:<8}  {up_for:>7}  {beats:>5}  {worst:>7}  ",
        record.start.as_str()
    );
    let room = WIDTH.saturating_sub(prefix.chars().count());
    format!("{prefix}{}", chart::fit(&ended_by, room, charset))
}

fn stalls(out: &mut String, stalls: &BTreeMap<String, Stalls>) {
    if stalls.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n  loop stalls (tasks that held the event loop)");
    for (task, entry) in stalls {
        let task = chart::fit(task, 40, Charset::Ascii);
        let _ = writeln!(
            out,
            "    {task:<40} {:>6} times, worst {:.0} ms",
            entry.count, entry.worst_ms
        );
    }
}

fn counters(out: &mut String, bridge: &Option<CountersSnapshot>) {
    let Some(counters) = bridge else {
        return;
    };
    let _ = writeln!(
        out,
        "\n  bridge{}",
        if counters.safe_mode {
            " (SAFE MODE: only the owner is answered)"
        } else {
            ""
        }
    );
    let cells: Vec<String> = counters
        .labelled()
        .iter()
        .map(|(label, value)| format!("{label:<24}{value:>7}"))
        .collect();
    for pair in cells.chunks(2) {
        let _ = writeln!(out, "    {}", pair.join("    "));
    }
}

impl HistogramData {
    /// One bar per bucket from the first non-empty one to the last, empty
    /// ones between included (a gap in the distribution is information).
    fn bars(&self, charset: Charset) -> Vec<Bar> {
        let mut counts = [0u64; BOUNDS_US.len()];
        for bucket in &self.buckets {
            let bound = bucket.le_us.unwrap_or(u64::MAX);
            // A bound this build does not use (another version's file) is skipped.
            if let Some(i) = BOUNDS_US.iter().position(|&b| b == bound) {
                counts[i] = counts[i].saturating_add(bucket.count);
            }
        }
        let Some(first) = counts.iter().position(|&c| c > 0) else {
            return Vec::new();
        };
        let last = counts.iter().rposition(|&c| c > 0).unwrap_or(first);
        (first..=last)
            .map(|i| Bar::new(bucket_label(i, charset), counts[i]))
            .collect()
    }
}

/// `≤ 200 µs`, or `> 50 s` for the last bucket.
fn bucket_label(i: usize, charset: Charset) -> String {
    match BOUNDS_US.get(i) {
        Some(&bound) if bound != u64::MAX => format!(
            "{} {}",
            charset.le(),
            chart::duration(Duration::from_micros(bound), charset)
        ),
        _ => {
            let previous = BOUNDS_US[BOUNDS_US.len() - 2];
            format!(
                "> {}",
                chart::duration(Duration::from_micros(previous), charset)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smolcord::heartbeat::Histogram;
    use smolcord::shard::history::{EndReason, SessionHistory, StartKind};

    const NOW: u64 = 1_700_000_000_000;
    const MIN: u64 = 60_000;

    fn histogram(samples: &[(Duration, u64)]) -> serde_json::Value {
        let mut h = Histogram::default();
        for &(value, times) in samples {
            for _ in 0..times {
                h.record(value);
            }
        }
        serde_json::to_value(&h).unwrap()
    }

    /// A section as the file has it.
    fn typed<T: serde::de::DeserializeOwned>(json: serde_json::Value) -> T {
        serde_json::from_value(json).expect("a section")
    }

    /// A snapshot with something in every section.
    fn busy_snapshot() -> StatusSnapshot {
        let lateness = histogram(&[
            (Duration::from_micros(80), 1_200),
            (Duration::from_micros(150), 9_000),
            (Duration::from_millis(3), 20),
            (Duration::from_millis(700), 1),
        ]);
        let rtt = histogram(&[
            (Duration::from_millis(35), 8_000),
            (Duration::from_millis(80), 2_000),
            (Duration::from_millis(400), 3),
        ]);
        let summary = serde_json::json!({
            "beats_sent": 10_221, "acks": 10_003, "zombies": 2, "deadlines_skipped": 0,
            "lateness": lateness, "rtt": rtt,
            "rtt_latest_ms": 41.25, "rtt_avg_ms": 45.0, "rtt_recent_ms": [41.25, 39.5, 40.0, 120.0, 38.0],
        });
        let mut sessions = SessionHistory::default();
        let ends = [
            EndReason::Reconnect,
            EndReason::InvalidSession { resumable: false },
            EndReason::Closed { code: 4004 },
            EndReason::Closed { code: 4009 },
            EndReason::Zombie,
            EndReason::Dropped,
            EndReason::Shutdown,
            EndReason::InvalidSession { resumable: true },
            EndReason::Malformed,
        ];
        let mut at = NOW - 30 * 60 * MIN;
        for (n, end) in ends.into_iter().enumerate() {
            let kind = if n % 3 == 0 {
                StartKind::Identify
            } else {
                StartKind::Resume
            };
            sessions.started(kind, at);
            sessions.established(at + 500);
            sessions.ended(
                end,
                40 + n as u64,
                Duration::from_micros(300 * n as u64),
                at + 3 * 60 * MIN,
            );
            at += 3 * 60 * MIN + 1_000;
        }
        sessions.started(StartKind::Resume, NOW - 5 * MIN);
        sessions.established(NOW - 5 * MIN + 300);
        StatusSnapshot {
            written_unix_ms: NOW - 1_000,
            pid: 4242,
            shard: [0, 1],
            connected: true,
            user: Some("a-very-long-bot-name-that-goes-on-and-on-forever-ünïcödé".into()),
            sessions_started: 4,
            resumes: 6,
            heartbeat_interval_ms: Some(41_250),
            last_ready_unix_ms: Some(NOW - 3 * 60 * MIN),
            last_resumed_unix_ms: Some(NOW - 5 * MIN),
            last_ack_unix_ms: Some(NOW - 2_000),
            duplicates_dropped: 3,
            gaps: 1,
            heartbeat: typed(serde_json::json!({ "session": summary, "lifetime": summary })),
            loop_stalls: typed(
                serde_json::json!({ "bridge-transcribe": { "count": 2, "worst_ms": 130.0 } }),
            ),
            bridge: typed(
                serde_json::json!({ "messages_handled": 12, "replies_delivered": 11, "safe_mode": false }),
            ),
            sessions,
            shards: [
                (0, Some(NOW - 2_000)),
                (1, Some(NOW - 30_000)),
                (15, Some(NOW - 60_000)),
            ]
            .into_iter()
            .map(|(id, ack)| super::super::ShardLine {
                shard: [id, 16],
                connected: ack.is_some(),
                sessions_started: 1,
                resumes: 10,
                heartbeat_interval_ms: Some(41_250),
                last_ack_unix_ms: ack,
            })
            .collect(),
            stopped: None,
        }
    }

    fn assert_fits(text: &str) {
        for line in text.lines() {
            assert!(
                line.chars().count() <= WIDTH,
                "{} columns: {line:?}",
                line.chars().count()
            );
            assert_eq!(line.trim_end(), line, "trailing space: {line:?}");
        }
    }

    #[test]
    fn the_whole_status_fits_in_80_columns_in_both_charsets() {
        let snapshot = busy_snapshot();
        let unicode = status(&snapshot, NOW, Charset::Unicode);
        assert_fits(&unicode);
        assert!(
            unicode.contains('█') && unicode.contains("≤ 200 µs"),
            "{unicode}"
        );
        let ascii = status(&snapshot, NOW, Charset::Ascii);
        assert_fits(&ascii);
        assert!(ascii.is_ascii(), "{ascii}");
        assert!(ascii.contains("<= 200 us |####"), "{ascii}");
        assert!(ascii.contains(" - healthy"), "{ascii}");
        // The same lines, only drawn differently.
        assert_eq!(unicode.lines().count(), ascii.lines().count());
    }

    #[test]
    fn the_lateness_chart_spans_the_non_empty_buckets() {
        let text = heartbeat_charts(&busy_snapshot().heartbeat.lifetime, Charset::Ascii);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "  heartbeat lateness (sent - scheduled: the loop's own delay), 10221 beats"
        );
        assert_eq!(lines[1], "    p50 <= 200 us   p99 <= 200 us   max 700 ms");
        // ≤ 100 µs through ≤ 1 s: 10 buckets, empty ones between included.
        let labels: Vec<&str> = lines[2..12]
            .iter()
            .map(|line| line.split('|').next().unwrap().trim())
            .collect();
        assert_eq!(
            labels,
            [
                "<= 100 us",
                "<= 200 us",
                "<= 500 us",
                "<= 1 ms",
                "<= 2 ms",
                "<= 5 ms",
                "<= 10 ms",
                "<= 20 ms",
                "<= 50 ms",
                "<= 100 ms"
            ]
        );
        assert!(lines[3].ends_with(" 9000   88.1%"), "{}", lines[3]);
        assert!(
            lines[5].contains("|    "),
            "an empty bucket has no bar: {}",
            lines[5]
        );
        // The single 700 ms beat is visible.
        let outlier = lines.iter().find(|l| l.contains("<= 1 s")).unwrap();
        assert!(
            outlier.contains("|. ") && outlier.ends_with("<0.1%"),
            "{outlier}"
        );
        assert!(text.contains("  heartbeat round trip (sent -> ACK: the network), 10003 ACKs"));
        assert!(
            text.contains("    latest 41.2 ms   avg 45 ms   recent 41.2 ms, 39.5 ms,"),
            "{text}"
        );
        assert!(text.contains("    <= 50 ms |####"), "{text}");
    }

    #[test]
    fn no_samples_means_no_bars() {
        let text = heartbeat_charts(&Summary::default(), Charset::Unicode);
        assert_eq!(
            text,
            "  heartbeat lateness (sent − scheduled: the loop's own delay), 0 beats\n  heartbeat round trip (sent → ACK: the network), 0 ACKs\n"
        );
        // Garbage in the file draws as nothing, not a panic.
        let file = serde_json::json!({
            "heartbeat": {"lifetime": {"lateness": {"buckets": [{"le_us": 7, "count": 3}]}}},
            "bridge": "nonsense",
        });
        let mut snapshot = serde_json::to_value(StatusSnapshot::default()).unwrap();
        for (key, value) in file.as_object().unwrap() {
            snapshot[key] = value.clone();
        }
        let text = status(&typed(snapshot), NOW, Charset::Ascii);
        assert!(text.contains("0 beats"), "{text}");
        assert!(!text.contains("bridge"), "{text}");
    }

    #[test]
    fn the_timeline_shows_the_newest_sessions_and_the_flap_rate() {
        let text = status(&busy_snapshot(), NOW, Charset::Ascii);
        let start = text.find("  gateway sessions").unwrap();
        let lines: Vec<&str> = text[start..].lines().take(11).collect();
        assert_eq!(lines[0], "  gateway sessions (newest last; 8 of 10 kept)");
        assert_eq!(
            lines[1],
            "        ago  start      up for  beats    worst  ended by"
        );
        // The oldest two (op 7, op 9 not resumable) scrolled off.
        assert!(
            lines[2].ends_with("fatal 4004 authentication failed"),
            "{}",
            lines[2]
        );
        assert_eq!(
            lines[2],
            "    23h 59m  resume     2h 59m     42   600 us  fatal 4004 authentication failed"
        );
        assert!(
            lines[3].ends_with("close 4009 session timed out"),
            "{}",
            lines[3]
        );
        assert!(lines[4].ends_with("zombie (no ACK)"), "{}", lines[4]);
        assert!(
            lines[5].ends_with("dropped (no close frame)"),
            "{}",
            lines[5]
        );
        assert!(lines[6].ends_with("shutdown"), "{}", lines[6]);
        assert!(lines[7].ends_with("op 9 resumable"), "{}", lines[7]);
        assert!(lines[8].ends_with("malformed frame"), "{}", lines[8]);
        assert_eq!(
            lines[9],
            "     5m 00s  resume     4m 59s      -        -  live"
        );
        // Ends at 21h, 24h, ... 3h ago: none in the hour; in the day all but
        // the shutdown and the first, which ended 27 h ago.
        assert_eq!(
            lines[10],
            "  flaps: 0 in the last hour, 7 in the last day (any end but a shutdown)"
        );
    }

    #[test]
    fn bridge_counters_are_labelled_lines() {
        let text = status(&busy_snapshot(), NOW, Charset::Ascii);
        assert!(!text.contains('{'), "no JSON in the text: {text}");
        assert!(
            text.contains(
                "    messages handled             12    most at once                  0\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "    replays skipped               0    failures recorded             0\n"
            ),
            "{text}"
        );
        assert!(text.contains("    bridge-transcribe"), "{text}");
    }
}
