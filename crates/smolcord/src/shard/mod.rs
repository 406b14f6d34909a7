//! shard: one gateway session that stays online.
//!
//! [`Shard::new`] gives a driver ([`Shard::run`], spawn it) and a
//! [`ShardHandle`] to receive events and send commands. The driver
//! connects, identifies or resumes, hands every dispatch over in order and
//! exactly once (replays after a resume are dropped, gaps are logged),
//! heartbeats on a fixed schedule, and reconnects with jittered backoff —
//! resuming whenever Discord allows it, because a fresh identify waits for
//! its turn in the identify queue ([`identify_queue`]) and spends the daily
//! budget ([`identify_budget`]).
//!
//! Once the gateway answers again (a Hello arrived), nothing of an outage's
//! backoff is left in the way: op 9 `false` is followed by a fresh identify
//! within [`ShardConfig::invalid_session_wait`] (a storm guard; Discord's
//! docs say to reconnect and identify), with a backoff only when sessions
//! keep ending before a READY; a zombie verdict on a session that had been
//! healthy reconnects to resume at once.
//!
//! The handle's stream carries more than dispatches: heartbeat ACKs and
//! disconnects arrive in it too, so a consumer loops over every event. To
//! resume after a restart, persist [`ShardStatus::resume_state`] (the seq of
//! the last dispatch taken, not the last received) and pass it back as
//! [`ShardConfig::state`]; stop with [`ShardHandle::shutdown`] (close 4000,
//! resumable) or [`ShardHandle::close`] with [`CloseCode::NORMAL`] (1000:
//! the session ends and the bot shows offline at once).
//!
//! This example runs against the simulator (the `smolcord-sim` crate); point
//! `gateway_url` at Discord (or leave it `None`) and give a real token for
//! the real thing.
//!
//! ```
//! use smolcord::protocol::Intents;
//! use smolcord::shard::{Shard, ShardConfig, ShardError, ShardEvent};
//! use smolcord_sim::{SimConfig, Simulator};
//!
//! let sim = Simulator::start(SimConfig::default()).unwrap();
//! let mut config = ShardConfig::new(sim.config().token.clone(), Intents::DIRECT_MESSAGES);
//! config.gateway_url = Some(sim.gateway_url());
//! let (shard, handle) = Shard::new(config);
//! let ex = smol::LocalExecutor::new();
//! let driver = ex.spawn(shard.run());
//! smolcord::rt::block_on(ex.run(async {
//!     loop {
//!         match handle.next_event().await {
//!             Ok(ShardEvent::Dispatch(dispatch)) => {
//!                 println!("{} #{}", dispatch.name, dispatch.seq);
//!                 if dispatch.name == "READY" {
//!                     sim.send_dm(42, "alice", "hello");
//!                 }
//!                 if dispatch.name == "MESSAGE_CREATE" {
//!                     break;
//!                 }
//!             }
//!             // ACKs and disconnects come through the same stream.
//!             Ok(ShardEvent::Heartbeat(beat)) => println!("ACK, rtt {:?}", beat.rtt),
//!             Ok(ShardEvent::Disconnected { reason }) => println!("reconnecting: {reason}"),
//!             // `ShardEvent` is non-exhaustive: a kind added later lands here.
//!             Ok(_) => {}
//!             Err(ShardError::Fatal { message, .. }) => panic!("refused for good: {message}"),
//!             Err(other) => panic!("{other}"),
//!         }
//!     }
//!     let saved = handle.status().resume_state(); // persist this for a restart
//!     assert!(saved.session.is_some());
//!     handle.shutdown();
//!     driver.await.unwrap();
//! }));
//! ```

mod backoff;
pub mod counts;
mod driver;
pub mod history;
pub mod identify_budget;
pub mod identify_queue;
mod queue;
pub mod ratelimit;
pub mod session;
mod set;

/// Transport compression, re-exported for [`ShardConfig::compress`].
pub use crate::transport::Compression;
pub use backoff::Backoff;
pub use history::{EndReason, SessionHistory, StartKind};
pub use identify_budget::IdentifyBudget;
pub use identify_queue::{IdentifyPermit, IdentifyQueue, LocalIdentifyQueue, RemoteIdentifyQueue};
pub use queue::QueueLimits;
pub use session::{Session, SessionState};
pub use set::{ShardRange, ShardSet, ShardSetHandle};

