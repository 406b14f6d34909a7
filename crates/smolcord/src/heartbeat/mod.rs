//! heartbeat: the fixed-deadline schedule and its account book.
//!
//! Beats are scheduled by absolute deadlines, `deadline_n = first + n *
//! interval` with `first = hello + interval * jitter`, so a beat that fires
//! late never pushes the next one later, and each beat's lateness (sent −
//! scheduled) is a number we can keep. Lateness measures the local loop;
//! round-trip time (sent → ACK) measures the network; they are kept apart so
//! a user can tell a busy host from a slow network.
//!
//! Nothing here reads a clock: every method takes `now`, so the shard drives
//! it with real time and tests drive it with made-up instants.
//!
//! ```
//! use smolcord::heartbeat::Heartbeat;
//! use std::time::{Duration, Instant};
//! let hello = Instant::now();
//! let mut hb = Heartbeat::new(hello, Duration::from_millis(1000), 0.5);
//! assert_eq!(hb.next_deadline(), hello + Duration::from_millis(500));
//! let sent = hello + Duration::from_millis(503);
//! hb.on_sent(sent);
//! hb.on_ack(sent + Duration::from_millis(40));
//! assert_eq!(hb.account().session.beats_sent, 1);
//! assert_eq!(hb.account().session.rtt_latest_ms, Some(40.0));
//! ```

mod account;
mod histogram;

pub use account::{Account, BeatRecord, Summary};
pub use histogram::{Histogram, BOUNDS_US};

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// At most this many beats are remembered as un-ACKed; more means a zombie
/// long ago.
const MAX_OUTSTANDING: usize = 4;
/// Fraction of an interval without an ACK that makes a zombie, once the
/// reader has caught up with everything the gateway sent.
const ZOMBIE_SILENCE: f64 = 0.9;
/// Intervals without an ACK that make a zombie even while frames keep
/// arriving (a peer that floods us but never answers a beat). Twice the
/// silence rule, less the same 10 % margin: judged at the second deadline.
const ZOMBIE_SILENCE_BEHIND: f64 = 1.9;

/// One connection's heartbeat schedule and ACK tracking, plus a reference to
/// the account it writes to.
#[derive(Debug)]
pub struct Heartbeat {
    first: Instant,
    interval: Duration,
    /// Index of the next scheduled beat.
    next: u64,
    /// Beats not yet acknowledged, oldest first.
    outstanding: VecDeque<Outstanding>,
    last_sent: Option<Instant>,
    /// Time the reader spent paused on purpose (backpressure) so far, not
    /// counting a pause still going on.
    paused_total: Duration,
    /// When the current pause began.
    paused_since: Option<Instant>,
    account: Account,
}

#[derive(Debug, Clone, Copy)]
struct Outstanding {
    scheduled: Instant,
    sent: Instant,
    /// `paused_total` when it was sent.
    paused_before: Duration,
}

/// What the reader knows when a verdict is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reading {
    /// Everything the gateway sent so far has been read: a missing ACK is
    /// really missing.
    CaughtUp,
    /// Frames are still waiting unread (a burst, or a consumer we are
    /// waiting for): the ACK may be among them.
    Behind,
}

/// The verdict at a deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Send the beat.
    Beat,
    /// The oldest beat was not acknowledged in time: the connection is a
    /// zombie.
    Zombie,
}

impl Heartbeat {
    /// A schedule starting at `hello + interval * jitter` (`jitter` in
    /// [0, 1)), writing into a fresh [`Account`].
    pub fn new(hello: Instant, interval: Duration, jitter: f64) -> Heartbeat {
        Heartbeat::with_account(hello, interval, jitter, Account::default())
    }

    /// Like [`Heartbeat::new`], continuing an existing account (the process
    /// lifetime part survives reconnects; the session part is the caller's
    /// to reset).
    pub fn with_account(
        hello: Instant,
        interval: Duration,
        jitter: f64,
        account: Account,
    ) -> Heartbeat {
        let jitter = if jitter.is_finite() {
            jitter.clamp(0.0, 0.999)
        } else {
            0.0
        };
        Heartbeat {
            first: hello + interval.mul_f64(jitter),
            interval,
            next: 0,
            outstanding: VecDeque::new(),
            last_sent: None,
            paused_total: Duration::ZERO,
            paused_since: None,
            account,
        }
    }

    /// The heartbeat interval from Hello.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// When the next beat is due.
    pub fn next_deadline(&self) -> Instant {
        self.deadline(self.next)
    }

    fn deadline(&self, n: u64) -> Instant {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        self.first + self.interval.saturating_mul(n)
    }

