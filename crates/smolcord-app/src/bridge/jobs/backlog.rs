//! What a read-back hands to a channel's worker (see `readback`): a
//! [`Gate`] queued at the head of the channel when a fresh session begins,
//! so nothing the new session dispatches in that channel is handled before
//! what the gap left; the [`Findings`] the read-back sends through it; the
//! [`Tally`] that logs one line per read-back once every channel's
//! findings are handled; and the bounds ([`ReadbackBounds`]).

use smol::channel::{Receiver, Sender};
use smolcord::protocol::{Message, Snowflake};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// How much a read-back takes on (docs/budget.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadbackBounds {
    /// Messages older than this are not answered (the channel gets the
    /// notice instead): a request to an agent that waited this long is
    /// likely stale, and acting on it unasked could surprise.
    pub max_age: Duration,
    /// Messages answered per channel (the newest; older ones get the notice).
    pub per_channel: usize,
    /// Messages a read-back holds at once, all channels together (read
    /// and not handled yet): it waits for room before the next channel
    /// (at most `room_wait`), then what does not fit gets the notice.
    pub total: usize,
    /// How long a read-back waits for room under `total` before it reads
    /// the next channel anyway.
    pub room_wait: Duration,
    /// Channels read besides the answered users' DM channels and the
    /// configured server channels (all of those are read): other marked
    /// channels (strangers' DMs), the newest marks first.
    pub channels: usize,
    /// In thread mode, the bot's threads read (of the 256 it remembers,
    /// those in a configured channel with the newest activity: the later
    /// of the thread's start and its processed mark).
    pub threads: usize,
    /// Pages (of 50 messages, the most one read returns) read per channel
    /// before jumping to its newest page.
    pub pages_per_channel: usize,
    /// The first wait before a channel whose history could not be read
    /// (or a DM channel that could not be opened) is tried again; it
    /// doubles after each failure, up to `retry_max`. The channel stays
    /// held meanwhile, until it is read or `max_age` has passed since the
    /// session began (then the gap has aged out: the notice, and the gate
    /// opens).
    pub retry_first: Duration,
    /// The longest wait between two tries of one channel.
    pub retry_max: Duration,
}

impl Default for ReadbackBounds {
    fn default() -> Self {
        ReadbackBounds {
            max_age: Duration::from_secs(3600),
            per_channel: 20,
            total: 64,
            // Answering 64 takes the agent minutes; a channel held
            // longer than this (a retry ahead of its gate) must not hold
            // up the others' read.
            room_wait: Duration::from_secs(60),
            channels: 32,
            // A conversation goes on in the newest threads; each is a
            // request or more at every fresh session.
            threads: 16,
            pages_per_channel: 5,
            // A REST client's own retries (three 5xx, five 429s) are over
            // in seconds; an outage of Discord's history lasts minutes:
            // 2 s doubling to a minute keeps the tries to ~60 an hour.
            retry_first: Duration::from_secs(2),
            retry_max: Duration::from_secs(60),
        }
    }
}

/// Messages asked for per history page. Discord allows 100; 50 (its
/// default) keeps a page of long messages within the REST client's 1 MiB
/// answer cap.
pub(crate) const PAGE: u8 = 50;

/// Which of the read-back's bounds a message it found counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bucket {
    /// Sent while a session of the bridge was live (or resumable): it was
    /// dispatched to the bridge, which owes it an answer (a crash or a
    /// channel held by its read-back kept it from one). Counted only
    /// against the total, which bounds what a read-back holds.
    Live,
    /// Sent in the gap before the `n`th session remembered (the number of
    /// sessions that began before it): `per_channel` of each gap.
    Gap(usize),
}

/// Where a message sent at `sent_ms` falls among `spans` (when sessions
/// were live, oldest first, on the same clock as `sent_ms`).
pub(crate) fn bucket(sent_ms: u64, spans: &[(u64, u64)]) -> Bucket {
    if spans
        .iter()
        .any(|&(from, to)| from <= sent_ms && sent_ms <= to)
    {
        return Bucket::Live;
    }
    Bucket::Gap(spans.iter().filter(|(from, _)| *from <= sent_ms).count())
}

/// What a read-back keeps of one channel while it reads it, oldest first:
/// per gap the newest `per_gap`, and at most `cap` (what is left of the
/// total) in all, the newest. What falls out is handed back, to be counted
/// in the notice.
pub(crate) struct Kept<T> {
    items: std::collections::VecDeque<(T, Bucket)>,
    per_gap: usize,
    cap: usize,
}

impl<T> Kept<T> {
    pub fn new(per_gap: usize, cap: usize) -> Kept<T> {
        Kept {
            items: std::collections::VecDeque::new(),
            per_gap,
            cap,
        }
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Keeps `item` (newer than every one kept); returns the one that no
    /// longer fits, if any.
    pub fn push(&mut self, item: T, bucket: Bucket) -> Option<T> {
        self.items.push_back((item, bucket));
        if let Bucket::Gap(_) = bucket {
            let mut of_gap = self.items.iter().filter(|(_, b)| *b == bucket);
            if of_gap.nth(self.per_gap).is_some() {
                let oldest = self.items.iter().position(|(_, b)| *b == bucket)?;
                return self.items.remove(oldest).map(|(item, _)| item);
            }
        }
        if self.items.len() > self.cap {
            return self.items.pop_front().map(|(item, _)| item);
        }
        None
    }

    /// Keeps only what `keep` says.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.items.retain(|(item, _)| keep(item));
    }

