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

use super::backoff::Backoff;
use super::counts::check_session_start_limit;
use super::history::EndReason;
use super::identify_budget::Pressure;
use super::session::Session;
use super::{lock, max_message_bytes_for, GatewayInfo, Shard, ShardError, ShardEvent, ShardStatus};
use crate::heartbeat::Account;
use crate::protocol::CloseCode;
use crate::protocol::SessionStartLimit;
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
/// How long an identify waits for `GET /gateway/bot` (the identify budget)
/// at least: Discord answers in well under a second.
const GATEWAY_INFO_PATIENCE: Duration = Duration::from_secs(3);
/// Waits at least this long are logged at info level, with the reason
/// (shorter ones at debug level: every wait is logged at its real length).
const LOUD_WAIT: Duration = Duration::from_secs(1);
/// A zombie verdict on a session that was established on its connection
/// reconnects at once — but at most once in this long; a second one sooner
/// takes the backoff. A verdict needs a whole heartbeat interval without an
/// ACK, which Discord's 41 s makes rare; a gateway that establishes every
/// session and then stops answering (with a short interval) could
/// otherwise have us reconnect several times a second.
const ZOMBIE_AT_ONCE_EVERY: Duration = Duration::from_secs(30);

/// How a connection ended.
#[derive(Debug)]
enum Outcome {
    /// Reconnect and resume; `immediate` skips the backoff (clean op 7).
    Resume { immediate: bool },
    /// The peer stopped answering (a zombie verdict, or a send that timed
    /// out): reconnect and resume, at once if the session had been healthy.
    Zombie,
    /// The session is gone: reconnect and identify after `guard` (what the
    /// cause asks: op 9's random storm guard; nothing after a close), plus
    /// a backoff if sessions keep ending so before any READY.
    Reidentify { guard: Duration },
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
    /// Sessions ended before a READY (op 9 `false`, 4007, 4009, ...) since
    /// the last READY: from the second on, `reidentify_backoff` is added.
    reidentifies_since_ready: u32,
    /// The backoff between such repeats; its own, so that the backoff of an
    /// outage (connects refused) never delays the identify once the
    /// gateway answers again. Restarted at every READY.
    reidentify_backoff: Backoff,
    /// When a zombie verdict last reconnected at once.
    last_zombie_at_once: Option<Instant>,
}

/// Logs a wait about to begin: at info level if it is long enough to be
/// noticed, else at debug level.
fn log_wait(wait: Duration, what: std::fmt::Arguments<'_>) {
    if wait >= LOUD_WAIT {
        log::info!("{what}");
    } else {
        log::debug!("{what}");
    }
}

