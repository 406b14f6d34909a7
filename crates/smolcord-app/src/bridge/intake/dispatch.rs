//! The dispatch loop: consumes the shard's events in order and never waits
//! on anything slow but room in the job queues: at their bound it stops
//! taking events (so the shard stops reading: backpressure), or drops a
//! message the bridge would not answer anyway (counted, logged at most
//! every [`DROP_LOG_INTERVAL`]; see [`crate::bridge::jobs::queue`]). Messages are
//! classified and queued per channel, behind the replies an earlier run
//! left on record (queued first, [`Loop::recover`]);
//! READY/RESUMED write the session at once (and wait for it), restore
//! access before any decision and send the restart and safe-mode notices;
//! disconnects and heartbeats offer the (coalesced, background) session and
//! status saves, which write only what changed enough to matter; the
//! owner's `!restart` writes its marker and ends the loop. On the way out:
//! the bounded drain and the final save.

use crate::bridge::access::book::Role;
use crate::bridge::access::restart::{self, RestartMarker};
use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::delivery;
use crate::bridge::intake::interactions::{Interactions, RestartAsked};
use crate::bridge::intake::peek::Peek;
use crate::bridge::intake::readback::Readback;
use crate::bridge::intake::results;
use crate::bridge::jobs::queue::{Job, Room, Work, MAX_JOBS};
use crate::bridge::report::counters;
use crate::bridge::report::counters::Counter;
use crate::bridge::report::throttle::{Throttle, Verdict};
use crate::bridge::store::directory::{ChannelDirectory, DirectorySnapshot};
use crate::bridge::store::nonce::{self, Notice};
use crate::bridge::store::persist::{Deferred, SaveReason, SessionAndStatus, SessionFile};
use crate::bridge::work::channel_gate;
use crate::bridge::work::verdict::{classify, Intake};
use crate::bridge::work::worker;
use crate::recorder::FailureKind;
use crate::status::{now_unix_ms, StatusSnapshot};
use smol::channel::{Receiver, Sender};
use smolcord::offload;
use smolcord::protocol::{Message, Ready, Snowflake};
use smolcord::rest::Nonce;
use smolcord::shard::{ShardError, ShardEvent, ShardSetHandle};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A dropped message is logged at most once per this long, with the count
/// since the last line.
pub(crate) const DROP_LOG_INTERVAL: Duration = Duration::from_secs(10);
/// Events handled between two yields to the executor (each is a decode, a
/// classification and at most a queue push, or one guild's part of the
/// channel directory: well under a millisecond).
const SLICE_EVENTS: u32 = 32;
/// Time spent on events before the loop yields, whatever their count (a
/// burst of large GUILD_CREATEs), as the shard's reader does.
const SLICE_TIME: Duration = Duration::from_millis(2);
/// While the loop waits for room, session and status are still offered for
/// saving this often (where the status socket is not live, `smolcord
/// status` reads the status file).
const SAVE_WHILE_WAITING: Duration = Duration::from_secs(10);
/// While the loop waits for room, the session's liveness is noted this
/// often (a debounced write of `runtime.json`; only while it waits).
const STAMP_WHILE_WAITING: Duration = Duration::from_secs(1);

/// Why the `stop` future given to `Bridge::run` ended the
/// run: `()` is [`StopReason::Requested`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A stop signal: with nothing left unfinished, a clean stop (the
    /// restart-failure counter is cleared).
    Requested,
    /// The run failed (the token was refused): not a clean stop; the
    /// start counts as failed.
    Failed,
}

impl From<()> for StopReason {
    fn from((): ()) -> StopReason {
        StopReason::Requested
    }
}

/// How a run ended.
#[derive(Debug)]
pub enum BridgeOutcome {
    /// `stop` resolved.
    Stopped,
    /// The owner sent `!restart`; markers are written: exit so the
    /// supervisor starts us again.
    RestartRequested,
    /// The shard stopped for good (a fatal close code, or its driver ended).
    ShardFatal(ShardError),
}

pub(crate) struct Writers {
    pub session_and_status: SessionAndStatus,
    pub directory: Deferred<DirectorySnapshot>,
}