    pub fn into_vec(self) -> Vec<T> {
        self.items.into_iter().map(|(item, _)| item).collect()
    }
}

/// Messages of a channel that the read-back did not answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Skipped {
    /// How many (at least, when `more`).
    pub count: usize,
    /// Some were not even read (past the page bound): "at least".
    pub more: bool,
    /// The oldest one's send time (unix ms).
    pub first_unix_ms: u64,
    /// The newest one: marked processed once the notice is out.
    pub last: Snowflake,
    /// Its author (no notice for someone the bot does not answer).
    pub author: Snowflake,
}

/// A channel whose history could not be read until the gap aged out:
/// its user is told (never silence), and its gate opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unread {
    /// From when on messages may have gone unread (unix ms, Discord's
    /// clock): the channel's mark, or the age bound.
    pub since_unix_ms: u64,
    /// Whose channel it is (no notice for a stranger), if known.
    pub user: Option<Snowflake>,
    /// A configured server channel (or the bot's thread in one): the
    /// notice goes there, to whoever wrote in it.
    pub server: bool,
}

/// Messages read back and not handled yet, all read-backs together: what
/// the read-backs hold in memory, at most [`ReadbackBounds::total`]. A
/// read-back waits for room before it reads the next channel
/// (`readback`), so the bound limits what is held at once, not what is
/// answered.
#[derive(Default)]
pub(crate) struct Held {
    count: Cell<usize>,
    freed: event_listener::Event,
}

impl Held {
    pub fn count(&self) -> usize {
        self.count.get()
    }

    /// Holds `n` more until the returned hold is dropped.
    pub fn take(self: &Rc<Held>, n: usize) -> Hold {
        self.count.set(self.count.get() + n);
        Hold {
            held: self.clone(),
            n,
        }
    }

    /// Fires when some are let go (listen, check, then await).
    pub fn freed(&self) -> event_listener::EventListener {
        self.freed.listen()
    }
}

/// Some messages held (see [`Held`]); let go when dropped.
pub(crate) struct Hold {
    held: Rc<Held>,
    n: usize,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let count = self.held.count.get().saturating_sub(self.n);
        self.held.count.set(count);
        self.held.freed.notify(usize::MAX);
    }
}

/// What the read-back found in one channel, oldest first.
pub(crate) struct Findings {
    pub skipped: Option<Skipped>,
    /// The history could not be read at all (see [`Unread`]).
    pub unread: Option<Unread>,
    pub messages: Vec<Message>,
    /// When the fresh session began (unix ms): a message sent before it
    /// is answered late and says so; one sent after it (read back while
    /// its dispatch was on its way) is not late.
    pub session_began_unix_ms: u64,
    /// Held until the worker is done with them.
    pub tally: Rc<Tally>,
    /// Counts `messages` among those held until the worker is done.
    pub hold: Option<Hold>,
}

/// A channel's place in its queue, waiting for the read-back.
pub(crate) struct Gate {
    pub findings: Receiver<Findings>,
}

/// A gate and the sender that opens it.
pub(crate) fn gate() -> (Sender<Findings>, Gate) {
    let (tx, rx) = smol::channel::bounded(1);
    (tx, Gate { findings: rx })
}

/// One read-back's counts. Logged, and the read-back taken off the books
/// (`runtime.json`'s `readback_due`), when the last holder lets go: the
/// read-back task and every channel's findings.
pub(crate) struct Tally {
    /// Takes the read-back off the books; called when it is complete.
    pub on_complete: Option<Box<dyn FnOnce()>>,
    pub channels: Cell<usize>,
    pub found: Cell<usize>,
    pub handled: Cell<usize>,
    pub skipped: Cell<usize>,
    /// Findings sent and not yet handled to the end.
    pub unfinished: Cell<usize>,
    /// Every channel was read (no REST failure, not cancelled).
    pub read_all: Cell<bool>,
}

impl Tally {
    pub fn add(cell: &Cell<usize>, n: usize) {
        cell.set(cell.get() + n);
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        let complete = self.read_all.get() && self.unfinished.get() == 0;
        log::info!(
            "read-back after a fresh session: {} channel(s) read, {} message(s) found, {} handled, {} skipped{}",
            self.channels.get(),
            self.found.get(),
            self.handled.get(),
            self.skipped.get(),
            if complete { "" } else { " (incomplete: read again at the next session start)" }
        );
        if complete {
            if let Some(done) = self.on_complete.take() {
                done();
            }
        }
    }
}