use crate::heartbeat::{Account, BeatRecord};
use crate::protocol::{
    CloseCode, Command, CommandError, ConnectionProperties, DecodeError, Frame, Intents,
    PresenceUpdate, User,
};
use crate::token::Token;
use serde::de::DeserializeOwned;
use serde::Serialize;
use smol::channel::{self, Receiver, Sender};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

/// Where to connect, and the identify budget, as `GET /gateway/bot` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayInfo {
    /// The gateway URL.
    pub url: String,
    /// The identify budget, if the source knows it.
    pub session_start_limit: Option<crate::protocol::SessionStartLimit>,
}

/// A boxed future, as returned by a [`GatewayInfoSource`].
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Asks for the gateway URL and identify budget: `GET /gateway/bot`
/// ([`gateway_info_from`]), or a stand-in that answers as it would.
pub type GatewayInfoSource =
    Arc<dyn Fn() -> BoxFuture<Result<GatewayInfo, crate::rest::RestError>> + Send + Sync>;

/// `GET /gateway/bot` through `rest` as a shard's [`GatewayInfoSource`]:
/// where to connect and the identify budget, asked before each fresh
/// identify.
pub fn gateway_info_from(rest: &crate::rest::RestClient) -> GatewayInfoSource {
    let rest = rest.clone();
    Arc::new(move || {
        let rest = rest.clone();
        Box::pin(async move {
            let bot = rest.gateway_bot().await?;
            Ok(GatewayInfo {
                url: bot.url,
                session_start_limit: Some(bot.session_start_limit),
            })
        })
    })
}

/// How a shard connects and behaves.
#[derive(Clone)]
pub struct ShardConfig {
    /// The bot token.
    pub token: Token,
    /// Intents to identify with.
    pub intents: Intents,
    /// `[shard_id, shard_count]`.
    pub shard: [u32; 2],
    /// The gateway URL; `None` asks `gateway_info`, then falls back to
    /// `wss://gateway.discord.gg`.
    pub gateway_url: Option<String>,
    /// Source of `GET /gateway/bot` (URL and identify budget), if any.
    pub gateway_info: Option<GatewayInfoSource>,
    /// Transport compression to ask for.
    pub compress: Compression,
    /// Identify's `large_threshold`.
    pub large_threshold: Option<u8>,
    /// Identify's `properties` (operating system, library name).
    pub properties: ConnectionProperties,
    /// Presence set in Identify and after READY/RESUMED.
    pub presence: PresenceUpdate,
    /// State restored from disk (session to resume, identify history).
    pub state: SessionState,
    /// A beat later than this logs a warning.
    pub heartbeat_warn: Duration,
    /// Reconnect backoff.
    pub backoff: Backoff,
    /// Bound on connecting (TCP + TLS + WebSocket handshake).
    pub connect_timeout: Duration,
    /// Bound on waiting for Hello after connecting.
    pub hello_timeout: Duration,
    /// Bound on the close handshake (a zombied peer never answers).
    pub close_timeout: Duration,
    /// Random wait before identifying after op 9 `false`: 1–3 s. Discord's
    /// current docs say only to reconnect and identify
    /// (<https://discord.com/developers/docs/events/gateway#resuming>); older ones asked
    /// for a random 1–5 s, which is still a sensible guard against every
    /// client of a restarted gateway identifying in the same instant. 3 s
    /// at most keeps a comeback (first Hello to READY) within a few
    /// seconds; the identify queue spaces identifies by Discord's limit
    /// anyway. A backoff is added only when sessions keep ending before
    /// any READY — never the backoff of the outage before the Hello.
    pub invalid_session_wait: (Duration, Duration),
    /// How many dispatches may wait for the consumer; beyond that the shard
    /// stops reading the socket until there is room (backpressure).
    pub queue: QueueLimits,
    /// Largest gateway message accepted; `None` picks by intents
    /// ([`max_message_bytes_for`]).
    pub max_message_bytes: Option<usize>,
    /// Bound on one send (a heartbeat, a command). A send that takes longer
    /// means the gateway stopped reading: the connection is left as a
    /// zombie. Capped at the heartbeat interval.
    pub send_timeout: Duration,
    /// Grants fresh identifies (resumes never ask). `None`: a queue of this
    /// shard's own ([`LocalIdentifyQueue`]); a [`ShardSet`] shares one among
    /// its shards; [`RemoteIdentifyQueue`] shares one among processes.
    pub identify_queue: Option<Arc<dyn IdentifyQueue>>,
    /// Discord's identify window per `max_concurrency` bucket (5 s; a
    /// simulator may use less).
    pub identify_window: Duration,
}