/// The dispatch loop and its state.
pub(crate) struct Loop {
    pub ctx: Rc<Ctx>,
    pub shard: ShardSetHandle,
    pub writers: Writers,
    /// Shared with its writer, which takes a snapshot once per write.
    pub directory: Rc<RefCell<ChannelDirectory>>,
    pub marker: Option<RestartMarker>,
    pub reload: Receiver<()>,
    pub safe_mode_told: bool,
    /// The read-back of the history (DMs, server channels) after a fresh session.
    pub readback: Readback,
    /// Rate limit of the "dropped" log line.
    pub drop_log: Throttle<()>,
    /// The owner's slash commands.
    pub interactions: Interactions,
    /// Their registration was started in this run.
    pub commands_registering: bool,
}

enum Wake {
    Stop,
    Reload,
    Event(Result<(u32, ShardEvent), ShardError>),
}

impl Loop {
    pub async fn run<S: Into<StopReason>>(
        mut self,
        stop: impl Future<Output = S>,
        poll_stop: Sender<()>,
    ) -> BridgeOutcome {
        // The rest of the loop only needs to know that `stop` ended.
        let cause = std::cell::Cell::new(StopReason::Requested);
        let stop = async { cause.set(stop.await.into()) };
        let mut stop = std::pin::pin!(stop);
        let mut slice = smolcord::rt::Slice::new(SLICE_EVENTS, SLICE_TIME);
        self.recover().await;
        // A read-back a crash or stop cut short is done again now, before
        // any event: its gates go ahead of what a resume replays.
        if self.ctx.runtime.readback_due() {
            log::info!("a read-back was cut short: reading back again");
            self.readback.begin(&self.ctx, now_unix_ms());
        }
        let outcome = loop {
            // Events already waiting are taken without a pause: yield after
            // a slice, so a burst never holds the thread for long.
            slice.yield_if_spent().await;
            let wake = futures_lite::future::or(
                async {
                    (&mut stop).await;
                    Wake::Stop
                },
                futures_lite::future::or(
                    async {
                        match self.reload.recv().await {
                            Ok(()) => Wake::Reload,
                            Err(_) => std::future::pending().await,
                        }
                    },
                    async { Wake::Event(self.shard.next_event().await) },
                ),
            )
            .await;
            slice.count();
            match wake {
                Wake::Stop => break BridgeOutcome::Stopped,
                Wake::Reload => {
                    log::info!("reloading access state (SIGHUP)");
                    let ctx = self.ctx.clone();
                    self.ctx.spawn("bridge-reload", async move {
                        ctx.access.reread().await;
                        results::watch_approvals(&ctx).await;
                    });
                }
                Wake::Event(Err(e)) => {
                    log::error!("the shard stopped: {e}");
                    self.ctx.reporter.fail(
                        FailureKind::Gateway,
                        "shard",
                        match &e {
                            ShardError::Fatal { code, .. } => Some(i64::from(*code)),
                            _ => None,
                        },
                        "gateway session ended for good",
                    );
                    break BridgeOutcome::ShardFatal(e);
                }
                Wake::Event(Ok((_, ShardEvent::Heartbeat(_)))) => {
                    self.save_session_and_status(SaveReason::Beat)
                }
                Wake::Event(Ok((shard, ShardEvent::Disconnected { reason }))) => {
                    log::info!("gateway disconnected ({reason}); shard {shard} reconnects");
                    self.save_session_and_status(SaveReason::Disconnected);
                    self.ctx
                        .reporter
                        .fail(FailureKind::Gateway, "shard", None, reason);
                }
                Wake::Event(Ok((shard, ShardEvent::Dispatch(dispatch)))) => {
                    let seq = dispatch.seq;
                    match dispatch.name.as_str() {
                        "READY" => {
                            let began = now_unix_ms();
                            self.ctx.floor.new_session(shard, seq);
                            match dispatch.data::<Ready>() {
                                Ok(ready) => {
                                    self.remember_bot(ready.user.id);
                                    if shard == 0 {
                                        self.register_commands(ready.application.map(|a| a.id));
                                    }
                                }
                                Err(e) => log::warn!("READY could not be decoded: {e}"),
                            }
                            // DMs come to shard 0 only. Due on disk before
                            // the session is: a crash in between would
                            // resume it and never read back.
                            if shard == 0 {
                                self.readback.session_began(&self.ctx, began);
                                self.readback.mark_due(&self.ctx).await;
                            }
                            self.session_started().await;
                            if shard == 0 {
                                self.readback.begin(&self.ctx, began);
                            }
                        }
                        "RESUMED" => {
                            self.ctx.floor.consumed(shard, seq);
                            if shard == 0 {
                                // What it missed is replayed: live throughout.
                                self.readback.session_seen(&self.ctx, true);
                                self.register_commands(None);
                            }
                            self.session_started().await;
                        }
                        "MESSAGE_CREATE" => {
                            self.ctx.floor.consumed(shard, seq);
                            if self.skip_unwanted(dispatch.raw_data()) {
                                continue;
                            }
                            match dispatch.data::<Message>() {
                                Ok(message) => {
                                    if shard == 0 {
                                        self.readback.session_seen(&self.ctx, false);
                                    }
                                    self.readback.before_message(&self.ctx, &message);
                                    let outcome =
                                        self.on_message(message, shard, seq, stop.as_mut()).await;
                                    if let Some(outcome) = outcome {
                                        break outcome;
                                    }
                                }
                                Err(e) => {
                                    log::warn!("MESSAGE_CREATE #{seq} could not be decoded: {e}");
                                    self.ctx.reporter.fail(
                                        FailureKind::Gateway,
                                        "MESSAGE_CREATE",
                                        None,
                                        "undecodable message payload",
                                    );
                                }
                            }
                        }
                        "INTERACTION_CREATE" => {
                            self.ctx.floor.consumed(shard, seq);
                            match dispatch.data() {
                                Ok(interaction) => {
                                    let statuses = || {
                                        StatusSnapshot::capture_set(
                                            &self.shard.statuses(),
                                            Some(self.ctx.counters.snapshot()),
                                        )
                                    };
                                    let outcome = self
                                        .interactions
                                        .on_interaction(
                                            &self.ctx,
                                            interaction,
                                            shard,
                                            seq,
                                            statuses,
                                        )
                                        .await;
                                    if let Some(RestartAsked) = outcome {
                                        break BridgeOutcome::RestartRequested;
                                    }
                                }
                                Err(e) => {
                                    log::warn!(
                                        "INTERACTION_CREATE #{seq} could not be decoded: {e}"
                                    );
                                    self.ctx.reporter.fail(
                                        FailureKind::Gateway,
                                        "INTERACTION_CREATE",
                                        None,
                                        "undecodable interaction payload",
                                    );
                                }
                            }
                        }
                        name => {
                            self.ctx.floor.consumed(shard, seq);
                            let applied =
                                self.directory.borrow_mut().apply(name, dispatch.raw_data());
                            match applied {
                                Ok(true) => self.writers.directory.mark(),
                                Ok(false) => {}
                                Err(e) => log::warn!("{name} #{seq} could not be decoded: {e}"),
                            }
                        }
                    }
                }
                // A kind of shard event this bridge does not know yet.
                Wake::Event(Ok(_)) => {}
            }
        };
        self.shut_down(poll_stop, &outcome, cause.get()).await;
        outcome
    }

