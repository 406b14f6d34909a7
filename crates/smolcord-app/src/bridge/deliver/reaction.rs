//! Reactions on a user's message as it goes (config `reactions`): one when
//! it is taken, one when it is answered or failed. Each is its own task
//! through the REST client (its rate limits, a short timeout), so a
//! reaction never delays the reply, and a failed one is only logged and
//! journalled (the reply says more than any emoji).

use crate::bridge::ctx::Ctx;
use crate::recorder::FailureKind;
use smolcord::protocol::Snowflake;
use std::rc::Rc;
use std::time::Duration;

/// Where a message has got to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    Taken,
    Done,
    Failed,
}

/// One reaction request at most this long (as typing's): a late emoji is
/// worth less than the request slot it holds.
const REACTION_TIMEOUT: Duration = Duration::from_secs(5);

/// Puts the configured emoji for `stage` on `message`, in the background.
pub(crate) fn react(ctx: &Rc<Ctx>, channel: Snowflake, message: Snowflake, stage: Stage) {
    let reactions = ctx.config.reactions;
    let emoji = match stage {
        Stage::Taken => reactions.taken,
        Stage::Done => reactions.done,
        Stage::Failed => reactions.failed,
    };
    let Some(emoji) = emoji else {
        return;
    };
    let task_ctx = ctx.clone();
    ctx.spawn("bridge-reaction", async move {
        let rest = task_ctx.rest.clone().with_timeout(REACTION_TIMEOUT);
        if let Err(e) = rest.create_reaction(channel, message, emoji).await {
            log::debug!("reaction {emoji} ({stage:?}) on message {message}: {e}");
            task_ctx.reporter.rest_failure(FailureKind::Rest, &e);
        }
    });
}
