//! The shard's connection loop: connect, Hello, Identify/Resume, then race
//! the heartbeat deadline, incoming frames, queued commands and shutdown.
//!
//! Two rules keep the beat punctual under any burst. The loop yields to the
//! executor after a bounded slice of work ([`SLICE_FRAMES`] frames or
//! [`SLICE_TIME`]), since a socket with data buffered never makes it wait;
//! and a dispatch that does not fit the consumer's queue is held while the
//! socket goes unread (backpressure) — the beat timer, commands and
//! shutdown are still served, and the time spent not reading is kept out of
//! the zombie verdict (see [`Heartbeat::verdict`]).

use super::history::{EndReason, StartKind};
use super::identify_budget::{Pressure, SessionStartLimit};
use super::identify_queue::IdentifyPermit;
use super::ratelimit::CommandLimiter;
use super::session::checked_resume_url;
use super::session::{check_seq, SeqCheck, Session};
use super::{
    lock, max_message_bytes_for, Dispatch, EventItem, Shard, ShardError, ShardEvent, ShardStatus,
};
use crate::heartbeat::{Account, Heartbeat, Reading, Verdict};
use crate::loopwatch;
use crate::protocol::{
    CloseAction, CloseCode, Command, ConnectionProperties, Frame, Hello, Identify, OpCode, Ready,
    Resume,
};
use crate::rest::USER_AGENT;
use crate::transport::{Connection, Incoming, Limits, TransportError};
use crate::wire::WireTrace;
use async_io::Timer;
use futures_lite::future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Discord's gateway when nothing else is known.
const DEFAULT_GATEWAY: &str = "wss://gateway.discord.gg";
/// After this many failed connects to the resume URL, resume via the base URL.
const RESUME_URL_ATTEMPTS: u32 = 2;
/// Frames handled before the loop yields to the executor. A frame costs a
/// few µs to decode, so a slice is well under a millisecond.
const SLICE_FRAMES: u32 = 64;
/// Time spent on frames before the loop yields, whatever their count (a few
/// large ones).
const SLICE_TIME: Duration = Duration::from_millis(2);
/// Hello intervals accepted. Discord sends 41 250 ms. Below 100 ms a
/// gateway would have us beat over ten times a second; above five minutes a
/// dead connection would go unnoticed for that long. Outside, the Hello is
/// refused and the connection made again.
const HELLO_INTERVAL: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(100)..=Duration::from_secs(300);
/// Largest forward jump of a dispatch's `s` believed. Discord numbers a
/// session's dispatches one by one; a jump this large is a broken or hostile
/// gateway, and obeying it would make every later dispatch look like a
/// replay (dropped) until the next READY.
const MAX_SEQ_JUMP: u64 = 1 << 20;
/// Waits at least this long are logged at info level, with the reason.
const LOUD_WAIT: Duration = Duration::from_secs(1);

/// How a connection ended.
#[derive(Debug)]
enum Outcome {
    /// Reconnect and resume; `immediate` skips the backoff (clean op 7).
    Resume { immediate: bool },
    /// The session is gone: reconnect and identify after `wait`.
    Reidentify { wait: Duration },
    /// Stop: the operator must act.
    Fatal(CloseCode),
    /// We were asked to stop.
    Shutdown,
}

pub(super) struct Driver {
    shard: Shard,
    account: Account,
    base_url: Option<String>,
    remote_limit: Option<SessionStartLimit>,
    resume_url_failures: u32,
    last_seq: Option<u64>,
    /// Bound on one send on the current connection.
    send_bound: Duration,
    /// A send timed out: the peer stopped reading, so skip the close
    /// handshake.
    abandon: bool,
    /// Why the current connection is ending (the first cause seen), for
    /// the session history.
    end: Option<EndReason>,
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Driver {
    pub(super) fn new(shard: Shard) -> Driver {
        let last_seq = shard.config.state.session.as_ref().map(|s| s.seq);
        let base_url = shard.config.gateway_url.clone();
        Driver {
            shard,
            account: Account::default(),
            base_url,
            remote_limit: None,
            resume_url_failures: 0,
            last_seq,
            send_bound: Duration::from_secs(10),
            abandon: false,
            end: None,
        }
    }

    fn status(&self) -> std::sync::MutexGuard<'_, ShardStatus> {
        lock(&self.shard.status)
    }

    /// Reports a heartbeat or a disconnect (outside the dispatch budget).
    fn notify(&self, event: ShardEvent) {
        self.shard.events.push_notice(Ok(event));
    }

    fn session(&self) -> Option<Session> {
        self.status().state.session.clone()
    }