    /// Whether a MESSAGE_CREATE (raw `d`) is a guild message the bridge
    /// does not want (a channel not in `channels`, a required mention
    /// missing), judged from a peek at the few fields that say so, before
    /// the message is decoded in full; counted. A payload the peek cannot
    /// read is left to the full decode, which reports it.
    fn skip_unwanted(&self, raw: &str) -> bool {
        let Ok(peek) = Peek::read(raw) else {
            return false;
        };
        if peek.guild_id.is_none() {
            return false;
        }
        let ctx = &self.ctx;
        let addressing =
            ctx.runtime
                .bot_user()
                .map_or_else(Default::default, |bot| channel_gate::Addressing {
                    mentions: peek.mentions(bot),
                    replies: peek.replies_to(bot),
                });
        match channel_gate::admit(addressing, ctx.channel_entry(peek.channel_id)) {
            Ok(()) => false,
            Err(why) => {
                ctx.counters.bump(Counter::GuildMessagesSkipped);
                log::trace!("a message in channel {} skipped: {why}", peek.channel_id);
                true
            }
        }
    }

    /// Registers the owner's commands, once a run, in the background
    /// (`register_commands`), at the first session start on shard 0 (READY
    /// names the application; after a resume it is asked for).
    fn register_commands(&mut self, application: Option<Snowflake>) {
        if std::mem::replace(&mut self.commands_registering, true) {
            return;
        }
        let ctx = self.ctx.clone();
        self.ctx.spawn(
            "bridge-register-commands",
            super::register_commands::run(ctx, application),
        );
    }

    fn remember_bot(&self, id: Snowflake) {
        self.ctx.runtime.remember_bot(id);
    }

