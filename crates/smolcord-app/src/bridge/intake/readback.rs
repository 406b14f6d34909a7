//! Read-back: what the gateway never delivered is read from the channels'
//! history.
//!
//! Discord dispatches a message only to a live session, or replays it to
//! a resumed one. A message sent while no session could be resumed (op 9,
//! a session that expired while the bridge was stopped, a start whose
//! Resume is refused) reaches no session at all; it is only in the
//! channel's history. So after every fresh session (READY on shard 0,
//! which carries the DMs) the bridge reads back each DM channel it knows —
//! every channel with a processed mark, and the owner's and the allowed
//! users' DM channels (`POST /users/@me/channels`) — from its last
//! processed message on (`GET /channels/{id}/messages?after=`), paging
//! until caught up, and hands what is not processed yet to the channel's
//! worker, oldest first.
//!
//! Server channels too: every channel in `channels` (at most 64, all
//! read) and, in thread mode, the bot's threads there with the newest
//! activity (`threads`, 16 of the 256 it remembers: a conversation goes
//! on in the newest; an older thread's gap is not read). Of their history
//! only what live intake would have taken becomes a task (the verdict
//! [`channel_gate::read_back`]: the channel's mention rule, its `users`,
//! no system message), with the channel's guild (`GET /channels/{id}`,
//! once a process: a history names none); the rest is left, and what no
//! session received is counted as live intake counts it (a stranger's
//! mention: nothing posted). Without MESSAGE_CONTENT Discord withholds the
//! text of what does not mention the bot, in a history as on the
//! gateway: the verdict reads mentions and replies, never the text, so it
//! is the same either way. A channel that refuses the read for good (403,
//! 404) is not tried again: the owner is told once per channel and run
//! ([`channel_refused::on_history_refusal`]), and the other channels are
//! read on. Without Read Message History Discord refuses nothing: the read
//! answers no messages. So a channel whose read after its mark comes back
//! empty is asked its newest message (`last_message_id`, in the answer
//! that gave its guild, or asked again once per read-back); one past the
//! mark means the history is withheld ([`withheld`]): logged, journalled,
//! the owner told under the same once
//! ([`channel_refused::on_history_withheld`]), not tried again. These are
//! read with shard 0's fresh session, which a restart
//! always brings; a fresh session of another shard alone is not read back.
//!
//! Order and exactly once: at READY, before the dispatch loop takes the
//! session's next event, each channel to read gets a gate at the head of
//! its queue ([`crate::bridge::jobs::backlog::Gate`]); a channel found later (an answered
//! user's DM channel, opened during the read-back) gets its gate before the
//! first of its messages the session dispatches is queued. The worker
//! handles the findings at the gate, then what the session dispatched
//! after; a message both read back and dispatched is handled once (the
//! processed mark, checked by the worker just before it handles one).
//!
//! Bounded ([`ReadbackBounds`](crate::bridge::jobs::backlog::ReadbackBounds),
//! docs/budget.md): channels read, pages per channel, messages answered
//! per channel for each gap (the newest of each: what a user sent while
//! the bridge was offline; what one of its sessions received and did not
//! answer counts only in all: `runtime.json`'s `live` spans tell them
//! apart) and in all, and an age. What falls outside
//! gets one notice per channel saying how many went unanswered (never
//! silence); strangers follow the pairing rules and get no notice. A late
//! answer starts "(sent while I was offline, 09:12 UTC)".
//!
//! It runs as its own task (one request at a time, through the REST client
//! and its rate-limit buckets, yielding between pages), so the dispatch
//! loop and the heartbeat never wait for it. Until it has finished, and its
//! findings are handled, `runtime.json` says `readback_due` (written before
//! the session is): a crash or stop meanwhile reads back again at the next
//! start, before any event (so ahead of what a resume replays). A newer
//! fresh session cancels an older read-back (its gates open empty) and
//! starts over from the marks. Messages sent once the session was up are
//! not read back: the session delivers them.

use crate::bridge::access::restart::PROCESSED_CHANNELS;
use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::channel_refused;
use crate::bridge::jobs::backlog::{
    self, bucket, snowflake_at, snowflake_unix_ms, Bucket, Findings, Held, Kept, Skipped, Tally,
    Unread, PAGE,
};
use crate::bridge::jobs::queue::{Job, Work};
use crate::bridge::report::counters::Counter;
use crate::bridge::work::channel_gate::{self, ReadBack};
use crate::bridge::work::worker;
use crate::status::now_unix_ms;
use smol::channel::Sender;
use smolcord::protocol::{ChannelType, Message, Snowflake};
use smolcord::rest::RestError;
use smolcord::rt::Timer;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The dispatch loop's part: the read-back in progress and what earlier
/// ones learnt.
#[derive(Default)]
pub(crate) struct Readback {
    run: Option<Rc<Run>>,
    generation: Rc<Cell<u64>>,
    known: Rc<Known>,
}

