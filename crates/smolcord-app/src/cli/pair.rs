//! `smolcord pair CODE`: approve a pairing code. Adds the code's user to
//! `access.json` (atomic, with a backup); a running bridge notices within a
//! results-poll tick and tells the user, no restart needed.

use crate::bridge::{approve_code, PairError};
use crate::config::{Config, Env};
use crate::status::now_unix_ms;
use std::path::Path;
use std::process::ExitCode;

/// Approves `code`; exit 0 when the user is (now) allowed, 1 for a wrong
/// or expired code (said plainly on stdout), `Err` for a state problem.
pub async fn run(config: Option<&Path>, env: Env<'_>, code: &str) -> Result<ExitCode, String> {
    let config = Config::load(config, env).await.map_err(|e| e.to_string())?;
    match approve_code(&config.state_dir, code, now_unix_ms()).await {
        Ok(approval) if approval.already_allowed => {
            say!(
                "user {} was already allowed; nothing to do",
                approval.user_id
            );
            Ok(ExitCode::SUCCESS)
        }
        Ok(approval) => {
            say!(
                "approved: user {} may now talk to the agent (the running bridge picks this up by itself)",
                approval.user_id
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e @ PairError::Unknown(_)) => {
            // The usual cause besides a typo: another state dir than the
            // bridge's (a different user, SMOLCORD_STATE_DIR unset).
            say!(
                "{e}; looked in {} (the bridge's state dir must be the same: set SMOLCORD_STATE_DIR or state_dir as for `smolcord run`)",
                crate::bridge::access::pairing::pairing_path(&config.state_dir).display()
            );
            Ok(ExitCode::FAILURE)
        }
        Err(e @ PairError::Expired { .. }) => {
            say!("{e}");
            Ok(ExitCode::FAILURE)
        }
        Err(PairError::State(detail)) => Err(detail),
    }
}