    fn set_session(&self, session: Option<Session>) {
        self.status().state.session = session;
    }

    /// Sleeps for `wait` unless shutdown is asked first (returns false then).
    async fn pause(&self, wait: Duration) -> bool {
        if wait.is_zero() {
            return true;
        }
        future::or(
            async {
                Timer::after(wait).await;
                true
            },
            async {
                let _ = self.shard.shutdown.recv().await;
                false
            },
        )
        .await
    }

    pub(super) async fn run(mut self) -> Result<(), ShardError> {
        let mut wait = Duration::ZERO;
        loop {
            if !self.pause(wait).await {
                return self.stopped();
            }
            let session = self.session();
            if session.is_none() && !self.identify_gate().await {
                return self.stopped();
            }
            if let Some((order, index)) = self.shard.start.clone() {
                let turn = future::or(
                    async {
                        order.wait_turn(index).await;
                        true
                    },
                    async {
                        let _ = self.shard.shutdown.recv().await;
                        false
                    },
                );
                if !turn.await {
                    return self.stopped();
                }
            }
            let url = match &session {
                Some(s) if self.resume_url_failures < RESUME_URL_ATTEMPTS => {
                    s.resume_gateway_url.clone()
                }
                _ => self.gateway_url().await,
            };
            let config = &self.shard.config;
            let limits = Limits::message(
                config
                    .max_message_bytes
                    .unwrap_or_else(|| max_message_bytes_for(config.intents)),
            );
            let connected = Connection::connect(
                &url,
                config.compress,
                config.connect_timeout,
                limits,
                USER_AGENT,
                WireTrace::client(Some(config.token.clone())),
            )
            .await;
            let connection = match connected {
                Ok(connection) => connection,
                Err(err) => {
                    self.pass_start();
                    if session.is_some() {
                        self.resume_url_failures += 1;
                    }
                    wait = self.shard.config.backoff.next_delay();
                    log::warn!("{err}; retrying in {:.1} s", wait.as_secs_f64());
                    continue;
                }
            };
            self.resume_url_failures = 0;
            let started = Instant::now();
            let (outcome, healthy_since) = self.run_connection(connection, session, &url).await;
            self.status().connected = false;
            self.shard
                .config
                .backoff
                .connection_ended(healthy_since, Instant::now());
            log::debug!(
                "connection ended after {:?}: {outcome:?}",
                started.elapsed()
            );
            wait = match outcome {
                Outcome::Shutdown => return self.stopped(),
                Outcome::Fatal(code) => {
                    self.pass_start();
                    let error = ShardError::fatal(code);
                    log::error!("{error}");
                    self.shard.events.push_notice(Err(error.clone()));
                    return Err(error);
                }
                Outcome::Resume { immediate: true } => Duration::ZERO,
                Outcome::Resume { immediate: false } => {
                    let wait = self.shard.config.backoff.next_delay();
                    if wait >= LOUD_WAIT {
                        log::info!(
                            "reconnecting in {:.1} s (backoff after {} connection failure(s) in a row)",
                            wait.as_secs_f64(),
                            self.shard.config.backoff.attempts()
                        );
                    }
                    wait
                }
                Outcome::Reidentify { wait } => {
                    self.set_session(None);
                    self.last_seq = None;
                    wait
                }
            };
        }
    }

    /// In a set, lets the next shard make its first connection.
    fn pass_start(&mut self) {
        if let Some((order, index)) = self.shard.start.take() {
            order.pass(index);
        }
    }

    fn stopped(&mut self) -> Result<(), ShardError> {
        self.pass_start();
        self.status().connected = false;
        Ok(())
    }

    /// The base gateway URL: configured, or from `GET /gateway/bot` (cached),
    /// or Discord's well-known one.
    async fn gateway_url(&mut self) -> String {
        if let Some(url) = &self.base_url {
            return url.clone();
        }
        self.refresh_gateway_info().await;
        self.base_url
            .clone()
            .unwrap_or_else(|| DEFAULT_GATEWAY.to_owned())
    }

    async fn refresh_gateway_info(&mut self) {
        let Some(source) = self.shard.config.gateway_info.clone() else {
            return;
        };
        match source().await {
            Ok(info) => {
                if self.shard.config.gateway_url.is_none() {
                    self.base_url = Some(info.url);
                }
                if let Some(limit) = info.session_start_limit {
                    self.shard
                        .identify_queue
                        .set_max_concurrency(limit.max_concurrency);
                }
                self.remote_limit = info.session_start_limit;
            }
            Err(err) => log::warn!("cannot ask Discord for the gateway and identify budget: {err}"),
        }
    }