/// What read-backs learn and keep for the process's life.
#[derive(Default)]
struct Known {
    /// Marked channels that are no DM (not read back); at most
    /// [`PROCESSED_CHANNELS`], forgotten all at once past it.
    not_dm: RefCell<HashSet<Snowflake>>,
    /// The guild of each server channel (and thread) read back: a history
    /// names none (`guild_id` is the gateway's). At most
    /// [`PROCESSED_CHANNELS`], forgotten all at once past it.
    guilds: RefCell<HashMap<Snowflake, Snowflake>>,
    /// Messages read back and not handled yet, by any read-back.
    held: Rc<Held>,
}

/// One read-back.
struct Run {
    cancelled: Cell<bool>,
    /// The task has ended: no more gates.
    finished: Cell<bool>,
    /// Channels gated and not read yet, in the order to read them.
    todo: RefCell<VecDeque<Pending>>,
    /// Channels whose read failed, waiting for their next try (still
    /// gated: a newer read-back takes them over, gates and all).
    waiting: RefCell<Vec<Pending>>,
    /// Answered users whose DM channel is not known yet.
    unresolved: RefCell<Vec<Snowflake>>,
    /// Channels gated in this run.
    gated: RefCell<HashSet<Snowflake>>,
    /// Of them, channels of no answered user (at most `channels`).
    others: Cell<usize>,
}

struct Pending {
    channel: Snowflake,
    open: Sender<Findings>,
    kind: Kind,
}

/// What a channel to read back is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// An answered user's DM channel.
    Dm,
    /// A channel with a processed mark: read if it is a DM (asked: `GET
    /// /channels/{id}`).
    Marked,
    /// A configured server channel, or (`thread`) one of the bot's threads
    /// in one: what live intake would have taken there (`channel_gate`).
    Server { thread: bool },
}

impl Run {
    /// Gates `channel` (once per run): its queue holds everything after
    /// this until the read-back opens the gate. An answered user's channel
    /// is always gated; others (strangers', whom the bridge answers at
    /// most with a pairing code and never tells about a gap) within the
    /// bound of channels, the newest marks first (the rest are logged).
    fn gate(&self, ctx: &Rc<Ctx>, channel: Snowflake, kind: Kind) -> bool {
        let mut gated = self.gated.borrow_mut();
        if gated.contains(&channel) {
            return true;
        }
        let other = kind == Kind::Marked;
        if other && self.others.get() >= ctx.tunables.readback.channels {
            return false;
        }
        if other {
            self.others.set(self.others.get() + 1);
        }
        gated.insert(channel);
        let (open, gate) = backlog::gate();
        let guard = ctx
            .floor
            .begin_job(format!("read-back of channel {channel}"));
        let job = Job {
            channel,
            work: Work::Gate(gate),
            guard,
        };
        if ctx.queues.push(job) {
            worker::start_worker(ctx, channel);
        }
        self.todo.borrow_mut().push_back(Pending {
            channel,
            open,
            kind,
        });
        true
    }

    /// Stopping, or cancelled by a newer read-back with nothing left in
    /// hand. The newer one takes over the channels not read yet and those
    /// waiting for a retry, gates and all; a read under way when it began
    /// that then fails stays this one's, tried again until read or aged
    /// out: its gate is ahead of what the session queued since, and opened
    /// empty it would let that pass what the gap left (whose findings, in
    /// the newer read-back's gate behind, would then count as handled).
    fn stopped(&self, ctx: &Ctx) -> bool {
        ctx.lifecycle.stopping() || (self.cancelled.get() && self.waiting.borrow().is_empty())
    }
}

impl Readback {
    /// A fresh session is starting: a read-back is due, on disk before the
    /// session is (call before `session.json` is written).
    pub async fn mark_due(&self, ctx: &Ctx) {
        if !ctx.runtime.mark_readback_due().await {
            log::warn!("runtime.json could not be written at session start; a crash during the read-back would not repeat it");
        }
    }

    /// A fresh session began at `began_unix_ms` (READY on shard 0): the
    /// start of its span in `runtime.json`, written with `readback_due`
    /// (call before [`Readback::mark_due`]).
    pub fn session_began(&self, ctx: &Ctx, began_unix_ms: u64) {
        ctx.runtime.session_began(began_unix_ms);
    }

    /// The newest session is live (a message it dispatched, its RESUMED):
    /// its span grows, on disk with the next write of `runtime.json`, or
    /// at once (debounced) when `write`.
    pub fn session_seen(&self, ctx: &Ctx, write: bool) {
        ctx.runtime.session_seen(now_unix_ms(), write);
    }

