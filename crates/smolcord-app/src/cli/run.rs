//! `smolcord run`: the bridge against Discord (or any gateway URL), with
//! signals: SIGINT/SIGTERM drain and stop (a second one, clearly later,
//! exits at once), SIGHUP re-reads access state. A token that Discord's
//! REST API refuses stops it with [`FATAL_EXIT_CODE`].

use super::signals::{shutdown_signals, SignalRequest, SignalStream, StopAction, StopRequests};
use super::token_check;
use crate::bridge::{self, Bridge, BridgeOutcome, SessionFile, StopReason, Tunables};
use crate::config::{Config, Env};
use crate::recorder::{Recorder, RecorderConfig};
use crate::status::{self, StatusSnapshot, StopCause};
use futures_lite::future;
use smol::LocalExecutor;
use smolcord::loopwatch;
use smolcord::rest::RestClient;
use smolcord::rt::Timer;
use smolcord::shard::{
    RemoteIdentifyQueue, ShardConfig, ShardError, ShardRange, ShardSet, ShardSetHandle,
};
use smolcord::token::Token;
use std::cell::{Cell, RefCell};
use std::ops::RangeInclusive;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Exit code after an owner's `!restart`: non-zero, so a supervisor with
/// `Restart=on-failure` starts us again (EX_TEMPFAIL).
pub const RESTART_EXIT_CODE: u8 = 75;
/// Exit code when Discord refused us for good (bad token, intents, shard;
/// from the gateway or the start-up token check): a restart cannot fix it,
/// so a supervisor should not retry (systemd: `RestartPreventExitStatus=78`;
/// EX_CONFIG).
pub const FATAL_EXIT_CODE: u8 = 78;
/// Bound on the gateway's close handshake at shutdown.
const SHARD_STOP_BOUND: Duration = Duration::from_secs(2);

/// Exit code when another smolcord already runs on the state dir (it holds
/// the dir's lock): this one did nothing (EX_CANTCREAT).
pub const STATE_DIR_LOCKED_EXIT_CODE: u8 = 73;

/// Reads config and token, then runs the bridge until a signal (or until
/// the start-up token check gets a 401). The signals are watched before
/// anything is read: a stop at any stage of the start (a slow `GET
/// /gateway/bot`, a stalled disk) exits at once.
pub async fn run(config: Option<&Path>, env: Env<'_>) -> Result<ExitCode, String> {
    let signals = shutdown_signals().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let running: RefCell<Option<bridge::ReloadHandle>> = RefCell::new(None);
    let (drain_tx, drain_rx) = smol::channel::bounded::<()>(1);
    let (abort_tx, abort_rx) = smol::channel::bounded::<()>(1);
    let started = start_and_run(config, env, &running, drain_rx);
    let outcome = future::or(
        future::or(started, async {
            let _ = abort_rx.recv().await;
            log::info!("stop signal during the start: exiting before the bridge runs");
            Ok(ExitCode::SUCCESS)
        }),
        async {
            watch_signals(signals, &running, drain_tx, abort_tx).await;
            unreachable!("the signal watch never ends")
        },
    );
    outcome.await
}

/// The start (config, lock, token, the bridge's own start) and the run.
async fn start_and_run(
    config: Option<&Path>,
    env: Env<'_>,
    running: &RefCell<Option<bridge::ReloadHandle>>,
    drain: smol::channel::Receiver<()>,
) -> Result<ExitCode, String> {
    let config = Config::load(config, env).await.map_err(|e| e.to_string())?;
    // Held until the process exits: one bridge per state dir.
    let _lock = match smolcord::offload::lock_dir(&config.state_dir).await {
        Ok(lock) => lock,
        Err(e @ smolcord::offload::Error::Locked { .. }) => {
            eprintln!("smolcord: {e}");
            return Ok(ExitCode::from(STATE_DIR_LOCKED_EXIT_CODE));
        }
        Err(e) => return Err(format!("cannot lock the state dir: {e}")),
    };
    bridge::store::state_files::check(&config.state_dir)
        .await
        .map_err(|e| format!("{e}; smolcord keeps its state files itself: move it away"))?;
    if let Some(file) = &config.extra_ca_file {
        smolcord::transport::tls::load_extra_roots(file)
            .await
            .map_err(|e| format!("extra_ca_file (or SMOLCORD_CA_FILE): {e}"))?;
    }
    // A command whose program does not exist stops the start, naming the
    // key, rather than failing the first message that needs it.
    for (key, argv) in [
        ("agent_cmd", &config.agent_cmd),
        ("transcribe_cmd", &config.transcribe_cmd),
        ("dm_fallback_cmd", &config.dm_fallback_cmd),
    ] {
        if let Some(program) = argv.as_ref().and_then(|argv| argv.first()) {
            smolcord::offload::find_program(program)
                .await
                .map_err(|why| format!("{key}: {why}"))?;
        }
    }
    let token = config
        .token(env)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no token: set DISCORD_TOKEN (or `token_file` in the config)")?;
    let check_rest = RestClient::new(&config.api_base, token.clone());
    let channel_content = config
        .channels
        .iter()
        .any(|channel| !channel.mention || channel.thread);
    let refused = Cell::new(None);
    let outcome = run_bridge(
        config,
        token,
        Tunables::default(),
        |reload| {
            // From here a stop drains the running bridge.
            *running.borrow_mut() = Some(reload);
            future::pending()
        },
        // Runs beside the bridge: a refused token stops it like a signal
        // would (drain, save), and the exit code says why.
        future::or(
            async {
                let _ = drain.recv().await;
                StopReason::Requested
            },
            async {
                match token_check::refused(&check_rest).await {
                    Some(why) => {
                        log::error!("{why}; stopping");
                        refused.set(Some(why));
                        // Not a clean stop: the start failed.
                        StopReason::Failed
                    }
                    None => future::pending().await,
                }
            },
        ),
    )
    .await?;
    if let Some(why) = refused.take() {
        eprintln!("smolcord: {why}");
        return Ok(ExitCode::from(FATAL_EXIT_CODE));
    }
    Ok(exit_code(outcome, channel_content))
}

