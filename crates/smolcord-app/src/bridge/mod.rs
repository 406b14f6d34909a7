//! Application, not library API: Discord DMs to a local agent and back.
//!
//! [`Bridge::start`] loads what earlier runs left (access with the restore
//! rule, pairing codes, restart markers, the restart-failure counter, which
//! decides safe mode). [`Bridge::run`] consumes the shard's events on one
//! thread: each message is classified without waiting (module `intake`), queued
//! per channel (one channel in order, channels concurrently), and handled by
//! its channel's worker: access and pairing, voice-note transcription, the
//! agent (or the spool), delivery with DM fallback. A results poller
//! delivers `spool/results/`. Replies go out exactly once as far as Discord
//! allows: on record in the outbox before they are sent, each part under a
//! nonce derived from what it answers (modules `outbox`, `nonce`, `worker`).
//! State goes to disk through [`smolcord::offload`]; the session, status,
//! runtime and directory files are written by coalescing background
//! writers, so no message ever waits for a disk write it does not need.
//!
//! ```no_run
//! # use smolcord::{rest::RestClient, shard::{Shard, ShardConfig}, token::Token, protocol::Intents};
//! # use smolcord_app::{bridge::{self, Bridge, BridgeOutcome}, config::Config, recorder::Recorder};
//! # smol::block_on(async {
//! let config = Config::with_state_dir("/var/lib/smolcord");
//! let token = Token::new("…").unwrap();
//! let mut shard_config = ShardConfig::new(token.clone(), Intents::DIRECT_MESSAGES);
//! shard_config.state = bridge::load_session_state(&config.state_dir).await;
//! let (shard, handle) = Shard::new(shard_config);
//! smol::spawn(shard.run()).detach();
//! let rest = RestClient::new(&config.api_base, token);
//! let bridge = Bridge::start(config, rest, handle, Recorder::disabled()).await?;
//! match bridge.run(std::future::pending()).await? {
//!     BridgeOutcome::RestartRequested => std::process::exit(0),
//!     other => println!("{other:?}"),
//! }
//! # Ok::<(), bridge::BridgeError>(()) });
//! ```

// Layers, bottom to top: a file imports only from its own folder, the
// folders below it and `ctx` (crates/smolcord-app/tests/app/bridge_layers.rs checks it).
pub mod access;
mod ctx;
mod deliver;
mod intake;
mod jobs;
mod report;
pub mod store;
mod work;

pub use crate::status::CountersSnapshot;
pub use access::book::{AccessFile, Role};
pub use access::pairing::{approve_code, Approval, PairError, PairingRules};
pub use intake::dispatch::{BridgeOutcome, StopReason};
pub use jobs::backlog::ReadbackBounds;
pub use jobs::queue::{DROPPABLE_JOBS, MAX_CHANNEL_JOBS, MAX_JOBS};
pub use jobs::tunables::{SpoolRetry, Tunables, DRAIN_BOUND};
pub use report::counters::BridgeCounters;
pub use store::outbox::OUTBOX_DIR;
pub use store::persist::{
    load_session_state, load_session_states, session_path, SessionFile, SESSION_FILE,
};
pub use work::agent::PLACEHOLDER;

use crate::config::Config;
use crate::recorder::Recorder;
use crate::status;
use access::book::Access;
use access::pairing::PairingBook;
use access::restart::{RestartMarker, RuntimeState};
use ctx::Ctx;
use report::reporter::Reporter;
use smol::channel::{self, Receiver, Sender};
use smol::lock::Semaphore;
use smol::LocalExecutor;
use smolcord::offload;
use smolcord::protocol::Snowflake;
use smolcord::rest::RestClient;
use smolcord::shard::ShardSetHandle;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;
use store::directory::ChannelDirectory;
use store::outbox::Outbox;
use store::persist::{Coalescing, Deferred, SessionAndStatus};
use store::spool::Spool;