    /// Starts a read-back for the session that began at `began_unix_ms`
    /// (its READY arrived): gates every channel known now, before the
    /// dispatch loop takes another event, then reads them in a task. An
    /// older read-back still going is cancelled (its gates open empty).
    pub fn begin(&mut self, ctx: &Rc<Ctx>, began_unix_ms: u64) {
        // Channels the older read-back gated and has not read yet keep
        // their gates, now the newer one's: opened empty, they would let
        // the session's newer messages there past what the gap left (and
        // the newer read-back's findings, behind them, would then be
        // taken for handled). Those waiting for a retry too.
        let mut carried = Vec::new();
        if let Some(old) = self.run.take() {
            old.cancelled.set(true);
            carried.extend(old.todo.borrow_mut().drain(..));
            carried.extend(old.waiting.borrow_mut().drain(..));
        }

        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        let run = Rc::new(Run {
            cancelled: Cell::new(false),
            finished: Cell::new(false),
            todo: RefCell::default(),
            waiting: RefCell::default(),
            unresolved: RefCell::default(),
            gated: RefCell::default(),
            others: Cell::new(0),
        });
        for pending in carried {
            run.gated.borrow_mut().insert(pending.channel);
            run.todo.borrow_mut().push_back(pending);
        }
        // The owner first, then the allowed users (always), then the
        // channels with the newest marks (within the bound).
        let mut users = ctx.access.answered_users();
        let mut seen = HashSet::new();
        users.retain(|user| seen.insert(*user));
        ctx.runtime.keep_dms_of(&users);
        let mut answered_dms = HashSet::new();
        for user in users {
            let known = ctx.runtime.dm_channel(user);
            match known {
                Some(channel) => {
                    answered_dms.insert(channel);
                    run.gate(ctx, channel, Kind::Dm);
                }
                None => run.unresolved.borrow_mut().push(user),
            }
        }
        // The configured server channels (all), then the bot's threads
        // in them (within the bound).
        let servers = server_channels(ctx);
        for &(channel, thread) in &servers {
            run.gate(ctx, channel, Kind::Server { thread });
        }
        // Neither is a DM: no need to ask.
        let not_dms: HashSet<Snowflake> = ctx
            .config
            .channels
            .iter()
            .map(|entry| entry.id)
            .chain(ctx.runtime.threads().into_iter().map(|(thread, _)| thread))
            .collect();
        let mut marked: Vec<(Snowflake, Snowflake)> = ctx
            .runtime
            .processed_marks()
            .into_iter()
            .filter(|(channel, _)| !answered_dms.contains(channel) && !not_dms.contains(channel))
            .map(|(channel, last)| (last, channel))
            .collect();
        marked.sort_unstable_by(|a, b| b.cmp(a));
        let mut left_out = 0;
        for (_, channel) in marked {
            if !self.known.not_dm.borrow().contains(&channel)
                && !run.gate(ctx, channel, Kind::Marked)
            {
                left_out += 1;
            }
        }
        if left_out > 0 {
            // Strangers' channels (the answered users' are all read): a
            // stranger gets no notice of a gap, by the pairing rules.
            log::info!(
                "read-back: {left_out} other marked channel(s) not read (bound of {} channels besides the answered users')",
                ctx.tunables.readback.channels
            );
        }
        // Only the newest read-back may take `readback_due` off.
        let (weak, newest) = (Rc::downgrade(ctx), self.generation.clone());
        let on_complete = move || {
            let Some(ctx) = weak.upgrade() else { return };
            if newest.get() != generation {
                return;
            }
            ctx.runtime.readback_done();
        };
        let tally = Rc::new(Tally {
            on_complete: Some(Box::new(on_complete)),
            channels: Cell::new(0),
            found: Cell::new(0),
            handled: Cell::new(0),
            skipped: Cell::new(0),
            unfinished: Cell::new(0),
            read_all: Cell::new(false),
        });
        self.run = Some(run.clone());
        let (task_ctx, known, began_ms) = (ctx.clone(), self.known.clone(), began_unix_ms);
        ctx.spawn("bridge-readback", async move {
            read_back(&task_ctx, &run, tally, &known, began_ms).await;
        });
    }

    /// A message the session dispatched, before it is queued: a DM from an
    /// answered user whose channel the read-back has not found yet gates
    /// that channel first, so the message waits for what the gap left there.
    pub fn before_message(&self, ctx: &Rc<Ctx>, message: &Message) {
        let Some(run) = self.run.as_ref().filter(|run| !run.finished.get()) else {
            return;
        };
        if !message.is_direct() {
            return;
        }
        let author = message.author.id;
        let pos = run.unresolved.borrow().iter().position(|u| *u == author);
        if let Some(pos) = pos {
            run.unresolved.borrow_mut().remove(pos);
            ctx.runtime.remember_dm(author, message.channel_id);
            run.gate(ctx, message.channel_id, Kind::Dm);
        }
    }
}

/// The configured server channels, then, in thread mode, the bot's
/// threads in them with the newest activity (the later of the thread's
/// start and its processed mark), at most `threads` (the rest logged):
/// `(channel, is a thread)`.
fn server_channels(ctx: &Ctx) -> Vec<(Snowflake, bool)> {
    let mut servers: Vec<(Snowflake, bool)> = ctx
        .config
        .channels
        .iter()
        .map(|entry| (entry.id, false))
        .collect();
    let mut threads: Vec<(Snowflake, Snowflake)> = ctx
        .runtime
        .threads()
        .into_iter()
        .map(|(thread, _)| thread)
        .filter(|thread| {
            ctx.channel_entry(*thread)
                .is_some_and(|(_, in_thread)| in_thread)
        })
        .map(|thread| {
            let mark = ctx.runtime.processed_mark(thread);
            (mark.map_or(thread, |mark| mark.max(thread)), thread)
        })
        .collect();
    threads.sort_unstable_by(|a, b| b.cmp(a));
    let bound = ctx.tunables.readback.threads;
    if threads.len() > bound {
        log::info!(
            "read-back: {} thread(s) of the bot with older activity not read (bound of {bound} threads)",
            threads.len() - bound
        );
        threads.truncate(bound);
    }
    servers.extend(threads.into_iter().map(|(_, thread)| (thread, true)));
    servers
}