/// SIGINT/SIGTERM and SIGHUP, from the first line of `run` on: before the
/// bridge runs, a stop ends the start (`abort`); once it runs (`running`
/// holds its reload handle), a stop drains it and a second one exits.
async fn watch_signals(
    mut signals: SignalStream,
    running: &RefCell<Option<bridge::ReloadHandle>>,
    drain: smol::channel::Sender<()>,
    abort: smol::channel::Sender<()>,
) {
    let mut stops = StopRequests::default();
    loop {
        let request = signals.next().await;
        let reload = running.borrow().clone();
        match (request, reload) {
            (SignalRequest::Reload, Some(reload)) => {
                log::info!("SIGHUP: re-reading access state");
                reload.reload();
            }
            (SignalRequest::Reload, None) => {
                log::info!("SIGHUP during the start: the state is being read anyway")
            }
            (SignalRequest::Stop, reload) => match stops.on_stop(Instant::now()) {
                StopAction::Drain if reload.is_none() => {
                    let _ = abort.try_send(());
                }
                StopAction::Drain => {
                    log::info!("stopping: draining work in flight (signal again to exit at once)");
                    let _ = drain.try_send(());
                }
                StopAction::Duplicate => {
                    log::info!("the same stop request delivered again; ignored")
                }
                StopAction::ExitNow => {
                    log::warn!("second stop signal: exiting now");
                    std::process::exit(130);
                }
            },
        }
    }
}

/// The exit code for how the bridge ended. `channel_content`: the
/// channels asked for MESSAGE_CONTENT (see [`super::fatal_fix::setting_for`]).
pub fn exit_code(outcome: BridgeOutcome, channel_content: bool) -> ExitCode {
    match outcome {
        BridgeOutcome::Stopped => ExitCode::SUCCESS,
        BridgeOutcome::RestartRequested => {
            log::info!("restart requested by the owner: exiting with {RESTART_EXIT_CODE} for the supervisor");
            ExitCode::from(RESTART_EXIT_CODE)
        }
        BridgeOutcome::ShardFatal(error) => {
            let fix = match &error {
                ShardError::Fatal { code, .. } => {
                    super::fatal_fix::setting_for(*code, channel_content)
                }
                _ => None,
            };
            match fix {
                Some(fix) => eprintln!("smolcord: {error}; {fix}"),
                None => eprintln!("smolcord: {error}"),
            }
            ExitCode::from(FATAL_EXIT_CODE)
        }
    }
}