    /// Waits as the identify budget requires. False if shut down meanwhile.
    async fn identify_gate(&mut self) -> bool {
        self.refresh_gateway_info().await;
        let plan = lock(&self.shard.budget).plan(unix_ms(), self.remote_limit);
        match plan.pressure {
            Pressure::Normal => {}
            Pressure::Low => log::warn!(
                "identify budget low: {} fresh sessions left in Discord's 24 h window; waiting {} s before identifying (resume is free, identify is not)",
                plan.remaining,
                plan.wait.as_secs()
            ),
            Pressure::Critical => log::error!(
                "identify budget nearly spent: {} left of 1000 per 24 h (Discord resets the token when it runs out); waiting {} s before identifying. Find out why the bot keeps losing its session.",
                plan.remaining,
                plan.wait.as_secs()
            ),
        }
        self.pause(plan.wait).await
    }

    async fn run_connection(
        &mut self,
        mut connection: Connection,
        session: Option<Session>,
        url: &str,
    ) -> (Outcome, Option<Instant>) {
        let mut live = Live {
            healthy_since: None,
            resuming: session.is_some(),
            replayed: 0,
            url: url.to_owned(),
            held: None,
            slice: Slice::new(),
            beats: 0,
            worst_lateness: Duration::ZERO,
        };
        self.abandon = false;
        self.end = None;
        let outcome = self.drive(&mut connection, session, &mut live).await;
        // Closes the session the history has open (if Identify or Resume
        // went out on this connection; otherwise there is none). Every way
        // out of a session notes its cause; `Unknown` would be a path missed.
        let reason = self.end.take().unwrap_or(EndReason::Unknown);
        self.status()
            .state
            .history
            .ended(reason, live.beats, live.worst_lateness, unix_ms());
        if let Some((Ok(ShardEvent::Dispatch(dispatch)), bytes)) = live.held.take() {
            // Already counted as delivered (its seq is our resume point):
            // hand it over before anything of the next connection.
            self.shard.events.room_for(bytes).await;
            let _ = self
                .shard
                .events
                .try_push(Ok(ShardEvent::Dispatch(dispatch)), bytes);
        }
        // Every close is resumable (4000): 1000/1001 would end the session.
        let close_timeout = if self.abandon {
            Duration::ZERO
        } else {
            self.shard.config.close_timeout
        };
        connection.close(CloseCode::RESUME.0, close_timeout).await;
        (outcome, live.healthy_since)
    }

    async fn drive(
        &mut self,
        connection: &mut Connection,
        session: Option<Session>,
        live: &mut Live,
    ) -> Outcome {
        let hello_at;
        let interval;
        let hello_timeout = self.shard.config.hello_timeout;
        let deadline = Instant::now() + hello_timeout;
        loop {
            let message = future::or(async { Some(connection.next_message().await) }, async {
                Timer::at(deadline).await;
                None
            })
            .await;
            let Some(message) = message else {
                log::warn!("no Hello within {hello_timeout:?}; reconnecting");
                self.pass_start();
                return Outcome::Resume { immediate: false };
            };
            match self.pre_hello(message) {
                Ok(Some(hello)) => {
                    hello_at = Instant::now();
                    interval = Duration::from_millis(hello.heartbeat_interval);
                    break;
                }
                Ok(None) => live.slice.yield_if_spent().await,
                Err(outcome) => {
                    self.pass_start();
                    return outcome;
                }
            }
        }
        // The identify queue is asked right after this (in `converse`),
        // before the next shard of a set has even connected.
        self.pass_start();
        if !HELLO_INTERVAL.contains(&interval) {
            log::error!(
                "the gateway's Hello asks for a heartbeat every {} ms; refusing it (accepted: {}..={} ms) and reconnecting",
                interval.as_millis(),
                HELLO_INTERVAL.start().as_millis(),
                HELLO_INTERVAL.end().as_millis()
            );
            self.status().malformed_frames += 1;
            return Outcome::Resume { immediate: false };
        }
        self.send_bound = self.shard.config.send_timeout.min(interval);
        // Everything per-connection starts fresh here: ACK state, schedule,
        // limiter (the inflater is the connection's own).
        let account = std::mem::take(&mut self.account);
        let mut heartbeat = Heartbeat::with_account(hello_at, interval, fastrand::f64(), account);
        let mut limiter = CommandLimiter::new(interval);
        self.status().heartbeat_interval_ms = Some(interval.as_millis() as u64);

        let outcome = self
            .converse(connection, session, live, &mut heartbeat, &mut limiter)
            .await;
        if self.abandon {
            heartbeat.on_zombie();
        }
        self.account = heartbeat.into_account();
        self.status().heartbeat = self.account.clone();
        outcome
    }