/// The default message cap for `intents`.
///
/// Without guild state (GUILDS, GUILD_MEMBERS, GUILD_PRESENCES) the largest
/// things Discord sends are READY (at most 2 500 unavailable-guild stubs of
/// ~40 bytes per shard: ~100 KiB) and MESSAGE_CREATE (2 000–4 000 chars of
/// content, 6 000 of embeds, attachments, components and a referenced
/// message: tens of KiB), so 1 MiB is ten times what a DM bridge sees. With
/// guild state a GUILD_CREATE carries every channel, role, emoji, thread,
/// voice state and (up to `large_threshold`) member and presence of a
/// guild: megabytes for large guilds, hence 16 MiB (tungstenite's own frame
/// default).
pub fn max_message_bytes_for(intents: Intents) -> usize {
    let guild_state = [
        Intents::GUILDS,
        Intents::GUILD_MEMBERS,
        Intents::GUILD_PRESENCES,
    ];
    if guild_state.iter().any(|&i| intents.contains(i)) {
        16 << 20
    } else {
        1 << 20
    }
}

impl ShardConfig {
    /// Checks what Discord would refuse, or what cannot work, before any
    /// connection: [`Shard::run`] stops with the error at once. The
    /// checks follow Discord's Identify structure
    /// (<https://discord.com/developers/docs/events/gateway-events#identify-identify-structure>).
    pub fn validate(&self) -> Result<(), ShardError> {
        let invalid = |field, why: String| Err(ShardError::InvalidConfig { field, why });
        if let Some(threshold) = self.large_threshold {
            if !(50..=250).contains(&threshold) {
                return invalid(
                    "large_threshold",
                    format!("is {threshold}; Discord accepts 50-250"),
                );
            }
        }
        let [id, count] = self.shard;
        if count == 0 || id >= count {
            return invalid(
                "shard",
                format!("is [{id}, {count}]; the id must be below a count of at least 1"),
            );
        }
        if let Some(url) = &self.gateway_url {
            if !(url.starts_with("ws://") || url.starts_with("wss://")) {
                return invalid("gateway_url", "must start with ws:// or wss://".to_owned());
            }
        }
        for (field, value) in [
            ("connect_timeout", self.connect_timeout),
            ("hello_timeout", self.hello_timeout),
            ("send_timeout", self.send_timeout),
        ] {
            if value.is_zero() {
                return invalid(field, "is zero: nothing could finish".to_owned());
            }
        }
        Ok(())
    }

    /// Defaults for one shard with `intents`.
    pub fn new(token: Token, intents: Intents) -> ShardConfig {
        ShardConfig {
            token,
            intents,
            shard: [0, 1],
            gateway_url: None,
            gateway_info: None,
            compress: Compression::None,
            large_threshold: None,
            properties: ConnectionProperties::default(),
            presence: PresenceUpdate::online(),
            state: SessionState::default(),
            heartbeat_warn: Duration::from_secs(1),
            backoff: Backoff::default(),
            connect_timeout: Duration::from_secs(10),
            hello_timeout: Duration::from_secs(30),
            close_timeout: Duration::from_secs(1),
            invalid_session_wait: (Duration::from_secs(1), Duration::from_secs(3)),
            queue: QueueLimits::default(),
            max_message_bytes: None,
            send_timeout: Duration::from_secs(10),
            identify_queue: None,
            identify_window: identify_budget::CONCURRENCY_WINDOW,
        }
    }
}

impl fmt::Debug for ShardConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardConfig")
            .field("token", &self.token)
            .field("intents", &self.intents)
            .field("shard", &self.shard)
            .field("gateway_url", &self.gateway_url)
            .field("compress", &self.compress)
            .finish_non_exhaustive()
    }
}

