//! `smolcord run`: the bridge against Discord (or any gateway URL), with
//! signals: SIGINT/SIGTERM drain and stop (a second one exits at once),
//! SIGHUP re-reads access state.

use super::signals::{shutdown_signals, SignalRequest};
use crate::bridge::{self, Bridge, BridgeOutcome, Tunables};
use crate::config::{Config, Env};
use crate::loopwatch;
use crate::protocol::Intents;
use crate::recorder::{Recorder, RecorderConfig};
use crate::rest::RestClient;
use crate::rt::Timer;
use crate::shard::{GatewayInfo, Shard, ShardConfig};
use crate::token::Token;
use futures_lite::future;
use smol::LocalExecutor;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit code after an owner's `!restart`: non-zero, so a supervisor with
/// `Restart=on-failure` starts us again (EX_TEMPFAIL).
pub const RESTART_EXIT_CODE: u8 = 75;
/// Exit code when the gateway refused us for good (bad token, intents,
/// shard): a restart cannot fix it, so a supervisor should not retry
/// (systemd: `RestartPreventExitStatus=78`; EX_CONFIG).
pub const FATAL_EXIT_CODE: u8 = 78;
/// Bound on the gateway's close handshake at shutdown.
const SHARD_STOP_BOUND: Duration = Duration::from_secs(2);

/// Reads config and token, then runs the bridge until a signal.
pub async fn run(config: Option<&Path>, env: Env<'_>) -> Result<ExitCode, String> {
    let config = Config::load(config, env).await.map_err(|e| e.to_string())?;
    let token = config
        .token(env)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no token: set DISCORD_TOKEN (or `token_file` in the config)")?;
    let mut signals = shutdown_signals().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let (stop_tx, stop_rx) = smol::channel::bounded::<()>(1);
    let outcome = run_bridge(
        config,
        token,
        Tunables::default(),
        |reload| async move {
            // First stop: drain. Second: leave at once.
            let mut stops = 0;
            loop {
                match signals.next().await {
                    SignalRequest::Reload => {
                        log::info!("SIGHUP: re-reading access state");
                        reload.reload();
                    }
                    SignalRequest::Stop if stops == 0 => {
                        stops += 1;
                        log::info!(
                            "stopping: draining work in flight (signal again to exit at once)"
                        );
                        let _ = stop_tx.try_send(());
                    }
                    SignalRequest::Stop => {
                        log::warn!("second stop signal: exiting now");
                        std::process::exit(130);
                    }
                }
            }
        },
        async move {
            let _ = stop_rx.recv().await;
        },
    )
    .await?;
    Ok(exit_code(outcome))
}

/// The exit code for how the bridge ended.
pub fn exit_code(outcome: BridgeOutcome) -> ExitCode {
    match outcome {
        BridgeOutcome::Stopped => ExitCode::SUCCESS,
        BridgeOutcome::RestartRequested => {
            log::info!("restart requested by the owner: exiting with {RESTART_EXIT_CODE} for the supervisor");
            ExitCode::from(RESTART_EXIT_CODE)
        }
        BridgeOutcome::ShardFatal(error) => {
            eprintln!("smolcord: {error}");
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
    stop: impl std::future::Future<Output = ()>,
) -> Result<BridgeOutcome, String>
where
    W: FnOnce(bridge::ReloadHandle) -> WF,
    WF: std::future::Future<Output = ()>,
{
    crate::offload::create_dir_all(&config.state_dir)
        .await
        .map_err(|e| e.to_string())?;
    let rest = RestClient::new(&config.api_base, token.clone());
    let mut shard_config = ShardConfig::new(token, Intents::from_bits(config.intents));
    shard_config.shard = config.shard;
    shard_config.gateway_url = config.gateway_url.clone();
    shard_config.compress = config.compress;
    shard_config.heartbeat_warn = Duration::from_millis(config.heartbeat_warn_ms);
    shard_config.state = bridge::load_session_state(&config.state_dir).await;
    let info_rest = rest.clone();
    shard_config.gateway_info = Some(Arc::new(move || {
        let rest = info_rest.clone();
        Box::pin(async move {
            let bot = rest.gateway_bot().await.map_err(|e| e.to_string())?;
            Ok(GatewayInfo {
                url: bot.url,
                session_start_limit: Some(bot.session_start_limit),
            })
        })
    }));
    let (shard, handle) = Shard::new(shard_config);

    let mut recorder_config = RecorderConfig::in_state_dir(&config.state_dir);
    recorder_config.capacity = config.journal_capacity;
    let recorder = Recorder::new(recorder_config);

    let bridge = Bridge::start_with(config, rest, handle.clone(), recorder.clone(), tunables)
        .await
        .map_err(|e| e.to_string())?;
    let signals = watch_signals(bridge.reload_handle());

    let ex = LocalExecutor::new();
    ex.run(async {
        let driver = ex.spawn(loopwatch::watch("gateway", shard.run()));
        let outcome = future::or(loopwatch::watch("bridge", bridge.run(stop)), async {
            signals.await;
            future::pending().await
        })
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
