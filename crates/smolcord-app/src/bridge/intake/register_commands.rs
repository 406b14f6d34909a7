//! Registers the owner's slash commands at start: one bulk overwrite of
//! the application's global commands (`PUT /applications/{id}/commands`),
//! as its own task, so the gateway and the messages never wait for it.
//!
//! Global, not per guild: guild commands are not offered in DMs, and the
//! owner talks to the bot in its DM; a global command with `contexts: [1]`
//! (BOT_DM) is offered there and in no server. The overwrite is
//! idempotent (the same list twice changes nothing, and unchanged commands
//! do not count against Discord's daily creation limit), so it is sent at
//! every start rather than compared first. A failure that may pass (5xx,
//! a timeout, rate limits beyond the client's own budget) is tried again,
//! [`FIRST_RETRY`] doubling to [`MAX_RETRY`], for as long as the bridge
//! runs; a refusal (401/403: the invite lacks `applications.commands`,
//! 400: a command Discord does not take) is logged and journalled once:
//! no retry can pass it, and the `!` forms and the shell still work.

use crate::bridge::ctx::Ctx;
use crate::bridge::work::owner_command;
use crate::recorder::FailureKind;
use smolcord::protocol::Snowflake;
use std::rc::Rc;
use std::time::Duration;

/// The first wait before registering again.
pub(crate) const FIRST_RETRY: Duration = Duration::from_secs(2);
/// The longest wait between two tries.
pub(crate) const MAX_RETRY: Duration = Duration::from_secs(600);

/// Registers the commands for `application` (asked of Discord when READY
/// did not name it: a run that began with a resume), retrying what may
/// pass.
pub(crate) async fn run(ctx: Rc<Ctx>, application: Option<Snowflake>) {
    let specs = owner_command::specs();
    let mut wait = FIRST_RETRY;
    loop {
        let application = match application {
            Some(id) => Ok(id),
            None => ctx.rest.current_application().await.map(|app| app.id),
        };
        let registered = match application {
            Ok(id) => ctx.rest.set_global_commands(id, &specs).await,
            Err(e) => Err(e),
        };
        match registered {
            Ok(registered) => {
                log::info!(
                    "slash commands registered for the owner's DM: {}",
                    registered
                        .iter()
                        .map(|c| format!("/{}", c.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                return;
            }
            Err(e) if e.is_permanent() => {
                log::error!(
                    "registering the slash commands was refused ({e}); the owner's commands work as `!restart` and `smolcord pair` only (does the invite have the applications.commands scope?)"
                );
                ctx.reporter.rest_failure(FailureKind::Rest, &e);
                return;
            }
            Err(e) => {
                log::warn!(
                    "registering the slash commands failed ({e}); trying again in {} s",
                    wait.as_secs()
                );
                ctx.reporter.rest_failure(FailureKind::Rest, &e);
                smolcord::rt::Timer::after(wait).await;
                wait = (wait * 2).min(MAX_RETRY);
            }
        }
    }
}
