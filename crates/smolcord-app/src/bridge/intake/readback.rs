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
//! per channel (the newest) and in all, and an age. What falls outside
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
use crate::bridge::jobs::backlog::{
    self, snowflake_at, snowflake_unix_ms, Findings, Skipped, Tally, PAGE,
};
use crate::bridge::jobs::queue::{Job, Work};
use crate::bridge::work::worker;
use crate::status::now_unix_ms;
use smol::channel::Sender;
use smolcord::protocol::{ChannelType, Message, Snowflake};
use smolcord::rest::RestError;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::Rc;

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
    /// Answered users' DM channels (bounded by the users answered).
    dm_of_user: RefCell<HashMap<Snowflake, Snowflake>>,
    /// Marked channels that are no DM (not read back); at most
    /// [`PROCESSED_CHANNELS`], forgotten all at once past it.
    not_dm: RefCell<HashSet<Snowflake>>,
}

/// One read-back.
struct Run {
    cancelled: Cell<bool>,
    /// The task has ended: no more gates.
    finished: Cell<bool>,
    /// Channels gated and not read yet, in the order to read them.
    todo: RefCell<VecDeque<Pending>>,
    /// Answered users whose DM channel is not known yet.
    unresolved: RefCell<Vec<Snowflake>>,
    /// Channels gated in this run (at most `channels`).
    gated: RefCell<HashSet<Snowflake>>,
}

struct Pending {
    channel: Snowflake,
    open: Sender<Findings>,
    /// Known to be a DM channel (else asked: `GET /channels/{id}`).
    known_dm: bool,
}

impl Run {
    /// Gates `channel` (once per run, within the bound): its queue holds
    /// everything after this until the read-back opens the gate.
    fn gate(&self, ctx: &Rc<Ctx>, channel: Snowflake, known_dm: bool) {
        let mut gated = self.gated.borrow_mut();
        if gated.contains(&channel) {
            return;
        }
        if gated.len() >= ctx.tunables.readback.channels {
            log::debug!(
                "read-back: channel {channel} not read (bound of {} channels)",
                gated.len()
            );
            return;
        }
        gated.insert(channel);
        let (open, gate) = backlog::gate();
        let guard = ctx
            .inflight
            .begin(format!("read-back of channel {channel}"));
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
            known_dm,
        });
    }

    fn stopped(&self, ctx: &Ctx) -> bool {
        self.cancelled.get() || ctx.stopping.get()
    }
}

impl Readback {
    /// A fresh session is starting: a read-back is due, on disk before the
    /// session is (call before `session.json` is written).
    pub async fn mark_due(&self, ctx: &Ctx) {
        {
            let mut runtime = ctx.runtime.borrow_mut();
            runtime.readback_due = true;
            ctx.runtime_writer.set(&*runtime);
        }
        if !ctx.runtime_writer.flush().await {
            log::warn!("runtime.json could not be written at session start; a crash during the read-back would not repeat it");
        }
    }

    /// Starts a read-back for the session that began at `began_unix_ms`
    /// (its READY arrived): gates every channel known now, before the
    /// dispatch loop takes another event, then reads them in a task. An
    /// older read-back still going is cancelled (its gates open empty).
    pub fn begin(&mut self, ctx: &Rc<Ctx>, began_unix_ms: u64) {
        // Channels the older read-back gated and has not read yet keep
        // their gates, now the newer one's: opened empty, they would let
        // the session's newer messages there past what the gap left.
        let mut carried = Vec::new();
        if let Some(old) = self.run.take() {
            old.cancelled.set(true);
            carried.extend(old.todo.borrow_mut().drain(..));
        }
        let generation = self.generation.get() + 1;
        self.generation.set(generation);
        let run = Rc::new(Run {
            cancelled: Cell::new(false),
            finished: Cell::new(false),
            todo: RefCell::default(),
            unresolved: RefCell::default(),
            gated: RefCell::default(),
        });
        for pending in carried {
            run.gated.borrow_mut().insert(pending.channel);
            run.todo.borrow_mut().push_back(pending);
        }
        // The owner first, then the allowed users, then the channels with
        // the newest marks.
        let mut users = ctx.access.borrow().answered_users();
        let mut seen = HashSet::new();
        users.retain(|user| seen.insert(*user));
        for user in users {
            let known = self.known.dm_of_user.borrow().get(&user).copied();
            match known {
                Some(channel) => run.gate(ctx, channel, true),
                None => run.unresolved.borrow_mut().push(user),
            }
        }
        let mut marked: Vec<(Snowflake, Snowflake)> = ctx
            .runtime
            .borrow()
            .processed
            .iter()
            .map(|(channel, last)| (*last, *channel))
            .collect();
        marked.sort_unstable_by(|a, b| b.cmp(a));
        // Room is kept for the users whose channel is not known yet.
        let room = ctx
            .tunables
            .readback
            .channels
            .saturating_sub(run.unresolved.borrow().len());
        for (_, channel) in marked {
            if run.gated.borrow().len() >= room {
                break;
            }
            if !self.known.not_dm.borrow().contains(&channel) {
                run.gate(ctx, channel, false);
            }
        }
        // Only the newest read-back may take `readback_due` off.
        let (weak, newest) = (Rc::downgrade(ctx), self.generation.clone());
        let on_complete = move || {
            let Some(ctx) = weak.upgrade() else { return };
            if newest.get() != generation {
                return;
            }
            let mut runtime = ctx.runtime.borrow_mut();
            if runtime.readback_due {
                runtime.readback_due = false;
                ctx.runtime_writer.set(&*runtime);
            }
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
            self.known
                .dm_of_user
                .borrow_mut()
                .insert(author, message.channel_id);
            run.gate(ctx, message.channel_id, true);
        }
    }
}