/// Why the bridge could not start.
#[derive(Debug)]
pub enum BridgeError {
    /// A config value the bridge cannot use.
    Config(String),
    /// State could not be read or written at start-up.
    State(offload::Error),
}

impl fmt::Display for BridgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BridgeError::Config(detail) => write!(f, "bridge config: {detail}"),
            BridgeError::State(e) => write!(f, "bridge state: {e}"),
        }
    }
}

impl std::error::Error for BridgeError {}

impl From<offload::Error> for BridgeError {
    fn from(e: offload::Error) -> Self {
        BridgeError::State(e)
    }
}

/// Asks a running bridge to re-read its access state (SIGHUP).
#[derive(Clone, Debug)]
pub struct ReloadHandle(Sender<()>);

impl ReloadHandle {
    /// Requests a reload; never waits.
    pub fn reload(&self) {
        let _ = self.0.try_send(());
    }
}

/// The bridge, started and ready to run.
pub struct Bridge {
    config: Config,
    tunables: Tunables,
    rest: RestClient,
    shard: ShardSetHandle,
    reporter: Reporter,
    counters: BridgeCounters,
    access: Access,
    pairing: PairingBook,
    runtime: RuntimeState,
    marker: Option<RestartMarker>,
    safe_mode: bool,
    reload_tx: Sender<()>,
    reload_rx: Receiver<()>,
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bridge")
            .field("state_dir", &self.config.state_dir)
            .field("safe_mode", &self.safe_mode)
            .finish_non_exhaustive()
    }
}

fn snowflake(key: &str, value: &str) -> Result<Snowflake, BridgeError> {
    value
        .parse()
        .map_err(|e| BridgeError::Config(format!("{key}: {e}")))
}

impl Bridge {
    /// Loads access (restore from backup rule), restart markers, counters;
    /// bumps the restart-failure counter; decides safe mode. `shard` is one
    /// shard's handle or a set's.
    pub async fn start(
        config: Config,
        rest: RestClient,
        shard: impl Into<ShardSetHandle>,
        recorder: Recorder,
    ) -> Result<Bridge, BridgeError> {
        Bridge::start_with(config, rest, shard, recorder, Tunables::default()).await
    }

    /// [`Bridge::start`] with non-default [`Tunables`].
    pub async fn start_with(
        config: Config,
        rest: RestClient,
        shard: impl Into<ShardSetHandle>,
        recorder: Recorder,
        tunables: Tunables,
    ) -> Result<Bridge, BridgeError> {
        let shard = shard.into();
        if shard.shard(0).is_none() {
            log::warn!(
                "this process runs shards {:?} but not shard 0: Discord sends direct messages to shard 0 only, so it bridges no DMs (guild messages of its shards only)",
                shard.shards().iter().map(|h| h.status().shard[0]).collect::<Vec<_>>()
            );
        }
        let state_dir = config.state_dir.clone();
        offload::create_dir_all(&state_dir).await?;
        offload::create_dir_all(&state_dir.join("tmp")).await?;
        Spool::new(&state_dir).create_dirs().await?;
        Outbox::new(&state_dir).create_dir().await?;

        let config_owner = config
            .owner_id
            .as_deref()
            .map(|id| snowflake("owner_id", id))
            .transpose()?;
        let config_allowed = config
            .allowed_user_ids
            .iter()
            .map(|id| snowflake("allowed_user_ids", id))
            .collect::<Result<BTreeSet<_>, _>>()?;

        // Counted before anything can fail later in this run: a start-up
        // that never completes a turn stays counted.
        let mut runtime = access::restart::read_runtime(&state_dir).await;
        runtime.failed_starts = runtime.failed_starts.saturating_add(1);
        offload::write_json_atomic(&access::restart::runtime_path(&state_dir), &runtime).await?;
        let safe_mode =
            access::restart::safe_mode(runtime.failed_starts, config.safe_mode_after_failures);
        if safe_mode {
            log::warn!(
                "SAFE MODE: {} start-ups in a row without a successful turn (threshold {}); only the owner is answered until one succeeds",
                runtime.failed_starts - 1,
                config.safe_mode_after_failures
            );
        }

        let mut access = Access::new(config_owner, config_allowed);
        let (loaded, bytes) = access::book::load_with_restore(&state_dir).await?;
        access.apply_load(loaded, bytes);
        if safe_mode && access.owner().is_none() {
            log::warn!("SAFE MODE without an owner: nobody will be answered (set owner_id)");
        }
        let pairing = match access::pairing::read_pairing(&state_dir).await {
            Ok(file) => file,
            Err(e) => {
                log::warn!("{e}; starting with no pending pairing codes");
                Default::default()
            }
        };
        let marker = access::restart::read_marker(&state_dir).await;

        let counters = BridgeCounters::default();
        counters.set_safe_mode(safe_mode);
        let (reload_tx, reload_rx) = channel::bounded(1);
        Ok(Bridge {
            reporter: Reporter::new(recorder, counters.clone()),
            counters,
            config,
            tunables,
            rest,
            shard,
            access,
            pairing: PairingBook::new(pairing),
            runtime,
            marker,
            safe_mode,
            reload_tx,
            reload_rx,
        })
    }