/// A dispatch event (op 0), READY and RESUMED included.
#[derive(Debug)]
pub struct Dispatch {
    /// The event name (`t`).
    pub name: String,
    /// The sequence number (`s`).
    pub seq: u64,
    frame: Frame,
    /// Which session of this shard it came from (one more per READY), so
    /// [`ShardStatus::resume_state`] never mixes one session's seq with
    /// another's id.
    generation: u64,
}

impl Dispatch {
    /// Decodes the payload.
    pub fn data<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        self.frame.data()
    }

    /// The raw JSON payload.
    pub fn raw_data(&self) -> &str {
        self.frame.raw_data()
    }
}

/// What a shard reports.
#[derive(Debug)]
#[non_exhaustive]
pub enum ShardEvent {
    /// A dispatch, in order, exactly once.
    Dispatch(Dispatch),
    /// A heartbeat was acknowledged (its record has lateness and RTT).
    Heartbeat(BeatRecord),
    /// The connection ended and the shard is reconnecting.
    Disconnected {
        /// Why, readably.
        reason: String,
    },
}

/// Why a shard stopped for good.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardError {
    /// The gateway closed with a code that needs the operator.
    Fatal {
        /// The close code.
        code: u16,
        /// What it means and what to do.
        message: String,
    },
    /// The shard was shut down (or its driver dropped).
    Stopped,
    /// A [`ShardConfig`] field Discord would refuse (or that cannot work),
    /// found before connecting.
    InvalidConfig {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        why: String,
    },
    /// A command could not be encoded (too large, or a reserved raw opcode).
    Command(CommandError),
}

impl ShardError {
    /// `code` closed shard `[id, count]`. The message names the shard: in
    /// a set one shard's refusal stops them all, and "invalid shard" alone
    /// does not say which of them to look at.
    fn fatal(code: CloseCode, [id, count]: [u32; 2]) -> ShardError {
        let advice = code.advice().unwrap_or("see Discord's close code table");
        ShardError::Fatal {
            code: code.0,
            message: format!("{code} on shard {id} of {count}: {advice}"),
        }
    }
}

impl fmt::Display for ShardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardError::Fatal { message, .. } => {
                write!(f, "gateway closed the connection: {message}")
            }
            ShardError::Stopped => f.write_str("the shard has stopped"),
            ShardError::InvalidConfig { field, why } => {
                write!(f, "invalid shard configuration: `{field}` {why}")
            }
            ShardError::Command(detail) => write!(f, "cannot send gateway command: {detail}"),
        }
    }
}

impl std::error::Error for ShardError {}

/// What a shard knows about itself, for status snapshots.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ShardStatus {
    /// `[shard_id, shard_count]`.
    pub shard: [u32; 2],
    /// Session and identify history as the shard knows them: the seq is the
    /// last dispatch *received*, which may still wait in the queue. Persist
    /// [`ShardStatus::resume_state`] instead.
    pub state: SessionState,
    /// Fresh sessions started (READY) by this process.
    pub sessions_started: u64,
    /// Successful resumes (RESUMED) by this process.
    pub resumes: u64,
    /// Whether a session is live right now.
    pub connected: bool,
    /// The bot user, from READY.
    pub user: Option<User>,
    /// Heartbeat interval of the current connection, ms.
    pub heartbeat_interval_ms: Option<u64>,
    /// The heartbeat account.
    pub heartbeat: Account,
    /// Last READY.
    pub last_ready: Option<SystemTime>,
    /// Last RESUMED.
    pub last_resumed: Option<SystemTime>,
    /// Last heartbeat ACK.
    pub last_ack: Option<SystemTime>,
    /// Dispatches dropped as replays of ones already delivered.
    pub duplicates_dropped: u64,
    /// Sequence gaps seen (events never received).
    pub gaps: u64,
    /// Frames that could not be decoded (logged and skipped).
    pub malformed_frames: u64,
    /// Sessions begun (READY) since the shard was made; dispatches carry it.
    #[serde(skip)]
    generation: u64,
    /// The seq of the current session's READY.
    #[serde(skip)]
    ready_seq: u64,
    /// `(generation, seq)` of the last dispatch the consumer took.
    #[serde(skip)]
    taken: Option<(u64, u64)>,
}

