//! The heartbeat account book: per-beat records (a small ring) and summaries
//! for the current session and the process lifetime. Fixed size.

use super::histogram::Histogram;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Recent beats kept for inspection.
const RECENT_BEATS: usize = 16;
/// Recent round-trip times kept (like twilight's `Latency::recent`).
const RECENT_RTTS: usize = 5;

/// One beat: when it was due, when it went out, and its ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BeatRecord {
    /// The deadline.
    pub scheduled: Instant,
    /// When it was written to the socket.
    pub sent: Instant,
    /// `sent - scheduled`: how late the local loop was.
    pub lateness: Duration,
    /// Time since the previous beat went out.
    pub gap: Option<Duration>,
    /// ACK round-trip time (network), once acknowledged.
    pub rtt: Option<Duration>,
}

/// Counters and distributions over a span of time.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Scheduled beats sent.
    pub beats_sent: u64,
    /// Extra beats the server asked for (op 1).
    pub requested_beats: u64,
    /// ACKs matched to a beat.
    pub acks: u64,
    /// Zombie verdicts (no ACK for a whole interval).
    pub zombies: u64,
    /// Deadlines that passed entirely during a stall (no beat was sent for them).
    pub deadlines_skipped: u64,
    /// Beats later than the warning threshold.
    pub late_warnings: u64,
    /// Lateness (sent − scheduled) distribution.
    pub lateness: Histogram,
    /// ACK round-trip distribution.
    pub rtt: Histogram,
    /// Latest ACK round trip in ms.
    pub rtt_latest_ms: Option<f64>,
    /// Mean ACK round trip in ms.
    pub rtt_avg_ms: Option<f64>,
    /// Up to five most recent round trips in ms, newest first.
    pub rtt_recent_ms: Vec<f64>,
    /// Largest gap between two beats, as a fraction of the interval.
    pub worst_gap_ratio: f64,
    /// Smallest margin left before a full interval passed without a beat
    /// (interval − worst gap), in ms; negative means a gap exceeded it.
    pub min_slack_ms: Option<f64>,
    #[serde(skip)]
    rtt_total: Duration,
}

impl Summary {
    fn record_sent(
        &mut self,
        lateness: Duration,
        gap: Option<Duration>,
        interval: Duration,
        skipped: u64,
    ) {
        self.beats_sent += 1;
        self.deadlines_skipped += skipped;
        self.lateness.record(lateness);
        if let Some(gap) = gap {
            let ratio = gap.as_secs_f64() / interval.as_secs_f64().max(f64::EPSILON);
            if ratio > self.worst_gap_ratio {
                self.worst_gap_ratio = ratio;
            }
            let slack = (interval.as_secs_f64() - gap.as_secs_f64()) * 1000.0;
            self.min_slack_ms = Some(self.min_slack_ms.map_or(slack, |min| min.min(slack)));
        }
    }

    fn record_rtt(&mut self, rtt: Duration) {
        self.acks += 1;
        self.rtt.record(rtt);
        self.rtt_total += rtt;
        let ms = rtt.as_secs_f64() * 1000.0;
        self.rtt_latest_ms = Some(ms);
        self.rtt_avg_ms = Some(self.rtt_total.as_secs_f64() * 1000.0 / self.acks as f64);
        self.rtt_recent_ms.insert(0, ms);
        self.rtt_recent_ms.truncate(RECENT_RTTS);
    }
}

/// The account: the current session, the whole process, and recent beats.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Account {
    /// Since the current gateway session started (READY).
    pub session: Summary,
    /// Since the process started.
    pub lifetime: Summary,
    #[serde(skip)]
    recent: Vec<BeatRecord>,
}

impl Account {
    /// Starts a new session's summary; the lifetime one carries on.
    pub fn reset_session(&mut self) {
        self.session = Summary::default();
    }

    /// Recent beats, oldest first (at most 16).
    pub fn recent(&self) -> &[BeatRecord] {
        &self.recent
    }

    /// Counts a beat later than the warning threshold.
    pub fn record_late_warning(&mut self) {
        self.session.late_warnings += 1;
        self.lifetime.late_warnings += 1;
    }

    pub(super) fn record_sent(
        &mut self,
        scheduled: Instant,
        sent: Instant,
        lateness: Duration,
        gap: Option<Duration>,
        interval: Duration,
        skipped: u64,
    ) -> BeatRecord {
        self.session.record_sent(lateness, gap, interval, skipped);
        self.lifetime.record_sent(lateness, gap, interval, skipped);
        let record = BeatRecord {
            scheduled,
            sent,
            lateness,
            gap,
            rtt: None,
        };
        if self.recent.len() == RECENT_BEATS {
            self.recent.remove(0);
        }
        self.recent.push(record);
        record
    }

    pub(super) fn record_requested(&mut self) {
        self.session.requested_beats += 1;
        self.lifetime.requested_beats += 1;
    }

    pub(super) fn record_ack(
        &mut self,
        scheduled: Instant,
        sent: Instant,
        now: Instant,
    ) -> BeatRecord {
        let rtt = now.saturating_duration_since(sent);
        self.session.record_rtt(rtt);
        self.lifetime.record_rtt(rtt);
        match self.recent.iter_mut().rev().find(|beat| beat.sent == sent) {
            Some(beat) => {
                beat.rtt = Some(rtt);
                *beat
            }
            None => BeatRecord {
                scheduled,
                sent,
                lateness: sent.saturating_duration_since(scheduled),
                gap: None,
                rtt: Some(rtt),
            },
        }
    }

    pub(super) fn record_zombie(&mut self) {
        self.session.zombies += 1;
        self.lifetime.zombies += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::super::Heartbeat;
    use super::*;

    #[test]
    fn stays_fixed_size_over_ten_thousand_beats() {
        let hello = Instant::now();
        let interval = Duration::from_millis(100);
        let mut hb = Heartbeat::new(hello, interval, 0.0);
        for n in 0..10_000u32 {
            let due = hello + interval * n;
            let sent = due + Duration::from_micros(u64::from(n % 7) * 100);
            hb.on_sent(sent);
            hb.on_ack(sent + Duration::from_millis(30));
        }
        let account = hb.account();
        assert_eq!(account.lifetime.beats_sent, 10_000);
        assert_eq!(account.lifetime.acks, 10_000);
        assert_eq!(account.recent().len(), RECENT_BEATS);
        assert_eq!(account.session.rtt_recent_ms.len(), RECENT_RTTS);
        assert_eq!(account.lifetime.lateness.count(), 10_000);
        assert_eq!(account.lifetime.rtt.count(), 10_000);
        assert_eq!(account.lifetime.lateness.max(), Duration::from_micros(600));
        assert!((account.lifetime.rtt_avg_ms.unwrap() - 30.0).abs() < 1e-6);
        // Every gap is 100 ms ± 0.6 ms.
        assert!(account.lifetime.worst_gap_ratio < 1.01);
        assert!(account.lifetime.min_slack_ms.unwrap() > -1.0);
    }

    #[test]
    fn session_resets_lifetime_carries_on() {
        let hello = Instant::now();
        let mut hb = Heartbeat::new(hello, Duration::from_secs(1), 0.0);
        hb.on_sent(hello);
        hb.on_zombie();
        let mut account = hb.into_account();
        account.reset_session();
        assert_eq!(account.session.beats_sent, 0);
        assert_eq!(account.lifetime.beats_sent, 1);
        assert_eq!(account.lifetime.zombies, 1);
    }
}