/// Wires shard, REST client, recorder and bridge together on one
/// single-threaded executor and runs until `stop` resolves (or `!restart`,
/// or a fatal gateway close). `watch_signals` gets the bridge's reload
/// handle and runs beside it (it is dropped when the bridge ends).
pub async fn run_bridge<W, WF>(
    config: Config,
    token: Token,
    tunables: Tunables,
    watch_signals: W,
    stop: impl std::future::Future<Output = impl Into<StopReason>>,
) -> Result<BridgeOutcome, String>
where
    W: FnOnce(bridge::ReloadHandle) -> WF,
    WF: std::future::Future<Output = ()>,
{
    smolcord::offload::create_dir_all(&config.state_dir)
        .await
        .map_err(|e| e.to_string())?;
    let rest = RestClient::new(&config.api_base, token.clone());
    let mut shard_config = ShardConfig::new(token, config.gateway_intents());
    shard_config.gateway_url = config.gateway_url.clone();
    shard_config.compress = config.compress;
    shard_config.heartbeat_warn = Duration::from_millis(config.heartbeat_warn_ms);
    shard_config.max_message_bytes = config
        .max_gateway_message_bytes
        .map(|bytes| usize::try_from(bytes).unwrap_or(usize::MAX));
    shard_config.gateway_info = Some(smolcord::shard::gateway_info_from(&rest));
    if let Some(url) = &config.identify_queue_url {
        shard_config.identify_queue = Some(Arc::new(RemoteIdentifyQueue::new(url.clone())));
    }
    let (ids, count) = shard_ids(config.shard_range(), &rest).await?;
    log::info!("running shards {}..={} of {count}", ids.start(), ids.end());
    let mut states = bridge::load_session_states(&config.state_dir, ids.clone(), count).await;
    let (shards, handle) = ShardSet::new(shard_config, ids, count, |id| {
        states.remove(&id).unwrap_or_default()
    })
    .map_err(|e| e.to_string())?;
    let state_dir = config.state_dir.clone();

    let mut recorder_config = RecorderConfig::in_state_dir(&config.state_dir);
    recorder_config.capacity = config.journal_capacity;
    let recorder = Recorder::new(recorder_config);

    let bridge = Bridge::start_with(config, rest, handle.clone(), recorder.clone(), tunables)
        .await
        .map_err(|e| e.to_string())?;
    let signals = watch_signals(bridge.reload_handle());
    let counters = bridge.counters();

    let ex = LocalExecutor::new();
    ex.run(async {
        let driver = ex.spawn(loopwatch::watch("gateway", shards.run()));
        let outcome = future::or(
            loopwatch::watch("bridge", bridge.run_until(async { stop.await.into() })),
            async {
                signals.await;
                future::pending().await
            },
        )
        .await;
        handle.shutdown();
        let stopped = future::or(async { Some(driver.await) }, async {
            Timer::after(SHARD_STOP_BOUND).await;
            None
        })
        .await;
        if stopped.is_none() {
            log::warn!("the gateway did not close within {SHARD_STOP_BOUND:?}; leaving anyway");
        }
        save_final_histories(&state_dir, &handle).await;
        if let Ok(outcome) = &outcome {
            save_stopped_status(&state_dir, &handle, &counters, outcome).await;
        }
        let unfinished = recorder
            .shutdown(RecorderConfig::DEFAULT_SHUTDOWN_BOUND)
            .await;
        if unfinished > 0 {
            log::warn!("{unfinished} failure record(s) were not written before exit");
        }
        outcome.map_err(|e| e.to_string())
    })
    .await
}

/// The shards to run: the configured range, or every shard of the count
/// Discord recommends (`GET /gateway/bot`; without it there is no count to
/// run, so the error stops the start and the supervisor tries again).
async fn shard_ids(
    range: ShardRange,
    rest: &RestClient,
) -> Result<(RangeInclusive<u32>, u32), String> {
    let recommended = match range {
        ShardRange::Auto => {
            rest.gateway_bot()
                .await
                .map_err(|e| {
                    format!(
                        "shards \"auto\": cannot ask Discord for the recommended shard count: {e}"
                    )
                })?
                .shards
        }
        _ => 0,
    };
    range.resolve(recommended).map_err(|e| e.to_string())
}

/// The last `status.json`, written once the gateway closed (the bridge's
/// own last one went out before): not connected, the sessions ended, and
/// why the process stopped, so `smolcord status` does not take a stopped
/// bridge for a healthy one until its last ACK ages.
async fn save_stopped_status(
    state_dir: &Path,
    handle: &ShardSetHandle,
    counters: &bridge::BridgeCounters,
    outcome: &BridgeOutcome,
) {
    let why = match outcome {
        BridgeOutcome::Stopped => StopCause::Shutdown,
        BridgeOutcome::RestartRequested => StopCause::Restart,
        BridgeOutcome::ShardFatal(_) => StopCause::Fatal,
    };
    let mut snapshot = StatusSnapshot::capture_set(&handle.statuses(), Some(counters.snapshot()));
    snapshot.mark_stopped(why, status::now_unix_ms());
    if let Err(e) = status::write(state_dir, &snapshot).await {
        log::warn!("saving the status at exit: {e}");
    }
}

/// The bridge saved the sessions before the gateway closed, so each
/// history's last entry (how the session ended: normally the shutdown) is
/// known only now; without this the next start would find it open and call
/// it unrecorded.
async fn save_final_histories(state_dir: &Path, handle: &ShardSetHandle) {
    let statuses = handle.statuses();
    let count = statuses.first().map_or(1, |status| status.shard[1]);
    let first = statuses.first().map_or(0, |status| status.shard[0]);
    let last = statuses.last().map_or(0, |status| status.shard[0]);
    let mut states = bridge::load_session_states(state_dir, first..=last, count).await;
    let mut changed = false;
    for status in statuses {
        let state = states.entry(status.shard[0]).or_default();
        if state.history != status.state.history {
            state.history = status.state.history;
            changed = true;
        }
    }
    if !changed {
        return;
    }
    let path = bridge::session_path(state_dir);
    let file = SessionFile::new(count, states);
    if let Err(e) = smolcord::offload::write_json_atomic(&path, &file).await {
        log::warn!("saving the session history at exit: {e}");
    }
}