    /// The counters (readable while the bridge runs).
    pub fn counters(&self) -> BridgeCounters {
        self.counters.clone()
    }

    /// A handle to ask the running bridge to re-read access state (wire it
    /// to SIGHUP).
    pub fn reload_handle(&self) -> ReloadHandle {
        ReloadHandle(self.reload_tx.clone())
    }

    /// Whether this run is in safe mode.
    pub fn safe_mode(&self) -> bool {
        self.safe_mode
    }

    /// Consumes shard events until `stop` resolves, an owner's `!restart`
    /// (returns [`BridgeOutcome::RestartRequested`] after writing the
    /// markers), or a fatal shard error. Per-channel work runs on its own
    /// `LocalExecutor` inside this future. On the way out: a bounded drain
    /// (what was left is logged) and a final save of session, status,
    /// runtime and directory state. A `stop` is a requested stop: see
    /// [`Bridge::run_until`] for one that says the run failed.
    pub async fn run(self, stop: impl Future<Output = ()>) -> Result<BridgeOutcome, BridgeError> {
        self.run_until(async {
            stop.await;
            StopReason::Requested
        })
        .await
    }

    /// [`Bridge::run`], with `stop` saying why it ended the run: a
    /// [`StopReason::Failed`] stop (a refused token) is not a clean stop, so
    /// the restart-failure counter keeps the start.
    pub async fn run_until(
        self,
        stop: impl Future<Output = StopReason>,
    ) -> Result<BridgeOutcome, BridgeError> {
        let ex: Rc<LocalExecutor<'static>> = Rc::new(LocalExecutor::new());
        let state_dir = self.config.state_dir.clone();
        let debounce = self.tunables.runtime_debounce;
        let (runtime_writer, runtime_task) = Coalescing::new(
            access::restart::runtime_path(&state_dir),
            debounce,
            self.reporter.clone(),
        );
        let (session_writer, session_task) = Coalescing::new(
            store::persist::session_path(&state_dir),
            Duration::ZERO,
            self.reporter.clone(),
        );
        let (status_writer, status_task) = Coalescing::new(
            status::path(&state_dir),
            Duration::ZERO,
            self.reporter.clone(),
        );
        let directory = Rc::new(RefCell::new(ChannelDirectory::default()));
        let (directory_writer, directory_task) = {
            let directory = directory.clone();
            Deferred::new(
                state_dir.join(store::directory::DIRECTORY_FILE),
                self.tunables.directory_debounce,
                self.reporter.clone(),
                move || directory.borrow().snapshot(),
            )
        };
        // Health checks ask the live process (status.sock); without it,
        // status.json is written every heartbeat for them instead.
        let status_live = match status::socket::StatusListener::bind(&state_dir).await {
            Ok(listener) => {
                let (shard, counters) = (self.shard.clone(), self.counters.clone());
                let snapshot = move || {
                    status::StatusSnapshot::capture_set(
                        &shard.statuses(),
                        Some(counters.snapshot()),
                    )
                };
                ex.spawn(smolcord::loopwatch::watch(
                    "bridge-status-socket",
                    listener.serve(snapshot),
                ))
                .detach();
                true
            }
            Err(e) => {
                log::info!(
                    "no status socket in {} ({e}); writing status.json every heartbeat for `smolcord status`",
                    state_dir.display()
                );
                false
            }
        };
        for (name, task) in [
            ("bridge-persist-runtime", boxed(runtime_task)),
            ("bridge-persist-session", boxed(session_task)),
            ("bridge-persist-status", boxed(status_task)),
            ("bridge-persist-directory", boxed(directory_task)),
        ] {
            ex.spawn(smolcord::loopwatch::watch(name, task)).detach();
        }

        let concurrency = self.config.agent_concurrency.max(1);
        let files = store::files::TaskFiles::new(
            &state_dir,
            self.tunables.files_budget,
            self.tunables.files_max_age,
        );
        files.load(std::time::SystemTime::now()).await;
        let access = access::live::AccessBook::new(
            state_dir.clone(),
            self.config.tofu,
            self.tunables.pairing,
            self.access,
            self.pairing,
        );
        let ctx = Rc::new(Ctx {
            spool: Spool::new(&state_dir),
            files,
            outbox: Outbox::new(&state_dir),
            state_dir,
            tunables: self.tunables,
            rest: self.rest,
            reporter: self.reporter,
            counters: self.counters.clone(),
            lifecycle: jobs::lifecycle::Lifecycle::new(self.safe_mode, self.counters.clone()),
            access,
            runtime: store::runtime::RuntimeBook::new(self.runtime, runtime_writer),
            floor: jobs::floor::SequenceFloor::new(),
            queues: jobs::queue::JobQueues::new(self.counters.clone()),
            agent_slots: Semaphore::new(concurrency),
            transcribe_slots: Semaphore::new(self.tunables.transcribe_concurrency.max(1)),
            executor: Rc::downgrade(&ex),
            channels_refused: report::told_once::ToldOnce::default(),
            config: self.config,
        });
        let (poll_stop_tx, poll_stop_rx) = channel::bounded::<()>(1);
        {
            let ctx = ctx.clone();
            ex.spawn(smolcord::loopwatch::watch(
                "bridge-results",
                intake::results::poll(ctx, poll_stop_rx),
            ))
            .detach();
        }
        let writers = intake::dispatch::Writers {
            session_and_status: SessionAndStatus::new(session_writer, status_writer, status_live),
            directory: directory_writer,
        };
        let main = intake::dispatch::Loop {
            ctx: ctx.clone(),
            shard: self.shard,
            writers,
            directory,
            marker: self.marker,
            reload: self.reload_rx,
            safe_mode_told: false,
            readback: intake::readback::Readback::default(),
            drop_log: report::throttle::Throttle::new(1, intake::dispatch::DROP_LOG_INTERVAL),
            interactions: Default::default(),
            commands_registering: false,
        };
        let outcome = ex
            .run(smolcord::loopwatch::watch(
                "bridge-dispatch",
                main.run(stop, poll_stop_tx),
            ))
            .await;
        // Dropping the executor cancels what the drain left (their
        // subprocesses are killed by offload).
        drop(ctx);
        drop(ex);
        Ok(outcome)
    }
}

fn boxed(task: impl Future<Output = ()> + 'static) -> std::pin::Pin<Box<dyn Future<Output = ()>>> {
    Box::pin(task)
}
