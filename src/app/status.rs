//! `smolcord status`: print the snapshot; exit 1 unless healthy.

use crate::config::{Config, Env};
use crate::status;
use std::path::Path;
use std::process::ExitCode;

/// Prints `status.json` readably; exit 0 when the last heartbeat ACK is
/// younger than two intervals, 1 otherwise (a health check).
pub async fn run(config: Option<&Path>, env: Env<'_>) -> Result<ExitCode, String> {
    let config = Config::load(config, env).await.map_err(|e| e.to_string())?;
    match status::read(&config.state_dir).await {
        Ok(Some(snapshot)) => {
            let now = status::now_unix_ms();
            say_raw!("{}", snapshot.render(now));
            Ok(if snapshot.is_healthy(now) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Ok(None) => {
            say!(
                "no status yet: {} does not exist (is smolcord running with this state dir?)",
                status::path(&config.state_dir).display()
            );
            Ok(ExitCode::FAILURE)
        }
        Err(err) => Err(err.to_string()),
    }
}
