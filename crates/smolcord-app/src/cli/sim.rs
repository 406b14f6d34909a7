//! `smolcord sim`: serve the gateway simulator until SIGINT/SIGTERM.

use super::signals::{shutdown_signals, SignalRequest};
use super::SimArgs;
use smolcord::offload::{self, FileKind};
use smolcord_sim::{bot_id_of_token, SimConfig, SimTls, Simulator, MAX_CONCURRENCY, MAX_SHARDS};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// Largest PEM file read for `--tls-cert` / `--tls-key`.
const MAX_PEM_BYTES: u64 = 256 * 1024;

/// Starts the simulator on `--listen` (default 127.0.0.1:0), with TLS when a
/// certificate chain and key are given, prints its URLs and serves until a
/// stop signal. Unlike `SimConfig::default()` (whose Rust tests re-identify
/// within milliseconds on purpose), `smolcord sim` paces identifies as
/// Discord does unless `--identify-pacing off`.
pub async fn run(args: SimArgs) -> Result<ExitCode, String> {
    let mut config = SimConfig::default();
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(ms) = args.heartbeat_ms {
        if ms == 0 {
            return Err("--heartbeat-ms must be at least 1".into());
        }
        config.heartbeat_interval = Duration::from_millis(ms);
    }
    if let Some(token) = args.token {
        if bot_id_of_token(token.expose()).is_none() {
            log::warn!(
                "--token is not shaped like a Discord token (base64 of the bot's user id, \
                 then two more dot-separated parts): libraries that read the bot id from \
                 the token will disagree with READY (bot id {})",
                config.bot_id
            );
        }
        config = config.with_token(token);
    }
    if let Some(n) = args.max_concurrency {
        if !(1..=MAX_CONCURRENCY).contains(&n) {
            return Err(format!(
                "--max-concurrency must be 1 to {MAX_CONCURRENCY}, not {n}"
            ));
        }
        config.session_start_limit.max_concurrency = n;
    }
    if let Some(n) = args.shards {
        if !(1..=MAX_SHARDS).contains(&n) {
            return Err(format!("--shards must be 1 to {MAX_SHARDS}, not {n}"));
        }
        config.recommended_shards = n;
    }
    config.enforce_identify_concurrency = args.identify_pacing.unwrap_or(true);
    if let Some((cert, key)) = args.tls {
        let chain = read_pem(&cert, "--tls-cert").await?;
        let key = read_pem(&key, "--tls-key").await?;
        config.tls = Some(SimTls::from_pem(&chain, &key)?);
    }
    let mut signals = shutdown_signals().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let sim = Simulator::start(config).map_err(|e| e.to_string())?;
    // The simulator's token is no secret: printing it is the point.
    let token = sim.config().token.expose().to_owned();
    say!("smolcord gateway simulator");
    say!("  gateway  {}", sim.gateway_url());
    say!("  REST     {}", sim.api_base());
    say!("  control  {}", sim.control_url());
    say!("  token    {token}");
    say!("  bot id   {}", sim.config().bot_id);
    say!(
        "  identify max_concurrency {}, {} shard(s) recommended, pacing {}",
        sim.config().session_start_limit.max_concurrency,
        sim.config().recommended_shards,
        if sim.config().enforce_identify_concurrency {
            "on (op 9 for an identify too early for its bucket)"
        } else {
            "off"
        }
    );
    say!(
        "  try: DISCORD_TOKEN={token} SMOLCORD_GATEWAY_URL={} SMOLCORD_API_BASE={} smolcord run",
        sim.gateway_url(),
        sim.api_base()
    );
    while signals.next().await != SignalRequest::Stop {}
    log::info!("stopping the simulator");
    sim.shutdown();
    Ok(ExitCode::SUCCESS)
}

async fn read_pem(path: &Path, flag: &str) -> Result<Vec<u8>, String> {
    offload::read_capped(path, MAX_PEM_BYTES, FileKind::RegularBehindLink, |bytes| {
        bytes
    })
    .await
    .map_err(|e| format!("{flag} {}: {e}", path.display()))?
    .ok_or_else(|| format!("{flag} {}: file not found", path.display()))
}