    /// Handles frames before Hello: returns Hello, or an outcome for op 7 or
    /// a close, or `None` to keep waiting.
    fn pre_hello(
        &mut self,
        message: Result<Incoming, TransportError>,
    ) -> Result<Option<Hello>, Outcome> {
        let Some(frame) = self.frame_of(message)? else {
            return Ok(None);
        };
        match frame.opcode() {
            Some(OpCode::Hello) => match frame.data::<Hello>() {
                Ok(hello) => Ok(Some(hello)),
                Err(err) => {
                    self.malformed(&err.to_string());
                    Err(Outcome::Resume { immediate: false })
                }
            },
            Some(OpCode::Reconnect) => Err(Outcome::Resume { immediate: true }),
            _ => {
                log::debug!("ignoring opcode {} before Hello", frame.raw_opcode());
                Ok(None)
            }
        }
    }

    /// The frame in `message`: `Err` when the connection ended, `None`
    /// for a frame that does not decode (logged and skipped).
    fn frame_of(
        &mut self,
        message: Result<Incoming, TransportError>,
    ) -> Result<Option<Frame>, Outcome> {
        let text = match message {
            Ok(Incoming::Text(text)) => text,
            Ok(Incoming::Control) => return Ok(None),
            other => return Err(self.connection_lost(other)),
        };
        match Frame::decode(text.as_bytes()) {
            Ok(frame) => Ok(Some(frame)),
            Err(err) => {
                self.malformed(&err.to_string());
                Ok(None)
            }
        }
    }

    /// Notes why the connection is ending; the first cause wins (a zombie
    /// verdict is the reason, not the close that follows it).
    fn end_because(&mut self, reason: EndReason) {
        self.end.get_or_insert(reason);
    }

    fn malformed(&self, detail: &str) {
        self.status().malformed_frames += 1;
        log::warn!("skipping a gateway frame: {detail}");
    }

    /// Sends one frame, within [`Driver::send_bound`]: a gateway that
    /// stopped reading fills the socket and the send never finishes, which
    /// makes the connection a zombie even if it keeps sending to us.
    async fn send_now(
        &mut self,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
        json: String,
    ) -> Result<(), Outcome> {
        limiter.record(Instant::now());
        let bound = self.send_bound;
        let sent = future::or(async { Some(connection.send(json).await) }, async {
            Timer::after(bound).await;
            None
        })
        .await;
        match sent {
            Some(Ok(())) => Ok(()),
            Some(Err(err)) => {
                log::warn!("{err}; reconnecting");
                self.end_because(EndReason::Dropped);
                Err(Outcome::Resume { immediate: false })
            }
            None => {
                self.abandon = true;
                self.end_because(EndReason::Zombie);
                log::warn!(
                    "a send to the gateway did not finish within {:.1} s: it stopped reading; leaving the connection as a zombie and reconnecting to resume",
                    bound.as_secs_f64()
                );
                self.notify(ShardEvent::Disconnected {
                    reason: "the gateway stopped reading (a send timed out)".into(),
                });
                Err(Outcome::Resume { immediate: false })
            }
        }
    }

    /// The opening command: Resume, or Identify once the identify queue
    /// grants it.
    fn opening(&self, session: Option<&Session>) -> Result<String, Outcome> {
        let config = &self.shard.config;
        let opening = match session {
            Some(session) => Command::Resume(Resume {
                token: config.token.expose().to_owned(),
                session_id: session.session_id.clone(),
                seq: self.last_seq.unwrap_or(session.seq),
            }),
            None => Command::Identify(Identify {
                token: config.token.expose().to_owned(),
                properties: ConnectionProperties::default(),
                compress: None,
                large_threshold: config.large_threshold,
                shard: Some(config.shard),
                presence: Some(config.presence.clone()),
                intents: config.intents,
            }),
        };
        opening.to_json().map_err(|err| {
            log::error!("{err}");
            Outcome::Fatal(CloseCode(4002))
        })
    }

    /// Sends Identify under `permit` (dropped once it is sent: the bucket's
    /// window runs from here) and counts it against the daily budget.
    async fn identify(
        &mut self,
        permit: IdentifyPermit,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
    ) -> Result<(), Outcome> {
        let json = self.opening(None)?;
        let history = {
            let mut budget = lock(&self.shard.budget);
            budget.record(unix_ms());
            budget.clone()
        };
        self.status().state.identifies = history;
        log::debug!("identifying (shard {:?})", self.shard.config.shard);
        let sent = self.send_now(connection, limiter, json).await;
        drop(permit);
        if sent.is_ok() {
            self.status()
                .state
                .history
                .started(StartKind::Identify, unix_ms());
        }
        sent
    }