impl ShardStatus {
    /// The state to persist for a resume after a restart: the session with
    /// the seq of the last dispatch the consumer took ([`ShardHandle::next_event`]
    /// or [`ShardSetHandle::next_event`]), so a restart resumes from the
    /// first event it never saw; events still queued are replayed, not lost.
    ///
    /// "Took" is not "finished": a consumer that hands dispatches to other
    /// tasks must persist only a seq below every one still in hand (the
    /// bridge keeps such a floor, `bridge::persist::SeqFloor`).
    pub fn resume_state(&self) -> SessionState {
        let mut state = self.state.clone();
        if let Some(session) = state.session.as_mut() {
            let taken = match self.taken {
                Some((generation, seq)) if generation == self.generation => seq,
                // Nothing of this session taken yet: from its READY on.
                _ => self.ready_seq,
            };
            session.seq = session.seq.min(taken);
        }
        state
    }

    /// The consumer took `dispatch`.
    fn took(&mut self, dispatch: &Dispatch) {
        self.taken = Some((dispatch.generation, dispatch.seq));
    }

    /// READY with `seq`: a new session; returns its generation.
    pub(crate) fn begin_session(&mut self, seq: u64) -> u64 {
        self.generation += 1;
        self.ready_seq = seq;
        self.generation
    }

    /// The generation dispatches of the current session carry.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }
}

type EventItem = Result<ShardEvent, ShardError>;

/// The consumer's side of a shard.
#[derive(Clone)]
pub struct ShardHandle {
    events: queue::Consumer,
    /// Commands as their JSON: the driver sends nothing else, and a slot
    /// of a `String` instead of `(Command, String)` keeps the 64 slots,
    /// allocated up front per shard, at 2 KiB instead of 14.
    commands: Sender<String>,
    shutdown: Sender<()>,
    close_code: Arc<AtomicU16>,
    status: Arc<Mutex<ShardStatus>>,
    /// The shard's id (`status.shard[0]`, fixed at construction), read
    /// without the lock: a set looks a handle up by it for every event.
    id: u32,
}

impl fmt::Debug for ShardHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `try_lock`: a Debug print never waits for the driver.
        let shard = self.status.try_lock().map(|status| status.shard).ok();
        f.debug_struct("ShardHandle")
            .field("shard", &shard)
            .finish_non_exhaustive()
    }
}

impl ShardHandle {
    /// The next event. `Err(ShardError::Fatal)` once if the gateway refused
    /// us for good; `Err(ShardError::Stopped)` after the driver ended.
    pub async fn next_event(&self) -> Result<ShardEvent, ShardError> {
        match self.events.recv().await {
            Some((_, item)) => {
                if let Ok(ShardEvent::Dispatch(dispatch)) = &item {
                    self.took(dispatch);
                }
                item
            }
            None => Err(ShardError::Stopped),
        }
    }

    /// Notes that the consumer took `dispatch` ([`ShardStatus::resume_state`]).
    pub(crate) fn took(&self, dispatch: &Dispatch) {
        lock(&self.status).took(dispatch);
    }

    /// Dispatches waiting for [`ShardHandle::next_event`] right now (at most
    /// [`ShardConfig::queue`]'s `max_events`).
    pub fn queued_events(&self) -> usize {
        self.events.queued()
    }

    /// Queues a gateway command. Refuses one over 4096 bytes at once. It is
    /// sent as the 120-per-60 s limit allows, after any due heartbeat.
    pub async fn send(&self, command: Command) -> Result<(), ShardError> {
        let json = command.to_json().map_err(ShardError::Command)?;
        self.commands
            .send(json)
            .await
            .map_err(|_| ShardError::Stopped)
    }

    /// Asks the driver to close with 4000 and stop: the session stays
    /// resumable for a few minutes, so a restart that saved
    /// [`ShardStatus::resume_state`] resumes it (and the bot stays shown
    /// online meanwhile). Same as `close(CloseCode::RESUME)`.
    pub fn shutdown(&self) {
        self.close(CloseCode::RESUME);
    }

    /// Asks the driver to close with `code` and stop. [`CloseCode::NORMAL`]
    /// (1000) ends the session: the bot shows offline at once and the
    /// shard forgets the session, so what is persisted afterwards starts a
    /// fresh one. Any other code keeps it resumable ([`ShardHandle::shutdown`]).
    pub fn close(&self, code: CloseCode) {
        self.close_code.store(code.0, Ordering::Relaxed);
        let _ = self.shutdown.try_send(());
    }

