//! What the owner's approve, deny and revoke commands do, and the answer
//! each gives. Every one is idempotent on the state it changes (approving
//! an approved user, denying a code that is gone, revoking someone not
//! allowed change nothing and say so), which is what lets a use replayed
//! after a crash run again without acting twice (docs/commands.md).

use crate::bridge::access::book::Role;
use crate::bridge::access::pairing::{approve_code, PairError};
use crate::bridge::ctx::Ctx;
use crate::status::now_unix_ms;
use smolcord::protocol::Snowflake;

/// What a command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Done {
    /// The answer to the owner.
    pub text: String,
    /// A user was approved just now: tell them (as `smolcord pair`'s
    /// approval is told).
    pub approved: bool,
}

impl Done {
    fn said(text: impl Into<String>) -> Done {
        Done {
            text: text.into(),
            approved: false,
        }
    }
}

/// `/approve CODE`: as `smolcord pair CODE`.
pub(crate) async fn approve(ctx: &Ctx, code: &str) -> Done {
    match approve_code(&ctx.state_dir, code, now_unix_ms()).await {
        Ok(approval) if approval.already_allowed => Done::said(format!(
            "User {} was already allowed; nothing to do.",
            approval.user_id
        )),
        Ok(approval) => {
            // Not the code: a live code in a log is one more place it
            // could be read from.
            log::info!(
                "the owner approved user {}'s pairing code",
                approval.user_id
            );
            ctx.access.reread().await;
            Done {
                text: format!(
                    "Approved: user {} may now talk to the agent, and has been told.",
                    approval.user_id
                ),
                approved: true,
            }
        }
        Err(e @ (PairError::Unknown(_) | PairError::Expired { .. })) => Done::said(format!("{e}.")),
        Err(PairError::State(detail)) => {
            log::warn!("/approve: {detail}");
            Done::said(format!("The approval could not be saved: {detail}"))
        }
    }
}

/// `/deny CODE`: the code is dropped; its user stays a stranger (and is
/// not told: a stranger learns nothing about the bot).
pub(crate) async fn deny(ctx: &Ctx, code: &str) -> Done {
    match ctx.access.deny_code(code).await {
        Ok(Some(user)) => {
            log::info!("the owner denied user {user}'s pairing code");
            Done::said(format!(
                "Denied: code `{code}` is gone; user {user} stays unapproved."
            ))
        }
        Ok(None) => Done::said(format!(
            "No pending pairing code `{code}`; nothing to deny."
        )),
        Err(e) => {
            log::warn!("/deny: saving the pairing book: {e}");
            Done::said(format!(
                "Code `{code}` is dropped for now, but saving that failed ({e}): a restart may bring it back."
            ))
        }
    }
}

/// `/revoke USER`: off `access.json`'s allowed list.
pub(crate) async fn revoke(ctx: &Ctx, user: Snowflake) -> Done {
    ctx.access.reread().await;
    if ctx.access.role(user) == Role::Owner {
        return Done::said("The owner cannot be revoked.");
    }
    let in_config = ctx
        .config
        .allowed_user_ids
        .iter()
        .any(|id| id.trim() == user.to_string());
    if in_config {
        return Done::said(format!(
            "User {user} is allowed by the config (`allowed_user_ids`): remove them there and restart."
        ));
    }
    match ctx.access.revoke(user).await {
        Ok(true) => {
            log::info!("the owner revoked user {user}");
            Done::said(format!("Revoked: user {user} no longer reaches the agent."))
        }
        Ok(false) => Done::said(format!("User {user} was not allowed; nothing to do.")),
        Err(detail) => {
            log::warn!("/revoke: {detail}");
            Done::said(format!("The revocation could not be saved: {detail}"))
        }
    }
}