/// Where the day's budget figure came from, for the log.
fn budget_source(from_gateway: bool) -> &'static str {
    if from_gateway {
        ""
    } else {
        " (Discord's figure for most bots: GET /gateway/bot has not given this bot's)"
    }
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
        let reidentify_backoff = shard.config.backoff.restarted();
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
            reidentifies_since_ready: 0,
            reidentify_backoff,
            last_zombie_at_once: None,
        }
    }

    /// A READY: the session got going, so the next op 9 is a first again.
    fn session_ready(&mut self) {
        self.reidentifies_since_ready = 0;
        self.reidentify_backoff = self.shard.config.backoff.restarted();
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
            let session = self.session();
            if session.is_some() {
                if !self.pause(wait).await {
                    return self.stopped();
                }
            } else {
                // An identify follows: GET /gateway/bot (the budget) is
                // asked during the wait, not after it.
                let Some(answer) = self.wait_asking_gateway_info(wait).await else {
                    return self.stopped();
                };
                if let Some(answer) = answer {
                    self.apply_gateway_info(answer);
                }
                if !self.identify_gate().await {
                    return self.stopped();
                }
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
                Outcome::Reidentify { guard } => {
                    self.set_session(None);
                    self.last_seq = None;
                    self.reidentify_wait(guard)
                }
                Outcome::Zombie => self.zombie_wait(healthy_since.is_some()),
                Outcome::Resume { immediate } => self.resume_wait(immediate),
            };
        }
    }

    /// Before resuming after `Outcome::Resume`. Asked to (op 7, op 9
    /// `true`): at once, but only the first time since the last healthy
    /// stretch. A gateway that asks again and again (before any session got
    /// going) would otherwise have us reconnect as fast as the socket
    /// allows: thousands of connections a second.
    fn resume_wait(&mut self, immediate: bool) -> Duration {
        let backoff = &mut self.shard.config.backoff;
        if immediate && backoff.attempts() == 0 {
            backoff.next_delay();
            log::debug!("resuming at once");
            return Duration::ZERO;
        }
        let wait = backoff.next_delay();
        let attempts = backoff.attempts();
        log_wait(
            wait,
            format_args!(
                "reconnecting in {:.1} s (backoff after {attempts} connection failure(s) in a row)",
                wait.as_secs_f64()
            ),
        );
        wait
    }

    /// Before resuming after a zombie verdict (or a send that timed out).
    /// A session that was established on the connection had been healthy:
    /// the path to the gateway broke, not the gateway, so the resume goes
    /// at once (counted as an attempt, so that connects that then fail
    /// back off as usual), at most once per [`ZOMBIE_AT_ONCE_EVERY`]. The
    /// backoff grown by earlier faults would only hold the resume back.
    fn zombie_wait(&mut self, established: bool) -> Duration {
        let now = Instant::now();
        let spaced = self
            .last_zombie_at_once
            .is_none_or(|at| now.saturating_duration_since(at) >= ZOMBIE_AT_ONCE_EVERY);
        if established && spaced {
            self.last_zombie_at_once = Some(now);
            self.shard.config.backoff.next_delay();
            log::info!("reconnecting at once to resume (the session had been healthy)");
            return Duration::ZERO;
        }
        self.resume_wait(false)
    }

    /// Before identifying after the session ended (op 9 `false`, a close
    /// such as 4009). The gateway answered (it sent Hello), so the backoff
    /// of an outage before it has no business here: the first time since
    /// the last READY only `guard` (op 9's storm guard) is waited. Only when
    /// sessions keep ending before any READY is a backoff of its own added
    /// (a gateway closing 4009 after every Hello had us reconnect, and ask
    /// GET /gateway/bot, ~1000 times a second).
    fn reidentify_wait(&mut self, guard: Duration) -> Duration {
        let repeats = self.reidentifies_since_ready;
        self.reidentifies_since_ready = repeats.saturating_add(1);
        // Rare and telling: at info level whatever its length.
        if repeats == 0 {
            log::info!("identifying afresh in {:.1} s", guard.as_secs_f64());
            return guard;
        }
        // At least half the step: full jitter has no floor, and four
        // retries landed within 2 s in one CI run (the storm test's flake);
        // with half, the n-th repeat waits at least 2^(n-1) / 2 s.
        let backoff = self.reidentify_backoff.next_delay_at_least_half();
        let wait = guard + backoff;
        log::info!(
            "identifying afresh in {:.1} s ({:.1} s of it backoff: the session ended before a READY {} times in a row)",
            wait.as_secs_f64(),
            backoff.as_secs_f64(),
            repeats + 1
        );
        wait
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
        self.apply_gateway_info(answer);
        true
    }

    /// Waits `wait` while asking `GET /gateway/bot`, for the answer no
    /// longer than [`GATEWAY_INFO_PATIENCE`] (or `wait`, if longer): a slow
    /// or failing REST endpoint must not hold an identify that the gateway
    /// is ready for (its bound, with retries, is tens of seconds). Without
    /// an answer the identify goes ahead on what is known (the last
    /// answer, the budget's own count). `None` if shut down meanwhile;
    /// `Some(None)` without an answer (or a source to ask).
    async fn wait_asking_gateway_info(
        &self,
        wait: Duration,
    ) -> Option<Option<Result<GatewayInfo, crate::rest::RestError>>> {
        let Some(source) = self.shard.config.gateway_info.clone() else {
            return self.pause(wait).await.then_some(None);
        };
        let patience = wait.max(GATEWAY_INFO_PATIENCE);
        let ask = future::or(async { Some(source().await) }, async {
            Timer::after(patience).await;
            None
        });
        let (_, answer) = self
            .unless_shutdown(future::zip(Timer::after(wait), ask))
            .await?;
        if answer.is_none() {
            log::warn!(
                "GET /gateway/bot did not answer within {:.1} s; identifying on the identify budget as last known",
                patience.as_secs_f64()
            );
        }
        Some(answer)
    }

    /// Takes in an answer of `GET /gateway/bot`.
    fn apply_gateway_info(&mut self, answer: Result<GatewayInfo, crate::rest::RestError>) {
        match answer {
            Ok(info) => {
                if self.shard.config.gateway_url.is_none() {
                    self.base_url = Some(info.url);
                }
                match info.session_start_limit.map(|limit| (limit, check_session_start_limit(&limit))) {
                    Some((limit, Ok(()))) => {
                        self.shard
                            .identify_queue
                            .set_max_concurrency(limit.max_concurrency);
                        self.remote_limit = Some(limit);
                    }
                    // Nothing sized by it, nothing waited on it: the queue
                    // keeps its buckets (one is always safe, only slower)
                    // and the budget its own count.
                    Some((_, Err(why))) => log::error!(
                        "GET /gateway/bot: refusing its session_start_limit: {why}; identifying as if it had not answered"
                    ),
                    None => self.remote_limit = None,
                }
            }
            Err(err) => log::warn!("cannot ask Discord for the gateway and identify budget: {err}"),
        }
    }

    /// Waits as the identify budget requires. False if shut down meanwhile.
    async fn identify_gate(&mut self) -> bool {
        let plan = lock(&self.shard.budget).plan(unix_ms(), self.remote_limit);
        match plan.pressure {
            Pressure::Normal => {}
            Pressure::Low => log::warn!(
                "identify budget low: {} fresh sessions left of {} in Discord's 24 h window{}; waiting {} s before identifying (resume is free, identify is not)",
                plan.remaining,
                plan.total,
                budget_source(self.remote_limit.is_some()),
                plan.wait.as_secs()
            ),
            Pressure::Critical => log::error!(
                "identify budget nearly spent: {} left of {} per 24 h{} (Discord resets the token when it runs out); waiting {} s before identifying. Find out why the bot keeps losing its session.",
                plan.remaining,
                plan.total,
                budget_source(self.remote_limit.is_some()),
                plan.wait.as_secs()
            ),
        }
        self.pause(plan.wait).await
    }
}