    async fn converse(
        &mut self,
        connection: &mut Connection,
        session: Option<Session>,
        live: &mut Live,
        heartbeat: &mut Heartbeat,
        limiter: &mut CommandLimiter,
    ) -> Outcome {
        // A resume goes at once; an identify waits for its turn in the
        // identify queue, heartbeating meanwhile (the turn of the last of
        // many shards can be minutes away).
        let shard_id = self.shard.config.shard[0];
        let mut permit = match &session {
            Some(session) => {
                log::debug!("resuming after seq {:?}", self.last_seq);
                let json = match self.opening(Some(session)) {
                    Ok(json) => json,
                    Err(outcome) => return outcome,
                };
                if let Err(outcome) = self.send_now(connection, limiter, json).await {
                    return outcome;
                }
                self.status()
                    .state
                    .history
                    .started(StartKind::Resume, unix_ms());
                None
            }
            None => Some((Instant::now(), self.shard.identify_queue.permit(shard_id))),
        };

        // One timer for the whole connection, moved only when the deadline
        // does: every new timer wakes the reactor thread, and an idle bot
        // should wake for its beats and nothing else.
        let mut beat_at = heartbeat.next_deadline();
        let mut beat_timer = Timer::at(beat_at);
        loop {
            if heartbeat.next_deadline() != beat_at {
                beat_at = heartbeat.next_deadline();
                beat_timer.set_at(beat_at);
            }
            let wake = {
                let now = Instant::now();
                // Nothing but heartbeats before the session is opened.
                let opened = permit.is_none();
                let commands_open = opened && limiter.may_send_command(now);
                let command_slot = limiter.next_command_slot(now);
                let beat = async {
                    (&mut beat_timer).await;
                    Wake::Beat
                };
                let turn = async {
                    match permit.as_mut() {
                        Some((_, granted)) => Wake::Permit(granted.await),
                        None => future::pending().await,
                    }
                };
                // Read the socket, or — while a dispatch waits for room in
                // the consumer's queue — wait for room and read nothing.
                let held_bytes = live.held.as_ref().map(|(_, bytes)| *bytes);
                let events = &self.shard.events;
                let input = async {
                    match held_bytes {
                        Some(bytes) => {
                            events.room_for(bytes).await;
                            Wake::Room
                        }
                        None => Wake::Frame(connection.next_message().await),
                    }
                };
                let command = async {
                    if commands_open {
                        match self.shard.commands.recv().await {
                            Ok((_, json)) => Wake::Command(json),
                            Err(_) => future::pending().await,
                        }
                    } else if opened {
                        Timer::at(command_slot).await;
                        Wake::CommandSlot
                    } else {
                        future::pending().await
                    }
                };
                let shutdown = async {
                    let _ = self.shard.shutdown.recv().await;
                    Wake::Shutdown
                };
                // Order matters on simultaneous readiness: the beat first.
                future::or(
                    beat,
                    future::or(turn, future::or(input, future::or(command, shutdown))),
                )
                .await
            };
            let result = match wake {
                Wake::Beat => self.beat(connection, heartbeat, limiter, live).await,
                Wake::Permit(granted) => {
                    if let Some((asked, _)) = permit.take() {
                        let waited = asked.elapsed();
                        if waited >= LOUD_WAIT {
                            log::info!(
                                "shard {shard_id} waited {:.1} s for its turn to identify (one per max_concurrency bucket per {} s)",
                                waited.as_secs_f64(),
                                self.shard.config.identify_window.as_secs_f64()
                            );
                        }
                    }
                    self.identify(granted, connection, limiter).await
                }
                Wake::Room => {
                    self.release_held(live, heartbeat);
                    Ok(())
                }
                Wake::Frame(message) => {
                    let handled = self
                        .on_message(message, connection, heartbeat, limiter, live)
                        .await;
                    live.slice.yield_if_spent().await;
                    handled
                }
                Wake::Command(json) => self.send_now(connection, limiter, json).await,
                Wake::CommandSlot => Ok(()),
                Wake::Shutdown => {
                    self.end_because(EndReason::Shutdown);
                    Err(Outcome::Shutdown)
                }
            };
            if let Err(outcome) = result {
                return outcome;
            }
        }
    }