/// Discord's epoch (2015-01-01T00:00:00Z) in Unix ms.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// When a snowflake was made (unix ms).
pub(crate) fn snowflake_unix_ms(id: Snowflake) -> u64 {
    (id.get() >> 22) + DISCORD_EPOCH_MS
}

/// The smallest snowflake of `unix_ms` (a history query from a time).
pub(crate) fn snowflake_at(unix_ms: u64) -> Snowflake {
    Snowflake::new(unix_ms.saturating_sub(DISCORD_EPOCH_MS) << 22)
}

/// `09:12` (UTC) of a unix ms time.
pub(crate) fn clock_utc(unix_ms: u64) -> String {
    let minutes = unix_ms / 60_000;
    format!("{:02}:{:02}", minutes / 60 % 24, minutes % 60)
}

/// The first line of a late answer.
pub(crate) fn late_prefix(sent_unix_ms: u64) -> String {
    format!(
        "(sent while I was offline, {} UTC)",
        clock_utc(sent_unix_ms)
    )
}

/// The one notice for a channel's skipped messages.
pub(crate) fn skipped_notice(skipped: &Skipped, bounds: &ReadbackBounds) -> String {
    let count = if skipped.more {
        format!("more than {}", skipped.count)
    } else {
        skipped.count.to_string()
    };
    let plural = if skipped.count == 1 && !skipped.more {
        ""
    } else {
        "s"
    };
    format!(
        "While I was offline, {count} message{plural} (from {} UTC on) went unanswered: after a gap I answer at most {} per chat, none older than {}. Please send again what still matters.",
        clock_utc(skipped.first_unix_ms),
        bounds.per_channel,
        age_text(bounds.max_age)
    )
}

/// The one notice for a channel whose history could not be read.
pub(crate) fn unread_notice(unread: &Unread) -> String {
    format!(
        "While I was offline you may have written to me (from {} UTC on), but I could not read those messages back. Please send again what still matters.",
        clock_utc(unread.since_unix_ms)
    )
}

fn age_text(age: Duration) -> String {
    let secs = age.as_secs();
    match secs {
        s if s >= 3600 && s % 3600 == 0 => format!("{} h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snowflake_times_round_trip_and_read_as_utc() {
        // 2026-11-29T09:12:34Z
        let ms = 1_795_943_554_000;
        assert_eq!(snowflake_unix_ms(snowflake_at(ms)), ms);
        assert_eq!(clock_utc(ms), "09:12");
        assert_eq!(clock_utc(0), "00:00");
        assert_eq!(late_prefix(0), "(sent while I was offline, 00:00 UTC)");
        assert_eq!(snowflake_at(0), Snowflake::new(0));
    }

    #[test]
    fn a_message_counts_against_its_gap_or_as_the_sessions() {
        let spans = [(100, 200), (300, 300), (400, 450)];
        let table = [
            (50, Bucket::Gap(0)),
            (100, Bucket::Live),
            (200, Bucket::Live),
            (201, Bucket::Gap(1)),
            (300, Bucket::Live),
            (350, Bucket::Gap(2)),
            (449, Bucket::Live),
            (451, Bucket::Gap(3)),
        ];
        for (sent, expected) in table {
            assert_eq!(bucket(sent, &spans), expected, "sent at {sent}");
        }
        // Nothing remembered (a state dir from before): one gap.
        assert_eq!(bucket(5, &[]), Bucket::Gap(0));
    }

    #[test]
    fn each_gap_keeps_its_newest_and_the_total_its_newest() {
        // Two a gap, five in all.
        let mut kept = Kept::new(2, 5);
        let mut out = Vec::new();
        let pushes = [
            (1, Bucket::Gap(0)),
            (2, Bucket::Gap(0)),
            (3, Bucket::Gap(0)),
            (4, Bucket::Live),
            (5, Bucket::Live),
            (6, Bucket::Live),
            (7, Bucket::Gap(1)),
        ];
        for (id, b) in pushes {
            out.extend(kept.push(id, b));
        }
        // 1: its gap's third; 2: over the total.
        assert_eq!(out, [1, 2]);
        assert_eq!(kept.into_vec(), [3, 4, 5, 6, 7]);
        // A session's backlog is not cut by the per-gap bound.
        let mut kept = Kept::new(2, 64);
        for id in 0..30 {
            assert_eq!(kept.push(id, Bucket::Live), None);
        }
        assert_eq!(kept.len(), 30);
    }

    #[test]
    fn the_notice_says_how_many_and_why() {
        let skipped = Skipped {
            count: 3,
            more: false,
            first_unix_ms: 0,
            last: Snowflake::new(1),
            author: Snowflake::new(2),
        };
        let text = skipped_notice(&skipped, &ReadbackBounds::default());
        assert!(text.contains("3 messages (from 00:00 UTC on)"), "{text}");
        assert!(text.contains("none older than 1 h"), "{text}");
        let one = Skipped {
            count: 1,
            more: true,
            ..skipped
        };
        assert!(skipped_notice(&one, &ReadbackBounds::default()).contains("more than 1 messages"));
        assert!(text.chars().count() < 2000);
    }
}