    /// Whether the oldest un-ACKed beat has gone unanswered too long.
    ///
    /// Its age is counted from when it was *sent* (a beat that went out late
    /// because the loop was busy gets its full interval: a local stall is
    /// not network silence) and leaves out the time the reader was paused
    /// on purpose (see [`Heartbeat::pause`]): an ACK we chose not to read
    /// yet is not missing. With everything read ([`Reading::CaughtUp`]) 0.9
    /// of an interval makes a zombie — the 10 % margin absorbs timer jitter,
    /// so a beat sent a hair after its deadline is judged at the next one.
    /// While frames are still arriving faster than we read them
    /// ([`Reading::Behind`]) the ACK may be among them, so the verdict waits
    /// for 1.9 intervals: a peer that floods us but never answers is still
    /// left at the second deadline.
    pub fn verdict(&self, now: Instant, reading: Reading) -> Verdict {
        let Some(oldest) = self.outstanding.front() else {
            return Verdict::Beat;
        };
        let paused = self.paused_until(now).saturating_sub(oldest.paused_before);
        let age = now
            .saturating_duration_since(oldest.sent)
            .saturating_sub(paused);
        let limit = match reading {
            Reading::CaughtUp => ZOMBIE_SILENCE,
            Reading::Behind => ZOMBIE_SILENCE_BEHIND,
        };
        if age >= self.interval.mul_f64(limit) {
            Verdict::Zombie
        } else {
            Verdict::Beat
        }
    }

    /// The reader stops reading on purpose (the consumer is behind).
    pub fn pause(&mut self, now: Instant) {
        self.paused_since.get_or_insert(now);
    }

    /// The reader reads again.
    pub fn resume_reading(&mut self, now: Instant) {
        if let Some(since) = self.paused_since.take() {
            self.paused_total += now.saturating_duration_since(since);
        }
    }