    /// Hands the held dispatch over now that there is room, and reads again.
    fn release_held(&self, live: &mut Live, heartbeat: &mut Heartbeat) {
        if let Some((item, bytes)) = live.held.take() {
            if let Err(item) = self.shard.events.try_push(item, bytes) {
                // Another producer cannot exist; keep it for the next round.
                live.held = Some((item, bytes));
                return;
            }
        }
        heartbeat.resume_reading(Instant::now());
    }

    /// A dispatch for the consumer: queued, or held (and the socket left
    /// unread) until the consumer makes room.
    fn deliver(&self, dispatch: Dispatch, live: &mut Live, heartbeat: &mut Heartbeat) {
        let bytes = dispatch.raw_data().len();
        if let Err(item) = self
            .shard
            .events
            .try_push(Ok(ShardEvent::Dispatch(dispatch)), bytes)
        {
            live.held = Some((item, bytes));
            heartbeat.pause(Instant::now());
        }
    }

    /// Reads what already arrived, up to one slice of work: an ACK may sit
    /// unread behind other frames after a local stall. Says whether it read
    /// everything there was.
    async fn catch_up(
        &mut self,
        connection: &mut Connection,
        heartbeat: &mut Heartbeat,
        limiter: &mut CommandLimiter,
        live: &mut Live,
    ) -> Result<Reading, Outcome> {
        for _ in 0..SLICE_FRAMES {
            if live.held.is_some() {
                return Ok(Reading::Behind);
            }
            match future::poll_once(connection.next_message()).await {
                None => return Ok(Reading::CaughtUp),
                Some(message) => {
                    self.on_message(message, connection, heartbeat, limiter, live)
                        .await?
                }
            }
        }
        Ok(Reading::Behind)
    }

    /// A heartbeat deadline: first catch up with what already arrived, then
    /// judge, then beat.
    async fn beat(
        &mut self,
        connection: &mut Connection,
        heartbeat: &mut Heartbeat,
        limiter: &mut CommandLimiter,
        live: &mut Live,
    ) -> Result<(), Outcome> {
        let reading = self.catch_up(connection, heartbeat, limiter, live).await?;
        let now = Instant::now();
        if heartbeat.verdict(now, reading) == Verdict::Zombie {
            heartbeat.on_zombie();
            self.end_because(EndReason::Zombie);
            let interval = heartbeat.interval().as_secs_f64();
            let reason = match reading {
                Reading::CaughtUp => format!(
                    "no heartbeat ACK for {interval:.1} s (one interval): the connection is a zombie"
                ),
                Reading::Behind => format!(
                    "no heartbeat ACK for {:.1} s (two intervals) while the gateway kept sending: it is not answering us",
                    interval * 2.0
                ),
            };
            log::warn!("{reason}; reconnecting to resume");
            self.notify(ShardEvent::Disconnected { reason });
            return Err(Outcome::Resume { immediate: false });
        }
        let json = Command::Heartbeat(self.last_seq)
            .to_json()
            .unwrap_or_default();
        let record = heartbeat.on_sent(now);
        live.beats += 1;
        live.worst_lateness = live.worst_lateness.max(record.lateness);
        self.send_now(connection, limiter, json).await?;
        let warn = self.shard.config.heartbeat_warn;
        if record.lateness >= warn {
            heartbeat.on_late_warning();
            let culprit = loopwatch::last_stall_since(record.scheduled)
                .map(|stall| {
                    format!(
                        "; task \"{}\" blocked the event loop for {} ms",
                        stall.task,
                        stall.duration.as_millis()
                    )
                })
                .unwrap_or_default();
            log::warn!(
                "heartbeat sent {} ms late{culprit}",
                record.lateness.as_millis()
            );
        }
        log::debug!(
            "heartbeat seq={:?} lateness={:.2} ms gap={:?}",
            self.last_seq,
            record.lateness.as_secs_f64() * 1000.0,
            record.gap
        );
        self.status().heartbeat = heartbeat.account().clone();
        Ok(())
    }

