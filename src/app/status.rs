//! `smolcord status`: print the snapshot (charts and a session timeline, or
//! with `--json` the documented machine-readable form); exit 1 unless
//! healthy.

use crate::chart::Charset;
use crate::config::{Config, Env};
use crate::status;
use std::path::Path;
use std::process::ExitCode;

/// Prints the status readably (or as JSON with `json`); exit 0 when the
/// last heartbeat ACK is younger than two intervals, 1 otherwise (a health
/// check).
pub async fn run(config: Option<&Path>, env: Env<'_>, json: bool) -> Result<ExitCode, String> {
    let config = Config::load(config, env).await.map_err(|e| e.to_string())?;
    match status::read(&config.state_dir).await {
        Ok(Some(snapshot)) => {
            let now = status::now_unix_ms();
            if json {
                say!("{}", snapshot.report_json(now));
            } else {
                say_raw!("{}", snapshot.render(now, Charset::for_stdout()));
            }
            Ok(if snapshot.is_healthy(now) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Ok(None) => {
            let message = format!(
                "no status yet: {} does not exist (is smolcord running with this state dir?)",
                status::path(&config.state_dir).display()
            );
            // A script reading --json gets nothing on stdout, not prose.
            if json {
                eprintln!("smolcord: {message}");
            } else {
                say!("{message}");
            }
            Ok(ExitCode::FAILURE)
        }
        Err(err) => Err(err.to_string()),
    }
}