/// Whether and how a channel is read.
enum Target {
    /// Not read (a marked channel that is no DM).
    Skip,
    /// Read; a server channel's messages get `guild` (a history names
    /// none).
    Read {
        guild: Option<Snowflake>,
        newest: Newest,
    },
}

/// A server channel's newest message, as far as this read-back asked.
#[derive(Clone, Copy, Debug)]
enum Newest {
    /// Not asked (its guild was known): asked if its read comes back
    /// empty.
    NotAsked,
    /// `GET /channels/{id}`'s `last_message_id` (none before the first
    /// message).
    Told(Option<Snowflake>),
}

/// What `pending` is, asked of Discord (`GET /channels/{id}`) where it is
/// not known: whether a marked channel is a DM, a server channel's guild
/// (then remembered).
async fn target(ctx: &Ctx, known: &Known, pending: &Pending) -> Result<Target, RestError> {
    let channel = pending.channel;
    match pending.kind {
        Kind::Dm => Ok(Target::Read {
            guild: None,
            newest: Newest::NotAsked,
        }),
        Kind::Marked => {
            if ctx.rest.get_channel(channel).await?.kind == ChannelType::DM {
                return Ok(Target::Read {
                    guild: None,
                    newest: Newest::NotAsked,
                });
            }
            let mut not_dm = known.not_dm.borrow_mut();
            if not_dm.len() >= PROCESSED_CHANNELS {
                not_dm.clear();
            }
            not_dm.insert(channel);
            Ok(Target::Skip)
        }
        Kind::Server { .. } => {
            if let Some(guild) = known.guilds.borrow().get(&channel) {
                return Ok(Target::Read {
                    guild: Some(*guild),
                    newest: Newest::NotAsked,
                });
            }
            let asked = ctx.rest.get_channel(channel).await?;
            let Some(guild) = asked.guild_id else {
                log::warn!(
                    "read-back: channel {channel} in `channels` is no server channel; not read"
                );
                return Ok(Target::Skip);
            };
            let mut guilds = known.guilds.borrow_mut();
            if guilds.len() >= PROCESSED_CHANNELS {
                guilds.clear();
            }
            guilds.insert(channel, guild);
            Ok(Target::Read {
                guild: Some(guild),
                newest: Newest::Told(asked.last_message_id),
            })
        }
    }
}

/// A server channel (`thread`: one of the bot's threads) refused its
/// history read for good (403 Missing Access or Permissions, 404 Unknown
/// Channel). A channel: the owner is told, once per channel and run, in
/// the background (the read goes on with the next channel). A thread: it
/// was deleted, or the bot lost it with its channel (whose own read says
/// so): logged.
fn history_refused(ctx: &Rc<Ctx>, channel: Snowflake, thread: bool, e: RestError) {
    if thread {
        log::info!(
            "read-back: thread {channel} could not be read ({e}): gone, or no longer the bot's to see; not read"
        );
        return;
    }
    ctx.spawn_job(
        "bridge-history-refused",
        format!("telling the owner channel {channel} refused its read-back"),
        |ctx| async move { channel_refused::on_history_refusal(&ctx, channel, &e).await },
    );
}

/// Whether a server channel withholds its history: its first read after
/// `after` answered no messages at all (`empty_after`: that `after`), yet
/// its newest message `last` is past it. Discord answers so without Read
/// Message History; with it, any message past `after` (the bot's own
/// included) is in the answer. A channel with nothing new, or never a
/// message, is quiet, not withheld. (A newest message since deleted would
/// look withheld: Discord's `last_message_id` may name one.)
fn withheld(empty_after: Option<Snowflake>, last: Option<Snowflake>) -> bool {
    matches!((empty_after, last), (Some(after), Some(last)) if last > after)
}

/// Server channel `channel`'s read after `after` came back empty: if its
/// newest message (`newest`, asked now if it was not) is past `after`,
/// Discord withholds the history: said once, in the background (the read
/// goes on with the next channel), never retried here.
async fn check_withheld(ctx: &Rc<Ctx>, channel: Snowflake, after: Snowflake, newest: Newest) {
    let last = match newest {
        Newest::Told(last) => last,
        Newest::NotAsked => match ctx.rest.get_channel(channel).await {
            Ok(asked) => asked.last_message_id,
            Err(e) => {
                log::info!(
                    "read-back: channel {channel} read back nothing, and its newest message could not be asked ({e}): whether its history is withheld is not known"
                );
                return;
            }
        },
    };
    let Some(last) = last.filter(|_| withheld(Some(after), last)) else {
        return;
    };
    ctx.spawn_job(
        "bridge-history-withheld",
        format!("telling the owner channel {channel} withholds its history"),
        |ctx| async move { channel_refused::on_history_withheld(&ctx, channel, last).await },
    );
}