    async fn on_message(
        &mut self,
        message: Result<Incoming, TransportError>,
        connection: &mut Connection,
        heartbeat: &mut Heartbeat,
        limiter: &mut CommandLimiter,
        live: &mut Live,
    ) -> Result<(), Outcome> {
        live.slice.count();
        let Some(frame) = self.frame_of(message)? else {
            return Ok(());
        };
        match frame.opcode() {
            Some(OpCode::Dispatch) => {
                self.on_dispatch(frame, connection, limiter, live, heartbeat)
                    .await
            }
            Some(OpCode::HeartbeatAck) => {
                if let Some(record) = heartbeat.on_ack(Instant::now()) {
                    {
                        let mut status = self.status();
                        status.last_ack = Some(SystemTime::now());
                        status.heartbeat = heartbeat.account().clone();
                    }
                    self.notify(ShardEvent::Heartbeat(record));
                } else {
                    log::debug!("heartbeat ACK with no beat outstanding");
                }
                Ok(())
            }
            Some(OpCode::Heartbeat) => {
                // The server asks for a beat now; it does not move the schedule.
                let json = Command::Heartbeat(self.last_seq)
                    .to_json()
                    .unwrap_or_default();
                heartbeat.on_requested_sent(Instant::now());
                self.send_now(connection, limiter, json).await
            }
            Some(OpCode::Reconnect) => {
                log::info!("gateway asked us to reconnect (op 7); resuming");
                self.end_because(EndReason::Reconnect);
                Err(Outcome::Resume { immediate: true })
            }
            Some(OpCode::InvalidSession) => {
                let resumable = frame.data::<bool>().unwrap_or(false);
                self.end_because(EndReason::InvalidSession { resumable });
                if resumable && self.session().is_some() {
                    log::info!("invalid session (op 9, resumable); resuming");
                    Err(Outcome::Resume { immediate: true })
                } else {
                    let (low, high) = self.shard.config.invalid_session_wait;
                    let spread = high.saturating_sub(low);
                    let wait = low + spread.mul_f64(fastrand::f64());
                    log::warn!(
                        "invalid session (op 9, not resumable); identifying afresh in {:.1} s",
                        wait.as_secs_f64()
                    );
                    Err(Outcome::Reidentify { wait })
                }
            }
            Some(OpCode::Hello) => {
                log::warn!("unexpected second Hello; ignoring it");
                Ok(())
            }
            _ => {
                log::debug!("ignoring opcode {}", frame.raw_opcode());
                Ok(())
            }
        }
    }

    async fn on_dispatch(
        &mut self,
        frame: Frame,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
        live: &mut Live,
        heartbeat: &mut Heartbeat,
    ) -> Result<(), Outcome> {
        let name = frame.event_name().unwrap_or_default().to_owned();
        let Some(seq) = frame.sequence() else {
            self.malformed(&format!("dispatch {name} without a sequence number"));
            return Ok(());
        };
        // A new session numbers its events from the start again.
        let last = if name == "READY" { None } else { self.last_seq };
        if seq > last.unwrap_or(0).saturating_add(MAX_SEQ_JUMP) {
            self.status().malformed_frames += 1;
            log::error!(
                "the gateway sent {name} with sequence number {seq} after {}: refusing a jump of more than {MAX_SEQ_JUMP}; reconnecting",
                last.map_or("none".to_owned(), |l| l.to_string())
            );
            self.end_because(EndReason::Malformed);
            return Err(Outcome::Resume { immediate: false });
        }
        self.last_seq = last;
        match check_seq(self.last_seq, seq) {
            SeqCheck::Duplicate => {
                self.status().duplicates_dropped += 1;
                log::debug!("dropping replayed dispatch {name} #{seq} (already delivered)");
                return Ok(());
            }
            SeqCheck::Gap { after } => {
                self.status().gaps += 1;
                log::warn!(
                    "gateway sequence gap: events {}..{} were never received",
                    after + 1,
                    seq - 1
                );
            }
            SeqCheck::Deliver => {}
        }
        self.last_seq = Some(seq);
        if live.resuming && name != "RESUMED" {
            live.replayed += 1;
        }
        match name.as_str() {
            "READY" => {
                self.on_ready(&frame, seq, connection, limiter, live)
                    .await?
            }
            "RESUMED" => self.on_resumed(connection, limiter, live).await?,
            _ => {
                if let Some(session) = self.status().state.session.as_mut() {
                    session.seq = seq;
                }
            }
        }
        self.deliver(Dispatch { name, seq, frame }, live, heartbeat);
        Ok(())
    }

    async fn on_ready(
        &mut self,
        frame: &Frame,
        seq: u64,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
        live: &mut Live,
    ) -> Result<(), Outcome> {
        let ready: Ready = match frame.data() {
            Ok(ready) => ready,
            Err(err) => {
                self.malformed(&err.to_string());
                self.end_because(EndReason::Malformed);
                return Err(Outcome::Reidentify {
                    wait: Duration::ZERO,
                });
            }
        };
        self.account.reset_session();
        let resume_url =
            checked_resume_url(&ready.resume_gateway_url, &live.url).unwrap_or_else(|reason| {
                log::warn!(
                    "ignoring READY's resume_gateway_url ({reason}); resuming through {} instead",
                    live.url
                );
                live.url.clone()
            });
        let number = {
            let mut status = self.status();
            status.state.session = Some(Session {
                session_id: ready.session_id.clone(),
                seq,
                resume_gateway_url: resume_url,
            });
            status.sessions_started += 1;
            status.connected = true;
            status.last_ready = Some(SystemTime::now());
            status.state.history.established(unix_ms());
            status.user = Some(ready.user.clone());
            status.sessions_started
        };
        let [id, count] = self.shard.config.shard;
        log::info!(
            "gateway session #{number} ready as {} (shard {id}/{count})",
            ready.user.username
        );
        live.resuming = false;
        live.healthy_since = Some(Instant::now());
        self.set_online(connection, limiter).await
    }