/// The task: finds the answered users' DM channels, then reads every gated
/// channel in turn and opens its gate with what it found.
async fn read_back(ctx: &Rc<Ctx>, run: &Rc<Run>, tally: Rc<Tally>, known: &Known, began_ms: u64) {
    let mut read_all = true;
    loop {
        if run.stopped(ctx) {
            read_all = false;
            break;
        }
        let Some(user) = run.unresolved.borrow().first().copied() else {
            break;
        };
        let opened = ctx.rest.create_dm(user).await;
        let permanent = opened.as_ref().err().is_some_and(RestError::is_permanent);
        let channel = opened.map(|c| c.id).map_err(|e| e.to_string());
        // Taken off only now: until here a DM the session dispatched from
        // this user gated its channel itself (`before_message`).
        let still = {
            let mut unresolved = run.unresolved.borrow_mut();
            let pos = unresolved.iter().position(|u| *u == user);
            pos.map(|pos| unresolved.remove(pos)).is_some()
        };
        match channel {
            Ok(channel) if still => {
                known.dm_of_user.borrow_mut().insert(user, channel);
                run.gate(ctx, channel, true);
            }
            Ok(_) => {}
            Err(e) => {
                log::warn!("read-back: opening the DM channel of user {user}: {e}");
                read_all &= permanent;
            }
        }
    }
    // A refusal that another try would get too (no access, an unknown
    // channel) leaves nothing to read: it does not keep the read-back due.
    let retry = |e: &RestError| {
        log::warn!("read-back: {e}");
        ctx.reporter
            .rest_failure(crate::recorder::FailureKind::Rest, e);
        !e.is_permanent()
    };
    let now_ms = now_unix_ms().max(began_ms);
    let mut budget = ctx.tunables.readback.total;
    loop {
        if run.stopped(ctx) {
            read_all = false;
            break;
        }
        let Some(pending) = run.todo.borrow_mut().pop_front() else {
            break;
        };
        let channel = pending.channel;
        if !pending.known_dm {
            match ctx.rest.get_channel(channel).await {
                Ok(found) if found.kind == ChannelType::DM => {}
                Ok(_) => {
                    let mut not_dm = known.not_dm.borrow_mut();
                    if not_dm.len() >= PROCESSED_CHANNELS {
                        not_dm.clear();
                    }
                    not_dm.insert(channel);
                    continue;
                }
                Err(e) => {
                    if retry(&e) {
                        read_all = false;
                    }
                    continue;
                }
            }
        }
        Tally::add(&tally.channels, 1);
        match read_channel(ctx, channel, now_ms, began_ms, &mut budget).await {
            Ok((skipped, messages)) => {
                Tally::add(&tally.found, messages.len());
                if let Some(skipped) = &skipped {
                    Tally::add(&tally.skipped, skipped.count);
                }
                if skipped.is_some() || !messages.is_empty() {
                    Tally::add(&tally.unfinished, 1);
                    let findings = Findings {
                        skipped,
                        messages,
                        session_began_unix_ms: began_ms,
                        tally: tally.clone(),
                    };
                    if pending.open.try_send(findings).is_err() {
                        // The gate is gone (shutting down): not handled.
                        read_all = false;
                    }
                }
            }
            Err(e) => {
                if retry(&e) {
                    read_all = false;
                }
            }
        }
        futures_lite::future::yield_now().await;
    }
    run.finished.set(true);
    run.todo.borrow_mut().clear();
    tally.read_all.set(read_all);
}