/// A channel or user that failed, and when to try it again.
#[derive(Clone, Copy)]
struct Backoff {
    at: Instant,
    delay: Duration,
}

impl Backoff {
    /// After another failure at `now` (the first waits `first`).
    fn failed(previous: Option<Backoff>, now: Instant, first: Duration, max: Duration) -> Backoff {
        let delay = previous.map_or(first, |b| (b.delay * 2).min(max));
        Backoff {
            at: now + delay,
            delay,
        }
    }
}

/// Whether a failed read leaves the channel with nothing to read ever: no
/// access, an unknown channel. Anything else (5xx, 429s past the budget, a
/// timeout, a body that does not decode) may pass, and the gap it hides is
/// kept held until it does or ages out.
fn unreadable_for_good(e: &RestError) -> bool {
    matches!(
        e,
        RestError::Http {
            status: 403 | 404,
            ..
        }
    )
}

/// The task: finds the answered users' DM channels, then reads every gated
/// channel in turn and opens its gate with what it found. A channel (or a
/// user's DM channel) that fails is tried again with a backoff
/// ([`ReadbackBounds::retry_first`](crate::bridge::jobs::backlog::ReadbackBounds))
/// while the others go on; its gate stays closed until it is read, or the
/// gap has aged out (`max_age` after the session began: the user gets the
/// unread notice). A gate never opens empty on a failure.
async fn read_back(ctx: &Rc<Ctx>, run: &Rc<Run>, tally: Rc<Tally>, known: &Known, began_ms: u64) {
    let bounds = ctx.tunables.readback;
    // After this, every message of the gap is past the age bound.
    let aged_out_at = Instant::now() + bounds.max_age;
    let now_ms = now_unix_ms().max(began_ms);
    let mut read_all = true;
    let mut backoff: HashMap<Snowflake, Backoff> = HashMap::new();
    let report = |e: &RestError| {
        log::warn!("read-back: {e}");
        ctx.reporter
            .rest_failure(crate::recorder::FailureKind::Rest, e);
    };
    loop {
        if run.stopped(ctx) {
            read_all = false;
            break;
        }
        let now = Instant::now();
        let due = |id: &Snowflake| backoff.get(id).is_none_or(|b| b.at <= now);
        // Cancelled, a read-back goes on only with the channel it had in
        // hand (see `stopped`); the newer one finds the users.
        let user = match run.cancelled.get() {
            true => None,
            false => run.unresolved.borrow().iter().copied().find(|u| due(u)),
        };
        if let Some(user) = user {
            let channel = ctx.rest.create_dm(user).await.map(|c| c.id);
            // Taken off only now: until here a DM the session dispatched
            // from this user gated its channel itself (`before_message`).
            let take = |run: &Run| {
                let mut unresolved = run.unresolved.borrow_mut();
                let pos = unresolved.iter().position(|u| *u == user);
                pos.map(|pos| unresolved.remove(pos)).is_some()
            };
            match channel {
                Ok(channel) => {
                    if take(run) {
                        ctx.runtime.remember_dm(user, channel);
                        run.gate(ctx, channel, Kind::Dm);
                    }
                }
                Err(e) if e.is_permanent() || Instant::now() >= aged_out_at => {
                    log::warn!("read-back: opening the DM channel of user {user}: {e}; not read");
                    take(run);
                    read_all &= e.is_permanent();
                }
                Err(e) => {
                    log::warn!(
                        "read-back: opening the DM channel of user {user}: {e}; tried again later"
                    );
                    let next = Backoff::failed(
                        backoff.get(&user).copied(),
                        Instant::now(),
                        bounds.retry_first,
                        bounds.retry_max,
                    );
                    backoff.insert(user, next);
                }
            }
            continue;
        }
        let next = run.todo.borrow_mut().pop_front().or_else(|| {
            let mut waiting = run.waiting.borrow_mut();
            let at = waiting.iter().position(|p| due(&p.channel))?;
            Some(waiting.swap_remove(at))
        });
        let Some(pending) = next else {
            // Nothing due: done, or wait for the next try (in slices, so a
            // stop is noticed).
            let unresolved = match run.cancelled.get() {
                true => Vec::new(),
                false => run.unresolved.borrow().clone(),
            };
            let next_try = unresolved
                .iter()
                .chain(run.waiting.borrow().iter().map(|p| &p.channel))
                .filter_map(|id| backoff.get(id).map(|b| b.at))
                .min();
            match next_try {
                None => break,
                Some(at) => {
                    Timer::at(at.min(now + STOP_CHECK)).await;
                    continue;
                }
            }
        };
        let channel = pending.channel;
        let mut newest = Newest::NotAsked;
        let result = match target(ctx, known, &pending).await {
            Ok(Target::Skip) => continue,
            Ok(Target::Read {
                guild,
                newest: told,
            }) => {
                newest = told;
                room(ctx, run, &known.held).await;
                let mut budget = bounds.total.saturating_sub(known.held.count());
                read_channel(ctx, channel, guild, now_ms, began_ms, &mut budget).await
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(ChannelRead {
                skipped,
                messages,
                empty_after,
            }) => {
                if let (Kind::Server { thread: false }, Some(after)) = (pending.kind, empty_after) {
                    check_withheld(ctx, channel, after, newest).await;
                }
                let count = messages.len();
                Tally::add(&tally.channels, 1);
                Tally::add(&tally.found, messages.len());
                if let Some(skipped) = &skipped {
                    Tally::add(&tally.skipped, skipped.count);
                }
                if skipped.is_some() || !messages.is_empty() {
                    let findings = Findings {
                        skipped,
                        unread: None,
                        messages,
                        session_began_unix_ms: discord_ms(ctx, began_ms),
                        tally: tally.clone(),
                        hold: Some(known.held.take(count)),
                    };
                    read_all &= open_gate(&tally, &pending, findings);
                }
            }
            Err(e) if unreadable_for_good(&e) => {
                // Nothing there can be read, nor answered: the gate opens
                // empty, and the read-back is not kept due for it (nor is
                // the channel tried again in this one).
                match pending.kind {
                    Kind::Dm | Kind::Marked => report(&e),
                    Kind::Server { thread } => {
                        ctx.reporter
                            .rest_failure(crate::recorder::FailureKind::Rest, &e);
                        history_refused(ctx, channel, thread, e);
                    }
                }
            }
            Err(e) if Instant::now() >= aged_out_at => {
                report(&e);
                log::warn!(
                    "read-back: channel {channel} could not be read before its gap aged out; its user is told"
                );
                let mark = ctx.runtime.processed_mark(channel);
                let since_unix_ms = mark.map_or(
                    discord_ms(ctx, began_ms).saturating_sub(bounds.max_age.as_millis() as u64),
                    snowflake_unix_ms,
                );
                let user = ctx.runtime.dm_user(channel);
                let findings = Findings {
                    skipped: None,
                    unread: Some(Unread {
                        since_unix_ms,
                        user,
                        server: matches!(pending.kind, Kind::Server { .. }),
                    }),
                    messages: Vec::new(),
                    session_began_unix_ms: discord_ms(ctx, began_ms),
                    tally: tally.clone(),
                    hold: None,
                };
                read_all &= open_gate(&tally, &pending, findings);
            }
            Err(e) => {
                report(&e);
                let next = Backoff::failed(
                    backoff.get(&channel).copied(),
                    Instant::now(),
                    bounds.retry_first,
                    bounds.retry_max,
                );
                log::info!(
                    "read-back: channel {channel} stays held; read again in {:.0} s",
                    next.delay.as_secs_f64()
                );
                backoff.insert(channel, next);
                run.waiting.borrow_mut().push(pending);
            }
        }
        futures_lite::future::yield_now().await;
    }
    run.finished.set(true);
    run.todo.borrow_mut().clear();
    tally.read_all.set(read_all);
}

/// Waits until the read-backs hold few enough messages that a channel's
/// share (`per_channel`) fits under the total, or nothing is held, or
/// `room_wait` has passed (then what does not fit gets the notice): the
/// total bounds what is held at once, and the workers free room as they
/// answer.
async fn room(ctx: &Ctx, run: &Run, held: &Held) {
    let bounds = ctx.tunables.readback;
    let fits = || held.count() == 0 || held.count() + bounds.per_channel <= bounds.total;
    let deadline = Instant::now() + bounds.room_wait;
    while !fits() && !run.stopped(ctx) && Instant::now() < deadline {
        let freed = held.freed();
        if fits() {
            break;
        }
        let slice = deadline.min(Instant::now() + STOP_CHECK);
        futures_lite::future::or(freed, async {
            Timer::at(slice).await;
        })
        .await;
    }
}

/// How long the read-back sleeps at most while waiting for a retry, so a
/// stop is noticed (only while a channel is failing).
const STOP_CHECK: Duration = Duration::from_secs(1);

/// Sends `findings` through `pending`'s gate; false if the gate is gone
/// (shutting down: not handled).
fn open_gate(tally: &Tally, pending: &Pending, findings: Findings) -> bool {
    Tally::add(&tally.unfinished, 1);
    if pending.open.try_send(findings).is_err() {
        tally
            .unfinished
            .set(tally.unfinished.get().saturating_sub(1));
        return false;
    }
    true
}

/// What one channel's read found.
struct ChannelRead {
    /// The ones not answered.
    skipped: Option<Skipped>,
    /// The messages to answer, oldest first.
    messages: Vec<Message>,
    /// The first page, read after this id, answered no message at all
    /// (see [`withheld`]).
    empty_after: Option<Snowflake>,
}

/// What one channel's history holds past its mark: the messages to answer
/// (oldest first, the newest `per_channel` within the age and what is left
/// of `budget`) and the ones that are not answered.
async fn read_channel(
    ctx: &Ctx,
    channel: Snowflake,
    guild: Option<Snowflake>,
    now_ms: u64,
    began_ms: u64,
    budget: &mut usize,
) -> Result<ChannelRead, RestError> {
    let bounds = ctx.tunables.readback;
    // On Discord's clock (message times are), as far as its answers have
    // told; again after each page, which tells it anew.
    let max_age_ms = bounds.max_age.as_millis() as u64;
    let mut oldest_ms = discord_ms(ctx, now_ms).saturating_sub(max_age_ms);
    let mark = ctx.runtime.processed_mark(channel);
    // Without a mark, nothing older than the age bound is looked at: it
    // cannot be told from what another bridge (or a lost state dir)
    // answered.
    let mut cursor = mark.unwrap_or_else(|| snowflake_at(oldest_ms));
    // The newest of them to answer: per gap `per_channel`, what the
    // sessions received all, within what is left of the total.
    let mut kept: Kept<Message> = Kept::new(bounds.per_channel, *budget);
    // The ones not answered (too old, past `per_channel`): ids only.
    let mut passed: Vec<(Snowflake, Snowflake)> = Vec::new();
    // The history as the ledger: the newest message the bot's own
    // messages here reply to. The bridge handles a channel's messages in
    // order, so everything up to it was dealt with — by this state dir or
    // by one that was lost (docs/exactly-once.md).
    let mut ledger: Option<Snowflake> = None;
    // Past the page bound, the first message of the newest page: between
    // the pages read and it, messages went unread.
    let mut unread_until: Option<Snowflake> = None;
    let mut unread_from = cursor;
    let mut pages = 0;
    // Halved while a page is over the REST client's answer cap (long
    // messages, embeds): the same messages, read in smaller pages.
    let mut limit = PAGE;
    let mut empty_after = None;
    let bot = ctx.runtime.bot_user();
    loop {
        // The page bound counts messages asked for, so smaller pages
        // cover as much.
        let after = (pages < bounds.pages_per_channel * usize::from(PAGE)).then_some(cursor);
        let read = ctx.rest.channel_messages(channel, after, limit).await;
        let mut page = match read {
            Err(RestError::TooLarge { .. }) if limit > 1 => {
                limit /= 2;
                log::info!(
                    "read-back: a page of channel {channel} is over the answer cap; reading {limit} messages a page"
                );
                continue;
            }
            read => read?,
        };
        if pages == 0 && page.is_empty() {
            empty_after = after;
        }
        // Past the page bound: the newest page, the rest unread.
        let jumped = after.is_none();
        pages += usize::from(limit);
        let began_exact = discord_ms(ctx, began_ms);
        let began = began_exact + date_slack_ms(ctx);
        let spans = live_spans(ctx);
        oldest_ms = discord_ms(ctx, now_ms).saturating_sub(max_age_ms);
        let full = page.len() >= usize::from(limit);
        page.sort_unstable_by_key(|m| m.id);
        if jumped && full {
            unread_from = cursor;
            unread_until = page.first().map(|m| m.id).filter(|first| *first > cursor);
        }
        let mut reached_the_session = false;
        let read_from = cursor;
        for mut message in page.into_iter().filter(|m| m.id > read_from) {
            // Sent once the session was up: the session delivers it.
            if snowflake_unix_ms(message.id) >= began {
                reached_the_session = true;
                break;
            }
            cursor = message.id;
            if bot == Some(message.author.id) || message.author.bot == Some(true) {
                let answered = message.message_reference.as_ref().and_then(|r| {
                    r.message_id
                        .filter(|_| r.channel_id.is_none_or(|c| c == channel))
                });
                if bot == Some(message.author.id) {
                    if let Some(answered) = answered {
                        ledger = ledger.max(Some(answered));
                        kept.retain(|m| m.id > answered);
                    }
                }
                continue;
            }
            if ctx.runtime.is_processed(channel, message.id) {
                continue;
            }
            if let Some(guild) = guild {
                // A history names no guild (`guild_id` is the gateway's):
                // the channel's, so the task and the reply know it.
                message.guild_id.get_or_insert(guild);
                let role = ctx.access.role(message.author.id);
                let entry = ctx.channel_entry(channel);
                let verdict = channel_gate::read_back(&message, bot, entry, role);
                if verdict != ReadBack::Take {
                    // Counted as live intake counts what it leaves: once,
                    // so only what no session received (a gap's).
                    let sent = snowflake_unix_ms(message.id);
                    if sent < began_exact && matches!(bucket(sent, &spans), Bucket::Gap(_)) {
                        match verdict {
                            ReadBack::Stranger => {
                                worker::stranger_in_channel(ctx, message.author.id)
                            }
                            _ => ctx.counters.bump(Counter::GuildMessagesSkipped),
                        }
                    }
                    log::trace!("read-back: message {} left: {verdict:?}", message.id);
                    continue;
                }
            }
            if snowflake_unix_ms(message.id) >= began_exact {
                // In the slack past the session's start: maybe the
                // session's, which delivers it. Answered here only while
                // there is room (once, by the marks), never counted as
                // unanswered, and never taking an older one's place.
                if kept.len() < bounds.per_channel.min(*budget) {
                    kept.push(message, Bucket::Live);
                }
                continue;
            }
            let sent = snowflake_unix_ms(message.id);
            if sent < oldest_ms {
                passed.push((message.id, message.author.id));
                continue;
            }
            if let Some(out) = kept.push(message, bucket(sent, &spans)) {
                passed.push((out.id, out.author.id));
            }
        }
        if jumped || !full || reached_the_session {
            break;
        }
        futures_lite::future::yield_now().await;
    }
    let answered = |id: Snowflake| ledger.is_some_and(|l| id <= l);
    if ledger.is_some() && mark.is_none_or(|m| ledger > Some(m)) {
        log::info!(
            "read-back: channel {channel}: the bot's replies there show everything up to message {} answered",
            ledger.map_or(0, Snowflake::get)
        );
    }
    kept.retain(|m| !answered(m.id));
    let kept = kept.into_vec();
    let mut skipped: Option<Skipped> = None;
    for (id, author) in passed.into_iter().filter(|(id, _)| !answered(*id)) {
        skip(&mut skipped, id, author);
    }
    if let Some(until) = unread_until.filter(|until| !answered(*until)) {
        // Messages between the pages read and the newest one went unread:
        // counted as "more than".
        let front = kept.first().map(|m| (m.id, m.author.id));
        match (skipped.as_mut(), front) {
            (Some(entry), _) => entry.more = true,
            (None, Some((_, author))) => {
                skipped = Some(Skipped {
                    count: 0,
                    more: true,
                    first_unix_ms: snowflake_unix_ms(unread_from),
                    last: Snowflake::new(until.get().saturating_sub(1)),
                    author,
                })
            }
            (None, None) => {}
        }
    }
    // Kept within it while reading.
    *budget = budget.saturating_sub(kept.len());
    Ok(ChannelRead {
        skipped,
        messages: kept,
        empty_after,
    })
}

/// When the bridge's sessions were live, on Discord's clock, oldest first
/// (`runtime.json`'s `live`). Between the last sign of a session and the
/// next one's READY the bridge was offline, as far as it knows: a kill,
/// an outage, an op 9. (A session whose RESUMED came in meanwhile is
/// live over the time it was resumable: the resume replayed it.)
fn live_spans(ctx: &Ctx) -> Vec<(u64, u64)> {
    ctx.runtime
        .live_spans()
        .into_iter()
        .map(|(from, to)| (discord_ms(ctx, from), discord_ms(ctx, to)))
        .collect()
}

/// How far past the session's start (on Discord's clock) the history is
/// still read when the host's clock is corrected by `Date`, which has
/// whole seconds: the start is then known within about one. Reading a
/// message the session delivers too costs nothing (the processed marks
/// answer it once); missing one sent in the gap's last second would lose
/// it. A host clock within that second is taken as it is (finer).
const DATE_SLACK_MS: u64 = 1_000;

fn date_slack_ms(ctx: &Ctx) -> u64 {
    if trusted_skew_ms(ctx) != 0 {
        DATE_SLACK_MS
    } else {
        0
    }
}

/// The host clock's skew from Discord's that is worth correcting. `Date`
/// has whole seconds (its middle is the guess: ±0.5 s), so a host clock
/// within a second of it — an NTP-synced one, to the millisecond — is the
/// finer of the two and is taken as it is. Correcting it by the header
/// moved the session's start up to half a second late, and DMs sent in
/// that half second after READY were read back as the gap's: past the
/// per-channel bound they were counted unanswered and their live copies
/// skipped (a test's 60 DMs: 20 answered).
fn trusted_skew_ms(ctx: &Ctx) -> i64 {
    ctx.rest
        .clock_skew_ms()
        .filter(|skew| skew.abs() > DATE_SLACK_MS as i64)
        .unwrap_or(0)
}

/// `host_ms` (the host's clock) on Discord's clock, as far as its REST
/// answers have told (`Date`): message times are Discord's, and a host
/// clock behind it would make the gap's messages look newer than the
/// session, left to a session that never delivers them.
fn discord_ms(ctx: &Ctx, host_ms: u64) -> u64 {
    host_ms.saturating_add_signed(trusted_skew_ms(ctx))
}

/// Counts message `id` (by `author`) among the channel's unanswered ones.
fn skip(skipped: &mut Option<Skipped>, id: Snowflake, author: Snowflake) {
    let at = snowflake_unix_ms(id);
    let entry = skipped.get_or_insert(Skipped {
        count: 0,
        more: false,
        first_unix_ms: at,
        last: id,
        author,
    });
    entry.count += 1;
    entry.first_unix_ms = entry.first_unix_ms.min(at);
    if id >= entry.last {
        entry.last = id;
        entry.author = author;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_is_withheld_only_when_it_reads_empty_before_the_newest_message() {
        let id = Snowflake::new;
        // (first page read empty after, newest message) → withheld
        let table = [
            (Some(id(10)), Some(id(11)), true),
            (Some(id(10)), Some(id(10)), false),
            (Some(id(10)), Some(id(9)), false),
            (Some(id(10)), None, false),
            (None, Some(id(11)), false),
            (None, None, false),
        ];
        for (empty_after, last, expected) in table {
            assert_eq!(
                withheld(empty_after, last),
                expected,
                "{empty_after:?} {last:?}"
            );
        }
    }
}