    /// Puts the replies an earlier run recorded but did not finish at the
    /// head of their channels' queues (before any replayed message), and
    /// prunes result records a crash left behind. At most [`MAX_JOBS`]
    /// replies: the outbox holds one per channel being handled, so that is
    /// all of them (any more wait for the next start, logged).
    async fn recover(&self) {
        let ctx = &self.ctx;
        match ctx.outbox.replies(MAX_JOBS).await {
            Ok((replies, more)) => {
                if !replies.is_empty() {
                    log::info!(
                        "{} reply(ies) recorded before the restart and not finished: delivering them",
                        replies.len()
                    );
                }
                if more {
                    log::warn!("more than {MAX_JOBS} unfinished replies on record; the rest wait for the next start");
                }
                for (channel, message) in replies {
                    let guard = ctx.floor.begin_job(format!(
                        "reply to message {message} in channel {channel}, recorded before the restart"
                    ));
                    let work = Work::Recorded { message };
                    if ctx.queues.push(Job {
                        channel,
                        work,
                        guard,
                    }) {
                        worker::start_worker(ctx, channel);
                    }
                }
            }
            Err(e) => {
                log::error!("listing the outbox: {e}");
                ctx.reporter
                    .fail(FailureKind::State, "outbox", None, "listing failed");
            }
        }
        match ctx.outbox.prune_results(&ctx.spool.results, MAX_JOBS).await {
            Ok(0) => {}
            Ok(n) => log::info!("pruned {n} record(s) of results delivered before the restart"),
            Err(e) => log::warn!("pruning result records: {e}"),
        }
    }

    /// Writes `session.json` now and waits for it: the session just
    /// started (READY) or came back (RESUMED), and until it is on disk a
    /// crash would leave the next start nothing to resume, so the messages
    /// Discord sends meanwhile would never be replayed to it.
    async fn save_session_now(&self) {
        self.save_session_and_status(SaveReason::SessionStarted);
        if !self.writers.session_and_status.flush_session().await {
            log::warn!("session.json could not be written at session start; a crash now would lose what the session receives");
        }
    }

    fn save_session_and_status(&self, reason: SaveReason) {
        let statuses = self.shard.statuses();
        let count = statuses.first().map_or(1, |status| status.shard[1]);
        let states = {
            let floor = &self.ctx.floor;
            statuses
                .iter()
                .map(|status| {
                    let id = status.shard[0];
                    (id, floor.state_to_save(id, status.state.clone()))
                })
                .collect()
        };
        let file = SessionFile::new(count, states);
        self.writers.session_and_status.save(reason, file, || {
            StatusSnapshot::capture_set(&statuses, Some(self.ctx.counters.snapshot()))
        });
    }

    /// READY or RESUMED: the session on disk, access restored before any
    /// access decision, then say we are back (restart marker) and announce
    /// safe mode.
    async fn session_started(&mut self) {
        self.save_session_now().await;
        match self.ctx.access.restore().await {
            Ok(()) => {}
            Err(e) => {
                log::error!("reading access state at READY: {e}; keeping the state in memory");
                self.ctx.reporter.fail(
                    FailureKind::State,
                    "access.json",
                    None,
                    "access read failed",
                );
            }
        }
        if let Some(marker) = self.marker.take() {
            self.ctx.spawn_job(
                "bridge-restart-notice",
                "restart notice".into(),
                |ctx| async move {
                    let text = "Back online after the restart.";
                    let nonce = nonce::notice(marker.message_id, Notice::BackOnline);
                    if delivery::notify(&ctx, marker.channel_id, text, &nonce).await {
                        if let Err(e) =
                            offload::remove_file(&restart::restart_path(&ctx.state_dir)).await
                        {
                            log::warn!("removing the restart marker: {e}");
                        }
                    }
                },
            );
        }
        if self.ctx.lifecycle.safe_mode() && !self.safe_mode_told {
            self.safe_mode_told = true;
            let owner = self.ctx.access.owner();
            if let Some(owner) = owner {
                let ctx = self.ctx.clone();
                self.ctx.spawn("bridge-safe-mode-notice", async move {
                    tell_owner_safe_mode(&ctx, owner).await;
                });
            }
        }
    }

