//! One connection's loop: Hello, the opening (Resume at once, Identify when
//! the identify queue grants it), then the race of the beat timer, incoming
//! frames (or, while the consumer is behind, room in its queue), commands
//! and shutdown.

use super::{unix_ms, Driver, Outcome, LOUD_WAIT};
use crate::heartbeat::{Heartbeat, Reading, Verdict};
use crate::loopwatch;
use crate::protocol::{CloseCode, Command, Frame, Hello, Identify, OpCode, Resume};
use crate::rt::{Slice, Timer};
use crate::shard::history::{EndReason, StartKind};
use crate::shard::identify_queue::IdentifyPermit;
use crate::shard::ratelimit::CommandLimiter;
use crate::shard::session::Session;
use crate::shard::{lock, Dispatch, EventItem, ShardEvent};
use crate::transport::{Connection, Incoming, TransportError};
use futures_lite::future;
use std::time::{Duration, Instant};

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

impl Driver {
    pub(super) async fn run_connection(
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
            slice: Slice::new(SLICE_FRAMES, SLICE_TIME),
            beats: 0,
            worst_lateness: Duration::ZERO,
        };
        self.abandon = false;
        self.send_stalled = false;
        self.end = None;
        let mut outcome = self.drive(&mut connection, session, &mut live).await;
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
            // hand it over before anything of the next connection. When
            // stopping, do not wait for room: a consumer that is done (a
            // bridge shutting down) never makes any, and the set would
            // never end nor the close frame go out.
            let stopping = matches!(outcome, Outcome::Shutdown)
                || self
                    .unless_shutdown(self.shard.events.room_for(bytes))
                    .await
                    .is_none();
            let item = Ok(ShardEvent::Dispatch(dispatch));
            if stopping {
                self.shard.events.push_over(item, bytes);
                if !matches!(outcome, Outcome::Fatal(_)) {
                    outcome = Outcome::Shutdown;
                }
            } else {
                let _ = self.shard.events.try_push(item, bytes);
            }
        }
        // Every close is resumable (4000) unless the caller stops with a
        // code that ends the session (1000/1001, `ShardHandle::close`).
        let close_timeout = if self.abandon {
            Duration::ZERO
        } else {
            self.shard.config.close_timeout
        };
        let code = match outcome {
            Outcome::Shutdown => self.shard.close_code(),
            _ => CloseCode::RESUME,
        };
        connection.close(code.0, close_timeout).await;
        (outcome, live.healthy_since)
    }

    pub(super) async fn drive(
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
            // A gateway that never says Hello holds this for the whole
            // Hello bound: shutdown must not wait for it.
            let message = self
                .unless_shutdown(future::or(
                    async { Some(connection.next_message().await) },
                    async {
                        Timer::at(deadline).await;
                        None
                    },
                ))
                .await;
            let Some(message) = message else {
                self.end_because(EndReason::Shutdown);
                self.pass_start();
                return Outcome::Shutdown;
            };
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
        if self.send_stalled {
            heartbeat.on_zombie();
        }
        self.account = heartbeat.into_account();
        self.status().heartbeat = self.account.clone();
        outcome
    }

    /// Handles frames before Hello: returns Hello, or an outcome for op 7 or
    /// a close, or `None` to keep waiting.
    pub(super) fn pre_hello(
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
    pub(super) fn frame_of(
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
    pub(super) fn end_because(&mut self, reason: EndReason) {
        self.end.get_or_insert(reason);
    }

    pub(super) fn malformed(&self, detail: &str) {
        self.status().malformed_frames += 1;
        log::warn!("skipping a gateway frame: {detail}");
    }

    /// Sends one frame, within [`Driver::send_bound`]: a gateway that
    /// stopped reading fills the socket and the send never finishes, which
    /// makes the connection a zombie even if it keeps sending to us.
    pub(super) async fn send_now(
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
                self.send_stalled = true;
                self.end_because(EndReason::Zombie);
                log::warn!(
                    "a send to the gateway did not finish within {:.1} s: it stopped reading; leaving the connection as a zombie and reconnecting to resume",
                    bound.as_secs_f64()
                );
                self.notify(ShardEvent::Disconnected {
                    reason: "the gateway stopped reading (a send timed out)".into(),
                });
                Err(Outcome::Zombie)
            }
        }
    }

    /// The opening command: Resume, or Identify once the identify queue
    /// grants it.
    pub(super) fn opening(&self, session: Option<&Session>) -> Result<String, Outcome> {
        let config = &self.shard.config;
        let opening = match session {
            Some(session) => Command::Resume(Resume {
                token: config.token.expose().to_owned(),
                session_id: session.session_id.clone(),
                seq: self.last_seq.unwrap_or(session.seq),
            }),
            None => Command::Identify(Identify {
                token: config.token.expose().to_owned(),
                properties: config.properties.clone(),
                compress: None,
                large_threshold: config.large_threshold,
                shard: Some(config.shard),
                presence: Some(config.presence.clone()),
                intents: config.intents,
            }),
        };
        opening.to_json().map_err(|err| {
            log::error!("{err}");
            Outcome::Fatal(CloseCode::DECODE_ERROR)
        })
    }

    /// Sends Identify under `permit` (dropped once it is sent: the bucket's
    /// window runs from here) and counts it against the daily budget.
    pub(super) async fn identify(
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

    pub(super) async fn converse(
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
                            Ok(json) => Wake::Command(json),
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
    pub(super) fn release_held(&self, live: &mut Live, heartbeat: &mut Heartbeat) {
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
    pub(super) fn deliver(&self, dispatch: Dispatch, live: &mut Live, heartbeat: &mut Heartbeat) {
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
    pub(super) async fn catch_up(
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
    pub(super) async fn beat(
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
            // A dead peer never answers a close frame: waiting for it
            // would only delay the resume by the close bound.
            self.abandon = true;
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
            return Err(Outcome::Zombie);
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
}

/// Per-connection facts the loop keeps.
pub(super) struct Live {
    pub(super) healthy_since: Option<Instant>,
    pub(super) resuming: bool,
    pub(super) replayed: u64,
    /// The URL this connection was made to (without query).
    pub(super) url: String,
    /// A dispatch waiting for room in the consumer's queue, and its size.
    pub(super) held: Option<(EventItem, usize)>,
    pub(super) slice: Slice,
    /// Scheduled beats sent on this connection, and the worst lateness
    /// among them (for the session history).
    pub(super) beats: u64,
    pub(super) worst_lateness: Duration,
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