    /// A snapshot of the shard's status.
    pub fn status(&self) -> ShardStatus {
        lock(&self.status).clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Updates are plain field writes; a poisoned lock holds consistent data.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// An in-process identify queue that remembers the last identify of a
/// previous run (a crash loop must not identify every second).
fn local_queue(config: &ShardConfig, history: &IdentifyBudget) -> LocalIdentifyQueue {
    let queue = LocalIdentifyQueue::new(config.identify_window);
    let now_ms = SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    match history.last() {
        Some(last) if now_ms.saturating_sub(last) < config.identify_window.as_millis() as u64 => {
            let ago = Duration::from_millis(now_ms.saturating_sub(last));
            queue.after_identify_at(std::time::Instant::now() - ago)
        }
        _ => queue,
    }
}

/// The identify history a set of shards shares (one daily budget per bot).
pub(crate) type SharedBudget = Arc<Mutex<IdentifyBudget>>;

/// The driver of one gateway session. Run it with [`Shard::run`].
pub struct Shard {
    config: ShardConfig,
    budget: SharedBudget,
    identify_queue: Arc<dyn IdentifyQueue>,
    events: queue::Producer,
    commands: Receiver<String>,
    shutdown: Receiver<()>,
    /// The code the close at shutdown uses ([`ShardHandle::close`]).
    close_code: Arc<AtomicU16>,
    /// For a set to stop its other shards when one fails for good.
    shutdown_tx: Sender<()>,
    /// In a set: the start order and this shard's place in it.
    start: Option<(Arc<set::StartOrder>, usize)>,
    status: Arc<Mutex<ShardStatus>>,
}

impl fmt::Debug for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shard")
            .field("shard", &self.config.shard)
            .finish_non_exhaustive()
    }
}

impl Shard {
    /// A driver and its handle.
    pub fn new(config: ShardConfig) -> (Shard, ShardHandle) {
        let (events, consumer) = queue::queue(config.queue, config.shard[0]);
        let budget = Arc::new(Mutex::new(config.state.identifies.clone()));
        let identify_queue = match &config.identify_queue {
            Some(queue) => queue.clone(),
            None => Arc::new(local_queue(&config, &config.state.identifies)),
        };
        Shard::with_parts(config, budget, identify_queue, events, consumer)
    }

    /// A driver sharing a set's queue, identify budget and identify queue.
    pub(crate) fn with_parts(
        config: ShardConfig,
        budget: SharedBudget,
        identify_queue: Arc<dyn IdentifyQueue>,
        events: queue::Producer,
        consumer: queue::Consumer,
    ) -> (Shard, ShardHandle) {
        let (command_tx, command_rx) = channel::bounded(64);
        let (shutdown_tx, shutdown_rx) = channel::bounded(1);
        let mut state = config.state.clone();
        // A session left open on disk belonged to a process that is gone.
        state.history.close_unrecorded();
        let status = Arc::new(Mutex::new(ShardStatus {
            shard: config.shard,
            state,
            ..ShardStatus::default()
        }));
        let close_code = Arc::new(AtomicU16::new(CloseCode::RESUME.0));
        let id = config.shard[0];
        let shard = Shard {
            config,
            budget,
            identify_queue,
            events,
            commands: command_rx,
            shutdown: shutdown_rx,
            close_code: close_code.clone(),
            shutdown_tx: shutdown_tx.clone(),
            start: None,
            status: status.clone(),
        };
        let handle = ShardHandle {
            events: consumer,
            commands: command_tx,
            shutdown: shutdown_tx,
            close_code,
            status,
            id,
        };
        (shard, handle)
    }

    /// The code the caller asked to close with ([`ShardHandle::close`]).
    fn close_code(&self) -> CloseCode {
        CloseCode(self.close_code.load(Ordering::Relaxed))
    }

    fn shutdown_sender(&self) -> Sender<()> {
        self.shutdown_tx.clone()
    }

    /// Runs until shut down (`Ok`) or refused for good (`Err`, also sent to
    /// the handle as the last event).
    pub async fn run(self) -> Result<(), ShardError> {
        if let Err(error) = self.config.validate() {
            log::error!("shard {}: {error}", self.config.shard[0]);
            self.events.push_notice(Err(error.clone()));
            return Err(error);
        }
        driver::Driver::new(self).run().await
    }
}