    async fn on_message<S: Future<Output = ()>>(
        &mut self,
        message: Message,
        shard: u32,
        seq: u64,
        mut stop: Pin<&mut S>,
    ) -> Option<BridgeOutcome> {
        let ctx = &self.ctx;
        let mut role = ctx.access.role(message.author.id);
        if !message.is_direct() {
            // Admitted by the peek ([`Loop::skip_unwanted`]): judged again
            // on the whole message, which says the same.
            let entry = ctx.channel_entry(message.channel_id);
            let addressing = channel_gate::Addressing::of(&message, ctx.runtime.bot_user());
            if let Err(why) = channel_gate::admit(addressing, entry) {
                ctx.counters.bump(Counter::GuildMessagesSkipped);
                log::trace!("message {} skipped: {why}", message.id);
                return None;
            }
            if let Some((entry, _)) = entry {
                role = channel_gate::channel_role(entry, role, message.author.id);
            }
        }
        if role != Role::Stranger && message.is_direct() {
            ctx.runtime
                .remember_dm(message.author.id, message.channel_id);
        }
        let bot = ctx.runtime.bot_user();
        let intake = ctx
            .runtime
            .read(|runtime| classify(&message, bot, runtime, role));
        match intake {
            Intake::Ignore(why) => log::debug!("message {} ignored: {why}", message.id),
            Intake::Replay => {
                ctx.counters.bump(counters::Counter::ReplaysSkipped);
                log::info!(
                    "message {} was processed before the restart; skipping its replay",
                    message.id
                );
            }
            Intake::Restart => {
                self.restart_requested(&message).await;
                return Some(BridgeOutcome::RestartRequested);
            }
            Intake::Queue => {
                // Strangers get at most a pairing code; in safe mode only
                // the owner is answered.
                let droppable =
                    role == Role::Stranger || (ctx.lifecycle.safe_mode() && role != Role::Owner);
                let channel = message.channel_id;
                // The ticket holds the saved seq below this message until
                // it is handled, also while it waits for room.
                let (ticket, guard) = ctx.floor.begin_message(
                    shard,
                    seq,
                    format!("message {} in channel {channel}: queued", message.id),
                );
                let job = Job {
                    channel,
                    work: Work::Message {
                        message: Box::new(message),
                        ticket,
                        received_unix_ms: now_unix_ms(),
                    },
                    guard,
                };
                loop {
                    let freed = ctx.queues.freed();
                    match ctx.queues.room_for(channel, droppable) {
                        Room::Now => {
                            if ctx.queues.push(job) {
                                worker::start_worker(ctx, channel);
                            }
                            break;
                        }
                        Room::Drop => {
                            ctx.floor.end(ticket);
                            self.dropped();
                            break;
                        }
                        Room::Wait => {
                            if shard == 0 {
                                // The session received this one and may go
                                // on without the loop for a while: on
                                // disk, so a crash meanwhile does not count
                                // what it received as a gap's.
                                self.readback.session_seen(&self.ctx, true);
                            }
                            if !self.wait_for_room(freed, stop.as_mut()).await {
                                // Not handled: the saved seq stays below
                                // it, so a resume replays it.
                                return Some(BridgeOutcome::Stopped);
                            }
                        }
                    }
                }
            }
        }
        None
    }

    /// Waits until `freed` fires (true) or `stop` resolves (false), saving
    /// session and status meanwhile.
    async fn wait_for_room<S: Future<Output = ()>>(
        &self,
        freed: event_listener::EventListener,
        mut stop: Pin<&mut S>,
    ) -> bool {
        log::debug!(
            "{} messages queued or being handled: waiting for room",
            self.ctx.queues.jobs()
        );
        let mut freed = std::pin::pin!(freed);
        let mut save_at = Instant::now() + SAVE_WHILE_WAITING;
        loop {
            let tick = save_at.min(Instant::now() + STAMP_WHILE_WAITING);
            let woke = futures_lite::future::or(
                async {
                    (&mut freed).await;
                    Some(true)
                },
                futures_lite::future::or(
                    async {
                        stop.as_mut().await;
                        Some(false)
                    },
                    async {
                        smolcord::rt::Timer::at(tick).await;
                        None
                    },
                ),
            )
            .await;
            match woke {
                Some(freed) => return freed,
                None => {
                    self.stamp_live();
                    if Instant::now() >= save_at {
                        // Like a heartbeat: the session if its seq is
                        // stale, the status file only where the status
                        // socket is not live.
                        self.save_session_and_status(SaveReason::Beat);
                        save_at = Instant::now() + SAVE_WHILE_WAITING;
                    }
                }
            }
        }
    }

    /// While the loop waits for room, the session goes on receiving (the
    /// shard stops reading the socket, its heartbeats go on): its last
    /// ACK shows it live, so what it received meanwhile is not taken for
    /// a gap's by a later read-back (`runtime.json`'s `live`).
    fn stamp_live(&self) {
        let statuses = self.shard.statuses();
        let Some(status) = statuses.iter().find(|s| s.shard[0] == 0 && s.connected) else {
            return;
        };
        let Some(ack) = status.last_ack else { return };
        let Ok(at) = ack.duration_since(std::time::UNIX_EPOCH) else {
            return;
        };
        self.ctx.runtime.session_seen(at.as_millis() as u64, true);
    }

