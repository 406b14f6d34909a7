//! `smolcord status`: the running process's live status (asked over
//! `status.sock`), else the last `status.json`; drawn as charts and a
//! session timeline, or with `--json` in the documented machine-readable
//! form. Exit 0 when healthy, [`STOPPED_EXIT_CODE`] when the bridge is
//! not running because it stopped, 1 otherwise.

use crate::chart::Charset;
use crate::config::{Config, Env};
use crate::status::{self, socket, StatusSnapshot};
use std::path::Path;
use std::process::ExitCode;

/// Exit code of `smolcord status` for a bridge that is not running because
/// it stopped (its last snapshot says so): not healthy, and not a failure
/// to look into either.
pub const STOPPED_EXIT_CODE: u8 = 3;

/// Prints the status (readably, or as JSON with `json`); exit 0 when the
/// last heartbeat ACK is younger than two intervals, 1 otherwise (a health
/// check). A process that holds the status socket but does not answer
/// within [`socket::QUERY_BOUND`] is hung: exit 1.
pub async fn run(config: Option<&Path>, env: Env<'_>, json: bool) -> Result<ExitCode, String> {
    let config = Config::load(config, env).await.map_err(|e| e.to_string())?;
    let state_dir = &config.state_dir;
    match socket::query(state_dir, socket::QUERY_BOUND).await {
        socket::Query::Live(snapshot) => {
            Ok(report(&snapshot, json, "live answer on status.sock"))
        }
        socket::Query::NoAnswer(why) => Ok(unhealthy(
            json,
            &format!(
                "smolcord on {} is UNHEALTHY: it holds {} but gave no answer ({why}); hung or stopped?",
                state_dir.display(),
                socket::SOCKET_NAME
            ),
        )),
        socket::Query::NotListening => match status::read(state_dir).await {
            Ok(Some(snapshot)) => Ok(report(
                &snapshot,
                json,
                "status.json (no process answered on status.sock)",
            )),
            Ok(None) => Ok(unhealthy(
                json,
                &format!(
                    "no status yet: nothing answers on {} and {} does not exist (is smolcord running with this state dir?)",
                    socket::path(state_dir).display(),
                    status::path(state_dir).display()
                ),
            )),
            Err(err) => Err(err.to_string()),
        },
    }
}

fn report(snapshot: &StatusSnapshot, json: bool, source: &str) -> ExitCode {
    let now = status::now_unix_ms();
    if json {
        say!("{}", snapshot.report_json(now));
    } else {
        say_raw!("{}", snapshot.render(now, Charset::for_stdout()));
        say!("  source             {source}");
    }
    if snapshot.stopped.is_some() {
        ExitCode::from(STOPPED_EXIT_CODE)
    } else if snapshot.is_healthy(now) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Says why there is no healthy status; a script reading `--json` gets
/// nothing on stdout, not prose.
fn unhealthy(json: bool, message: &str) -> ExitCode {
    if json {
        eprintln!("smolcord: {message}");
    } else {
        say!("{message}");
    }
    ExitCode::FAILURE
}
