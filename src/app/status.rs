//! `smolcord status`: the running process's live status (asked over
//! `status.sock`), else the last `status.json`; exit 1 unless healthy.

use crate::config::{Config, Env};
use crate::status::{self, socket, StatusSnapshot};
use std::path::Path;
use std::process::ExitCode;

/// Prints the status readably; exit 0 when the last heartbeat ACK is
/// younger than two intervals, 1 otherwise (a health check). A process
/// that holds the status socket but does not answer within
/// [`socket::QUERY_BOUND`] is hung: exit 1.
pub async fn run(config: Option<&Path>, env: Env<'_>) -> Result<ExitCode, String> {
    let config = Config::load(config, env).await.map_err(|e| e.to_string())?;
    let state_dir = &config.state_dir;
    match socket::query(state_dir, socket::QUERY_BOUND).await {
        socket::Query::Live(snapshot) => Ok(report(&snapshot, "live answer on status.sock")),
        socket::Query::NoAnswer(why) => {
            say!(
                "smolcord on {} is UNHEALTHY: it holds {} but gave no answer ({why}); hung or stopped?",
                state_dir.display(),
                socket::SOCKET_NAME
            );
            Ok(ExitCode::FAILURE)
        }
        socket::Query::NotListening => match status::read(state_dir).await {
            Ok(Some(snapshot)) => Ok(report(
                &snapshot,
                "status.json (no process answered on status.sock)",
            )),
            Ok(None) => {
                say!(
                    "no status yet: nothing answers on {} and {} does not exist (is smolcord running with this state dir?)",
                    socket::path(state_dir).display(),
                    status::path(state_dir).display()
                );
                Ok(ExitCode::FAILURE)
            }
            Err(err) => Err(err.to_string()),
        },
    }
}

fn report(snapshot: &StatusSnapshot, source: &str) -> ExitCode {
    let now = status::now_unix_ms();
    say_raw!("{}", snapshot.render(now));
    say!("  source             {source}");
    if snapshot.is_healthy(now) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