    async fn on_resumed(
        &mut self,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
        live: &mut Live,
    ) -> Result<(), Outcome> {
        {
            let mut status = self.status();
            status.resumes += 1;
            status.connected = true;
            status.last_resumed = Some(SystemTime::now());
            status.state.history.established(unix_ms());
            if let (Some(session), Some(seq)) = (status.state.session.as_mut(), self.last_seq) {
                session.seq = seq;
            }
        }
        log::info!(
            "gateway session resumed ({} missed events replayed)",
            live.replayed
        );
        live.resuming = false;
        live.healthy_since = Some(Instant::now());
        self.set_online(connection, limiter).await
    }

    /// Explicit `online` presence after READY/RESUMED, so recovery is
    /// visible at once.
    async fn set_online(
        &mut self,
        connection: &mut Connection,
        limiter: &mut CommandLimiter,
    ) -> Result<(), Outcome> {
        match Command::PresenceUpdate(self.shard.config.presence.clone()).to_json() {
            Ok(json) => self.send_now(connection, limiter, json).await,
            Err(err) => {
                log::warn!("not setting presence: {err}");
                Ok(())
            }
        }
    }

    /// Turns a close or transport error into what to do next.
    fn connection_lost(&mut self, message: Result<Incoming, TransportError>) -> Outcome {
        self.end_because(match &message {
            Ok(Incoming::Closed(code)) => EndReason::from_close(*code),
            _ => EndReason::Dropped,
        });
        let reason;
        let outcome = match message {
            Ok(Incoming::Closed(Some(code))) => {
                let code = CloseCode(code);
                reason = format!("gateway closed the connection: {code}");
                match code.action() {
                    CloseAction::Fatal => Outcome::Fatal(code),
                    CloseAction::Reidentify => Outcome::Reidentify {
                        wait: Duration::ZERO,
                    },
                    CloseAction::Resume => Outcome::Resume { immediate: false },
                }
            }
            Ok(Incoming::Closed(None)) => {
                reason = "connection dropped without a close frame".to_owned();
                Outcome::Resume { immediate: false }
            }
            Ok(Incoming::Text(_) | Incoming::Control) => {
                reason = "unexpected frame".to_owned();
                Outcome::Resume { immediate: false }
            }
            Err(err) => {
                reason = err.to_string();
                Outcome::Resume { immediate: false }
            }
        };
        if !matches!(outcome, Outcome::Fatal(_)) {
            log::warn!("{reason}; reconnecting");
            self.notify(ShardEvent::Disconnected { reason });
        }
        outcome
    }
}

/// Per-connection facts the loop keeps.
struct Live {
    healthy_since: Option<Instant>,
    resuming: bool,
    replayed: u64,
    /// The URL this connection was made to (without query).
    url: String,
    /// A dispatch waiting for room in the consumer's queue, and its size.
    held: Option<(EventItem, usize)>,
    slice: Slice,
    /// Scheduled beats sent on this connection, and the worst lateness
    /// among them (for the session history).
    beats: u64,
    worst_lateness: Duration,
}

/// Work done since the loop last yielded to the executor.
struct Slice {
    frames: u32,
    started: Instant,
}

impl Slice {
    fn new() -> Slice {
        Slice {
            frames: 0,
            started: Instant::now(),
        }
    }

    fn count(&mut self) {
        if self.frames == 0 {
            self.started = Instant::now();
        }
        self.frames += 1;
    }

    /// Yields to the executor once a slice of work is done, so that other
    /// tasks (and our own timers) run between slices of a burst.
    async fn yield_if_spent(&mut self) {
        if self.frames >= SLICE_FRAMES || (self.frames > 0 && self.started.elapsed() >= SLICE_TIME)
        {
            self.frames = 0;
            future::yield_now().await;
        }
    }
}

enum Wake {
    Beat,
    Permit(IdentifyPermit),
    Room,
    Frame(Result<Incoming, TransportError>),
    Command(String),
    CommandSlot,
    Shutdown,
}
