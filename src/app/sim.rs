//! `smolcord sim`: serve the gateway simulator until SIGINT/SIGTERM.

use super::signals::{shutdown_signals, SignalRequest};
use crate::offload::{self, FileKind};
use crate::sim::{SimConfig, SimTls, Simulator, DEFAULT_SIM_TOKEN};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Largest PEM file read for `--tls-cert` / `--tls-key`.
const MAX_PEM_BYTES: u64 = 256 * 1024;

/// Starts the simulator on `listen` (default 127.0.0.1:0), with TLS when a
/// certificate chain and key are given, prints its URLs and serves until a
/// stop signal.
pub async fn run(
    listen: Option<SocketAddr>,
    heartbeat_ms: Option<u64>,
    tls: Option<(PathBuf, PathBuf)>,
) -> Result<ExitCode, String> {
    let mut config = SimConfig::default();
    if let Some(listen) = listen {
        config.listen = listen;
    }
    if let Some(ms) = heartbeat_ms {
        if ms == 0 {
            return Err("--heartbeat-ms must be at least 1".into());
        }
        config.heartbeat_interval = Duration::from_millis(ms);
    }
    if let Some((cert, key)) = tls {
        let chain = read_pem(&cert, "--tls-cert").await?;
        let key = read_pem(&key, "--tls-key").await?;
        config.tls = Some(SimTls::from_pem(&chain, &key)?);
    }
    let mut signals = shutdown_signals().map_err(|e| format!("cannot listen for signals: {e}"))?;
    let sim = Simulator::start(config).map_err(|e| e.to_string())?;
    say!("smolcord gateway simulator");
    say!("  gateway  {}", sim.gateway_url());
    say!("  REST     {}", sim.api_base());
    say!("  control  {}", sim.control_url());
    say!("  token    {DEFAULT_SIM_TOKEN}");
    say!(
        "  try: DISCORD_TOKEN={DEFAULT_SIM_TOKEN} SMOLCORD_GATEWAY_URL={} SMOLCORD_API_BASE={} smolcord run",
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