    /// A message dropped at a queue bound: counted, journalled and logged,
    /// both rate-limited.
    fn dropped(&self) {
        let ctx = &self.ctx;
        ctx.counters.bump(Counter::MessagesDropped);
        ctx.counters.bump(Counter::Refused);
        ctx.reporter.fail(
            FailureKind::AccessRefused,
            "intake",
            None,
            "message from someone not answered dropped: the bridge was busy",
        );
        if let Verdict::Pass { held_back } = self.drop_log.check(&(), Instant::now()) {
            log::warn!(
                "busy ({} messages queued or being handled): dropped a message from someone the bot does not answer ({held_back} more dropped since the last report)",
                ctx.queues.jobs()
            );
        }
    }

    async fn restart_requested(&self, message: &Message) {
        log::info!("the owner asked for a restart");
        let ctx = &self.ctx;
        // On disk before the marker: a replayed `!restart` must not
        // restart us again.
        ctx.runtime
            .record_processed(message.channel_id, message.id)
            .await;
        let marker = RestartMarker {
            requested_by: message.author.id,
            channel_id: message.channel_id,
            message_id: message.id,
            requested_unix_ms: now_unix_ms(),
        };
        // Needed for correctness (the "back" notice): awaited.
        restart::write_marker(&ctx.state_dir, &ctx.reporter, &marker).await;
        let channel = message.channel_id;
        let nonce = nonce::notice(message.id, Notice::Restarting);
        ctx.spawn_job(
            "bridge-restart-ack",
            "restart acknowledgement".into(),
            |ctx| async move {
                if delivery::notify(&ctx, channel, "Restarting…", &nonce).await {
                    ctx.turn_succeeded();
                }
            },
        );
    }

    async fn shut_down(&self, poll_stop: Sender<()>, outcome: &BridgeOutcome, cause: StopReason) {
        let ctx = &self.ctx;
        ctx.lifecycle.stop();
        drop(poll_stop);
        if let Some((_, held_back)) = self.drop_log.take_held_back().pop() {
            log::warn!("{held_back} more messages were dropped while the bridge was busy");
        }
        let bound = ctx.tunables.drain_timeout;
        let left = ctx.floor.drain(Instant::now() + bound).await;
        if left.is_empty() {
            log::info!("bridge stopping ({outcome:?}): nothing left in flight");
            if matches!(outcome, BridgeOutcome::Stopped) && cause == StopReason::Requested {
                ctx.runtime.stopped_cleanly();
            }
        } else {
            log::warn!(
                "bridge stopping ({outcome:?}): {} job(s) unfinished after {:.1} s, abandoned (their messages are replayed on resume): {}",
                left.len(),
                bound.as_secs_f64(),
                left.join("; ")
            );
        }
        // The floor still holds the abandoned messages' seqs, so the saved
        // session resumes before them.
        self.save_session_and_status(SaveReason::Shutdown);
        ctx.reporter.flush_held_back();
        ctx.runtime.save();
        let flush = async {
            ctx.runtime.flush().await;
            self.writers.session_and_status.flush().await;
            self.writers.directory.flush().await;
            true
        };
        let timeout = async {
            async_io::Timer::after(ctx.tunables.save_timeout).await;
            false
        };
        if !futures_lite::future::or(flush, timeout).await {
            log::warn!(
                "the final state save did not finish within {:.1} s; the files keep their previous values",
                ctx.tunables.save_timeout.as_secs_f64()
            );
        }
    }
}

async fn tell_owner_safe_mode(ctx: &Ctx, owner: Snowflake) {
    let text = format!(
        "Started in safe mode: {} start-ups in a row did not complete a turn. Only you are answered until a message gets through; check the log and `smolcord failures`.",
        ctx.runtime.failed_starts().saturating_sub(1)
    );
    match ctx.rest.create_dm(owner).await {
        Ok(dm) => {
            // Once per start-up in safe mode: nothing to repeat.
            delivery::notify(ctx, dm.id, &text, &Nonce::random()).await;
        }
        Err(e) => {
            log::warn!("safe-mode notice: opening a DM with the owner failed: {e}");
            ctx.reporter.rest_failure(FailureKind::Rest, &e);
        }
    }
}
