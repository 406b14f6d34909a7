//! The shard's driver: connections one after another — the identify budget
//! and gateway URL before each, the backoff after — until shutdown or a
//! fatal close. One connection's loop is in `connection`, what each frame
//! means in `frames`.
//!
//! Two rules keep the beat punctual under any burst. The loop yields to the
//! executor after a bounded slice of work (frames or time), since a socket
//! with data buffered never makes it wait; and a dispatch that does not fit
//! the consumer's queue is held while the socket goes unread
//! (backpressure) — the beat timer, commands and shutdown are still served,
//! and the time spent not reading is kept out of the zombie verdict (see
//! [`crate::heartbeat::Heartbeat::verdict`]).

mod connection;
mod frames;

use super::history::EndReason;
use super::identify_budget::{Pressure, SessionStartLimit};
use super::session::Session;
use super::{lock, max_message_bytes_for, Shard, ShardError, ShardEvent, ShardStatus};
use crate::heartbeat::Account;
use crate::protocol::CloseCode;
use crate::rest::USER_AGENT;
use crate::rt::Timer;
use crate::transport::{Connection, Limits};
use crate::wire::WireTrace;
use futures_lite::future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Discord's gateway when nothing else is known.
const DEFAULT_GATEWAY: &str = "wss://gateway.discord.gg";
/// After this many failed connects to the resume URL, resume via the base URL.
const RESUME_URL_ATTEMPTS: u32 = 2;
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
    /// The peer is not answering (a zombie verdict, or a send that timed
    /// out): send the close frame if the socket takes it, but do not wait
    /// for the handshake.
    abandon: bool,
    /// A send timed out (a zombie the heartbeat did not see; counted as one).
    send_stalled: bool,
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
            send_stalled: false,
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

    /// `work`'s output, or `None` if shutdown is asked first: every wait
    /// that may last (a backoff, a turn, a handshake, a REST answer, room in
    /// the queue) must not hold up stopping.
    async fn unless_shutdown<T>(&self, work: impl std::future::Future<Output = T>) -> Option<T> {
        future::or(async { Some(work.await) }, async {
            let _ = self.shard.shutdown.recv().await;
            None
        })
        .await
    }

    /// Sleeps for `wait` unless shutdown is asked first (returns false then).
    async fn pause(&self, wait: Duration) -> bool {
        wait.is_zero() || self.unless_shutdown(Timer::after(wait)).await.is_some()
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
                if self.unless_shutdown(order.wait_turn(index)).await.is_none() {
                    return self.stopped();
                }
            }
            let url = match &session {
                Some(s) if self.resume_url_failures < RESUME_URL_ATTEMPTS => {
                    s.resume_gateway_url.clone()
                }
                _ => match self.gateway_url().await {
                    Some(url) => url,
                    None => return self.stopped(),
                },
            };
            let config = &self.shard.config;
            let limits = Limits::message(
                config
                    .max_message_bytes
                    .unwrap_or_else(|| max_message_bytes_for(config.intents)),
            );
            // A gateway that never answers the handshake holds this for the
            // whole connect bound: shutdown must not wait for it. Boxed: the
            // handshake's state (≈ 10 KB with TLS) lives only while
            // connecting; inline it would size every shard's task for good.
            let connect = Box::pin(Connection::connect(
                &url,
                config.compress,
                config.connect_timeout,
                limits,
                USER_AGENT,
                WireTrace::client(Some(config.token.clone())),
            ));
            let Some(connected) = self.unless_shutdown(connect).await else {
                return self.stopped();
            };
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
                    let error = ShardError::fatal(code, self.shard.config.shard);
                    log::error!("{error}");
                    self.shard.events.push_notice(Err(error.clone()));
                    return Err(error);
                }
                // Asked to (op 7, op 9 `true`): at once, but only the first
                // time since the last healthy stretch. A gateway that asks
                // again and again (before any session got going) would
                // otherwise have us reconnect as fast as the socket allows:
                // thousands of connections a second.
                Outcome::Resume { immediate: true }
                    if self.shard.config.backoff.attempts() == 0 =>
                {
                    self.shard.config.backoff.next_delay();
                    Duration::ZERO
                }
                Outcome::Resume { .. } => {
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
                    // As for op 7: `wait` alone the first time, the backoff
                    // too if it happens again before a healthy stretch (a
                    // gateway closing 4009 after every Hello had us
                    // reconnect, and ask GET /gateway/bot, ~1000 times a s).
                    let backoff = &mut self.shard.config.backoff;
                    if backoff.attempts() == 0 {
                        backoff.next_delay();
                        wait
                    } else {
                        wait.max(backoff.next_delay())
                    }
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
        if self.shard.close_code().ends_session() {
            // Closed with 1000/1001 (or stopped before connecting, asked
            // to end the session): nothing left to resume.
            self.set_session(None);
        }
        Ok(())
    }

    /// The base gateway URL: configured, or from `GET /gateway/bot` (cached),
    /// or Discord's well-known one. `None` if shut down meanwhile.
    async fn gateway_url(&mut self) -> Option<String> {
        if let Some(url) = &self.base_url {
            return Some(url.clone());
        }
        if !self.refresh_gateway_info().await {
            return None;
        }
        Some(
            self.base_url
                .clone()
                .unwrap_or_else(|| DEFAULT_GATEWAY.to_owned()),
        )
    }

    /// Asks `GET /gateway/bot` again. False if shut down meanwhile: a hung
    /// or rate-limited REST answer can take its whole bound (15 s, or
    /// longer waiting out a 429), and stopping must not wait for it.
    async fn refresh_gateway_info(&mut self) -> bool {
        let Some(source) = self.shard.config.gateway_info.clone() else {
            return true;
        };
        let Some(answer) = self.unless_shutdown(source()).await else {
            return false;
        };
        match answer {
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
        true
    }

    /// Waits as the identify budget requires. False if shut down meanwhile.
    async fn identify_gate(&mut self) -> bool {
        if !self.refresh_gateway_info().await {
            return false;
        }
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
}