    /// Total paused time up to `now`, a pause still going on included.
    fn paused_until(&self, now: Instant) -> Duration {
        self.paused_total
            + self
                .paused_since
                .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    /// Records a scheduled beat sent at `now`, advancing the schedule past
    /// `now` (deadlines missed entirely during a stall are counted, not
    /// sent in a burst). Returns the beat's record.
    pub fn on_sent(&mut self, now: Instant) -> BeatRecord {
        let scheduled = self.next_deadline();
        let lateness = now.saturating_duration_since(scheduled);
        self.next += 1;
        let mut skipped = 0;
        while self.next_deadline() <= now {
            self.next += 1;
            skipped += 1;
        }
        let gap = self
            .last_sent
            .map(|last| now.saturating_duration_since(last));
        self.track_sent(scheduled, now);
        self.account
            .record_sent(scheduled, now, lateness, gap, self.interval, skipped)
    }

    /// Records an extra beat the server asked for (op 1) sent at `now`. It
    /// does not move the schedule.
    pub fn on_requested_sent(&mut self, now: Instant) {
        self.track_sent(now, now);
        self.account.record_requested();
    }

    fn track_sent(&mut self, scheduled: Instant, now: Instant) {
        if self.outstanding.len() == MAX_OUTSTANDING {
            self.outstanding.pop_front();
        }
        self.outstanding.push_back(Outstanding {
            scheduled,
            sent: now,
            paused_before: self.paused_until(now),
        });
        self.last_sent = Some(now);
    }

    /// Records an ACK received at `now`; returns the acknowledged beat with
    /// its round-trip time, or `None` for an ACK nothing was waiting for.
    pub fn on_ack(&mut self, now: Instant) -> Option<BeatRecord> {
        let beat = self.outstanding.pop_front()?;
        Some(self.account.record_ack(beat.scheduled, beat.sent, now))
    }

    /// Counts a beat later than the warning threshold.
    pub fn on_late_warning(&mut self) {
        self.account.record_late_warning();
    }

    /// Counts a zombie verdict.
    pub fn on_zombie(&mut self) {
        self.account.record_zombie();
    }

    /// Number of beats still waiting for an ACK.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// The account.
    pub fn account(&self) -> &Account {
        &self.account
    }

    /// Gives the account back (when the connection ends).
    pub fn into_account(self) -> Account {
        self.account
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn deadlines_are_absolute_lateness_does_not_accumulate() {
        let hello = Instant::now();
        let mut hb = Heartbeat::new(hello, 10 * SECOND, 0.25);
        assert_eq!(hb.next_deadline(), hello + Duration::from_millis(2500));
        // First beat 300 ms late.
        let record = hb.on_sent(hello + Duration::from_millis(2800));
        assert_eq!(record.lateness, Duration::from_millis(300));
        // The next deadline is still first + interval, not sent + interval.
        assert_eq!(hb.next_deadline(), hello + Duration::from_millis(12_500));
    }

    #[test]
    fn a_long_stall_skips_deadlines_instead_of_bursting() {
        let hello = Instant::now();
        let mut hb = Heartbeat::new(hello, SECOND, 0.0);
        hb.on_sent(hello);
        hb.on_ack(hello + Duration::from_millis(10));
        // Loop stalled for 3.5 s: deadlines 1, 2, 3 passed.
        let record = hb.on_sent(hello + Duration::from_millis(3500));
        assert_eq!(record.lateness, Duration::from_millis(2500));
        assert_eq!(hb.next_deadline(), hello + 4 * SECOND);
        assert_eq!(hb.account().session.deadlines_skipped, 2);
    }

    #[test]
    fn zombie_only_after_an_interval_of_network_silence() {
        let hello = Instant::now();
        let mut hb = Heartbeat::new(hello, SECOND, 0.0);
        hb.on_sent(hello);
        assert_eq!(
            hb.verdict(hello + Duration::from_millis(899), Reading::CaughtUp),
            Verdict::Beat
        );
        assert_eq!(
            hb.verdict(hello + Duration::from_millis(900), Reading::CaughtUp),
            Verdict::Zombie
        );
        assert_eq!(
            hb.verdict(hello + SECOND, Reading::CaughtUp),
            Verdict::Zombie
        );
        hb.on_ack(hello + SECOND);
        assert_eq!(hb.verdict(hello + SECOND, Reading::CaughtUp), Verdict::Beat);
    }

    #[test]
    fn a_late_beat_gets_its_full_interval_before_a_zombie_verdict() {
        let hello = Instant::now();
        let mut hb = Heartbeat::new(hello, SECOND, 0.0);
        // Beat 0 sent 900 ms late (loop stall); beat 1 is due at 1 s.
        hb.on_sent(hello + Duration::from_millis(900));
        assert_eq!(hb.verdict(hello + SECOND, Reading::CaughtUp), Verdict::Beat);
        assert_eq!(
            hb.verdict(hello + Duration::from_millis(1900), Reading::CaughtUp),
            Verdict::Zombie
        );
    }

    #[test]
    fn paused_reading_does_not_count_as_silence() {
        let hello = Instant::now();
        let ms = Duration::from_millis;
        let mut hb = Heartbeat::new(hello, SECOND, 0.0);
        hb.on_sent(hello);
        // The consumer was behind from 100 ms to 5.1 s: we did not read.
        hb.pause(hello + ms(100));
        assert_eq!(
            hb.verdict(hello + ms(3000), Reading::CaughtUp),
            Verdict::Beat
        );
        hb.resume_reading(hello + ms(5100));
        // 100 ms observed before the pause + 799 after: not yet.
        assert_eq!(
            hb.verdict(hello + ms(5899), Reading::CaughtUp),
            Verdict::Beat
        );
        assert_eq!(
            hb.verdict(hello + ms(5900), Reading::CaughtUp),
            Verdict::Zombie
        );
    }

    #[test]
    fn behind_a_burst_the_verdict_waits_for_the_second_deadline() {
        let hello = Instant::now();
        let ms = Duration::from_millis;
        let mut hb = Heartbeat::new(hello, SECOND, 0.0);
        hb.on_sent(hello);
        assert_eq!(hb.verdict(hello + SECOND, Reading::Behind), Verdict::Beat);
        assert_eq!(hb.verdict(hello + ms(1899), Reading::Behind), Verdict::Beat);
        assert_eq!(
            hb.verdict(hello + ms(1900), Reading::Behind),
            Verdict::Zombie
        );
    }

    #[test]
    fn requested_beats_do_not_move_the_schedule() {
        let hello = Instant::now();
        let mut hb = Heartbeat::new(hello, SECOND, 0.5);
        let before = hb.next_deadline();
        hb.on_requested_sent(hello + Duration::from_millis(100));
        assert_eq!(hb.next_deadline(), before);
        assert!(hb.on_ack(hello + Duration::from_millis(150)).is_some());
        assert!(hb.on_ack(hello + Duration::from_millis(160)).is_none());
        assert_eq!(hb.account().session.acks, 1);
    }

    #[test]
    fn weird_jitter_is_clamped() {
        let hello = Instant::now();
        for jitter in [f64::NAN, -1.0, 7.0] {
            let hb = Heartbeat::new(hello, SECOND, jitter);
            assert!(hb.next_deadline() < hello + SECOND);
        }
    }
}
