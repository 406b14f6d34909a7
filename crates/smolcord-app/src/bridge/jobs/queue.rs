//! The per-channel job queues, bounded, so no burst of messages grows the
//! bridge: at most [`MAX_JOBS`] messages are queued or being handled in all
//! channels together, and at most [`MAX_CHANNEL_JOBS`] wait in one channel.
//!
//! What happens at a bound depends on who wrote:
//! - a message the bridge would answer (the owner's, an allowed user's)
//!   waits: [`JobQueues::room_for`] says [`Room::Wait`] and the dispatch
//!   loop stops taking events until there is room, which stops the shard
//!   reading the socket (backpressure); nothing is lost;
//! - a message the bridge would at most answer with a pairing code or not
//!   at all (a stranger's; anyone but the owner's in safe mode) is
//!   dropped, counted, once the queues are a quarter full
//!   ([`DROPPABLE_JOBS`]) or its channel has a few waiting, so a
//!   crowd of strangers or bots can never make the people the bot serves
//!   wait.
//!
//! Each channel's worker takes its jobs in order; a worker exists only while
//! its channel has jobs, so workers too are at most [`MAX_JOBS`].

use crate::bridge::jobs::backlog::Gate;
use crate::bridge::jobs::inflight::JobGuard;
use crate::bridge::report::counters::BridgeCounters;
use crate::bridge::store::persist::SeqTicket;
use smolcord::protocol::{Message, Snowflake};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};

/// Messages queued or being handled at once, all channels together. A job
/// holds one message (usually well under 1 KiB; at worst ~20 KiB: 4 000
/// characters and ten attachment URLs) and its worker's state, so 64 keep
/// the worst case near 1 MiB; with `agent_concurrency` agents at work the
/// rest is a backlog of minutes already.
pub const MAX_JOBS: usize = 64;
/// Messages waiting in one channel. Past this, one person typing faster
/// than the agent answers holds up the dispatch loop (and so the socket)
/// until their agent run ends: they cannot fill [`MAX_JOBS`] alone.
pub const MAX_CHANNEL_JOBS: usize = 16;
/// Droppable messages (strangers') are taken only while fewer jobs than
/// this are in the queues.
pub const DROPPABLE_JOBS: usize = MAX_JOBS / 4;
/// Droppable messages waiting in one channel at most, so one stranger
/// cannot take every droppable place (a stranger gets at most one pairing
/// reply a minute: more would be answered with silence anyway).
const DROPPABLE_CHANNEL_JOBS: usize = 4;

/// One piece of a channel's work.
pub(crate) struct Job {
    pub channel: Snowflake,
    pub work: Work,
    /// Keeps the job in the shutdown drain's count.
    pub guard: JobGuard,
}

/// What a job is.
pub(crate) enum Work {
    /// A message from the gateway.
    Message {
        message: Box<Message>,
        /// Holds the saved gateway seq below this message until it is done.
        ticket: SeqTicket,
        received_unix_ms: u64,
    },
    /// A reply an earlier run put on record and did not finish: deliver
    /// it (before any message of its channel that came after).
    Recorded { message: Snowflake },
    /// What a fresh session's read-back finds in this channel: handled
    /// before anything the session dispatches here after it.
    Gate(Gate),
}

impl Job {
    /// Whether it counts against [`MAX_JOBS`]: a read-back's gate holds
    /// no message of its own (what it lets through is bounded by the
    /// read-back, `ReadbackBounds`), so it takes no room from messages.
    pub fn counts(&self) -> bool {
        !matches!(self.work, Work::Gate(_))
    }
}

/// Whether a job may be queued now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// Yes: [`JobQueues::push`] it.
    Now,
    /// Not yet: try again after [`JobQueues::freed`] fires.
    Wait,
    /// Never: drop it (a droppable message at a bound).
    Drop,
}

/// The queues. One thread: no borrow is held across an await.
pub(crate) struct JobQueues {
    channels: RefCell<HashMap<Snowflake, VecDeque<Job>>>,
    /// Jobs queued or being handled.
    jobs: Cell<usize>,
    counters: BridgeCounters,
    /// Fires when a job leaves a queue or finishes.
    room: event_listener::Event,
}

impl JobQueues {
    pub fn new(counters: BridgeCounters) -> JobQueues {
        JobQueues {
            channels: RefCell::default(),
            jobs: Cell::new(0),
            counters,
            room: event_listener::Event::new(),
        }
    }

    /// Jobs queued or being handled now.
    pub fn jobs(&self) -> usize {
        self.jobs.get()
    }

    /// Whether a job for `channel` fits in the bounds (see the module doc).
    pub fn room_for(&self, channel: Snowflake, droppable: bool) -> Room {
        let waiting = self
            .channels
            .borrow()
            .get(&channel)
            .map_or(0, VecDeque::len);
        let jobs = self.jobs.get();
        match droppable {
            true if jobs >= DROPPABLE_JOBS || waiting >= DROPPABLE_CHANNEL_JOBS => Room::Drop,
            false if jobs >= MAX_JOBS || waiting >= MAX_CHANNEL_JOBS => Room::Wait,
            _ => Room::Now,
        }
    }

    /// Queues `job` (after [`Room::Now`]; a gate needs no room); returns
    /// whether its channel needs a worker started.
    pub fn push(&self, job: Job) -> bool {
        if job.counts() {
            let jobs = self.jobs.get() + 1;
            self.jobs.set(jobs);
            self.counters.jobs_now(jobs);
        }
        let mut channels = self.channels.borrow_mut();
        match channels.get_mut(&job.channel) {
            Some(queue) => {
                queue.push_back(job);
                false
            }
            None => {
                channels.insert(job.channel, VecDeque::from([job]));
                true
            }
        }
    }

    /// A listener that fires when room may have been made. Listen, then
    /// ask [`JobQueues::room_for`] again, then await it (so a wake-up in
    /// between is not missed).
    pub fn freed(&self) -> event_listener::EventListener {
        self.room.listen()
    }

    /// The channel's next job; `None` ends its worker (removing the
    /// channel in the same borrow, so no job can be stranded).
    pub fn next(&self, channel: Snowflake) -> Option<Job> {
        let mut channels = self.channels.borrow_mut();
        let job = channels.get_mut(&channel).and_then(VecDeque::pop_front);
        match job {
            Some(job) => {
                self.room.notify(usize::MAX);
                Some(job)
            }
            None => {
                channels.remove(&channel);
                None
            }
        }
    }

    /// A job taken with [`JobQueues::next`] is finished.
    pub fn done(&self, job_counted: bool) {
        if job_counted {
            self.jobs.set(self.jobs.get().saturating_sub(1));
        }
        self.room.notify(usize::MAX);
    }
}