/// What one channel's history holds past its mark: the messages to answer
/// (oldest first, the newest `per_channel` within the age and what is left
/// of `budget`) and the ones that are not answered.
async fn read_channel(
    ctx: &Ctx,
    channel: Snowflake,
    now_ms: u64,
    began_ms: u64,
    budget: &mut usize,
) -> Result<(Option<Skipped>, Vec<Message>), RestError> {
    let bounds = ctx.tunables.readback;
    let oldest_ms = now_ms.saturating_sub(bounds.max_age.as_millis() as u64);
    let mark = ctx.runtime.borrow().processed.get(&channel).copied();
    // Without a mark, nothing older than the age bound is looked at: it
    // cannot be told from what another bridge (or a lost state dir)
    // answered.
    let mut cursor = mark.unwrap_or_else(|| snowflake_at(oldest_ms));
    let mut kept: VecDeque<Message> = VecDeque::new();
    let mut skipped: Option<Skipped> = None;
    let mut pages = 0;
    let mut jumped = false;
    loop {
        let mut page = if pages < bounds.pages_per_channel {
            ctx.rest
                .channel_messages(channel, Some(cursor), PAGE)
                .await?
        } else {
            // Past the page bound: the newest page, the rest unread.
            jumped = true;
            ctx.rest.channel_messages(channel, None, PAGE).await?
        };
        pages += 1;
        let unread_from = cursor;
        let full = page.len() >= usize::from(PAGE);
        page.sort_unstable_by_key(|m| m.id);
        let skipped_before = jumped && page.first().is_some_and(|m| m.id > cursor);
        let mut reached_the_session = false;
        for message in page.into_iter().filter(|m| m.id > unread_from) {
            // Sent once the session was up: the session delivers it.
            if snowflake_unix_ms(message.id) >= began_ms {
                reached_the_session = true;
                break;
            }
            cursor = message.id;
            if ctx.bot_user() == Some(message.author.id)
                || message.author.bot == Some(true)
                || ctx.is_processed(channel, message.id)
            {
                continue;
            }
            if snowflake_unix_ms(message.id) < oldest_ms {
                skip(&mut skipped, &message);
                continue;
            }
            kept.push_back(message);
            if kept.len() > bounds.per_channel {
                if let Some(oldest) = kept.pop_front() {
                    skip(&mut skipped, &oldest);
                }
            }
        }
        if jumped {
            if skipped_before && full {
                // Messages between the pages read and the newest one went
                // unread: counted as "more than".
                let front = kept.front().map(|m| (m.id, m.author.id));
                match (skipped.as_mut(), front) {
                    (Some(entry), _) => entry.more = true,
                    (None, Some((id, author))) => {
                        skipped = Some(Skipped {
                            count: 0,
                            more: true,
                            first_unix_ms: snowflake_unix_ms(unread_from),
                            last: Snowflake::new(id.get().saturating_sub(1)),
                            author,
                        })
                    }
                    (None, None) => {}
                }
            }
            break;
        }
        if !full || reached_the_session {
            break;
        }
        futures_lite::future::yield_now().await;
    }
    while kept.len() > *budget {
        if let Some(oldest) = kept.pop_front() {
            skip(&mut skipped, &oldest);
        }
    }
    *budget -= kept.len();
    Ok((skipped, kept.into()))
}

/// Counts `message` among the channel's unanswered ones.
fn skip(skipped: &mut Option<Skipped>, message: &Message) {
    let at = snowflake_unix_ms(message.id);
    let entry = skipped.get_or_insert(Skipped {
        count: 0,
        more: false,
        first_unix_ms: at,
        last: message.id,
        author: message.author.id,
    });
    entry.count += 1;
    entry.first_unix_ms = entry.first_unix_ms.min(at);
    if message.id >= entry.last {
        entry.last = message.id;
        entry.author = message.author.id;
    }
}
