//! A server channel that refuses the bot for good (403 Missing
//! Permissions, 404 Unknown Channel: deleted, or the bot was removed):
//! the delivery already logged it, journalled it and archived the reply
//! (`delivery::settle`); here the owner is told, in a DM, once per channel
//! and run, what to change. No retry: the next message there is tried as
//! usual, and tells nobody again. The same for a read-back whose history
//! read the channel refuses (403 Missing Access or Permissions, 404):
//! [`on_history_refusal`], under the same once per channel and run. And
//! for a history Discord withholds without an error (no Read Message
//! History: the read answers no messages though the channel has newer
//! ones): [`on_history_withheld`].

use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::delivery::notify;
use crate::bridge::report::counters::Counter;
use crate::bridge::store::nonce::{self, Notice};
use crate::recorder::FailureKind;
use smolcord::protocol::Snowflake;
use smolcord::rest::RestError;

/// Whether `e` says the channel refuses the bot, rather than this request.
pub(crate) fn refuses(e: &RestError) -> bool {
    matches!(
        e,
        RestError::Http {
            status: 403 | 404,
            ..
        }
    )
}

/// What the bot was refused.
#[derive(Clone, Copy)]
enum Refused {
    /// A reply.
    Answer,
    /// The read-back of the channel's history after a gap.
    History,
}

/// What the owner reads about `channel` refusing `what` with `e`.
fn owner_text(channel: Snowflake, e: &RestError, what: Refused) -> String {
    let fix = match e {
        RestError::Http { status: 404, .. } => {
            "the channel is gone, or the bot is no longer in its server: remove it from `channels`"
        }
        _ => {
            "give the bot View Channel, Send Messages, Read Message History (and Add Reactions, Send Messages in Threads if used) there, or remove it from `channels`"
        }
    };
    let mut why: String = e.to_string().chars().take(200).collect();
    if why.chars().count() == 200 {
        why.push('…');
    }
    let what = match what {
        Refused::Answer => format!("I cannot answer in <#{channel}>"),
        Refused::History => format!(
            "I could not read back <#{channel}> after being offline, so mentions sent there meanwhile went unanswered"
        ),
    };
    format!("{what} ({why}): {fix}. (Told once per channel until the bridge restarts.)")
}

/// The reply to `message` in server channel `channel` failed with `e`: if
/// that says the channel refuses the bot, counts it and tells the owner
/// (once per channel and run).
pub(crate) async fn on_refusal(ctx: &Ctx, channel: Snowflake, message: Snowflake, e: &RestError) {
    if !refuses(e) {
        return;
    }
    ctx.counters.bump(Counter::ChannelRefusals);
    if !ctx.channels_refused.first_time(channel) {
        log::info!("channel {channel} refused a reply again ({e}); the owner was told already");
        return;
    }
    log::warn!("channel {channel} refuses the bot ({e}); telling the owner");
    let nonce = nonce::notice(message, Notice::ChannelRefused);
    tell_owner(
        ctx,
        channel,
        &owner_text(channel, e, Refused::Answer),
        &nonce,
    )
    .await;
}

/// The read-back of server channel `channel`'s history failed with `e`,
/// which says the channel refuses the bot: logged with the channel (a
/// warning the first time in the run), and the owner told once per
/// channel and run (a refused reply there counts as told too). Not tried
/// again: the next fresh session reads it again.
pub(crate) async fn on_history_refusal(ctx: &Ctx, channel: Snowflake, e: &RestError) {
    if !ctx.channels_refused.first_time(channel) {
        log::info!(
            "read-back: channel {channel} refused its history read again ({e}); the owner was told already"
        );
        return;
    }
    log::warn!(
        "read-back: channel {channel} refuses the bot ({e}): what was sent there in the gap is not read; telling the owner"
    );
    let nonce = nonce::notice(channel, Notice::HistoryRefused);
    tell_owner(
        ctx,
        channel,
        &owner_text(channel, e, Refused::History),
        &nonce,
    )
    .await;
}

/// What the owner reads about `channel` withholding its history.
fn withheld_text(channel: Snowflake) -> String {
    format!(
        "I could not read back <#{channel}> after being offline: Discord returns none of its messages to me (no Read Message History there), so mentions sent there meanwhile went unanswered: give the bot Read Message History there, or remove it from `channels`. (Told once per channel until the bridge restarts.)"
    )
}

/// The read-back of server channel `channel` came back empty though the
/// channel's newest message (`last`) is past what was handled: Discord
/// withholds the history (no Read Message History). Logged and
/// journalled with the channel and the permission, and the owner told
/// once per channel and run (under the same once as a refusal). Not
/// tried again: the next fresh session reads it again.
pub(crate) async fn on_history_withheld(ctx: &Ctx, channel: Snowflake, last: Snowflake) {
    ctx.reporter.fail(
        FailureKind::Rest,
        "GET /channels/{channel_id}/messages",
        Some(200),
        format!(
            "channel {channel}: history withheld (no messages though newer ones exist): grant Read Message History"
        ),
    );
    if !ctx.channels_refused.first_time(channel) {
        log::info!(
            "read-back: channel {channel} withheld its history again (no Read Message History); the owner was told already"
        );
        return;
    }
    log::warn!(
        "read-back: channel {channel} returned no messages though it has newer ones (message {last}): the bot lacks Read Message History there, so what was sent in the gap is not read; grant it; telling the owner"
    );
    let nonce = nonce::notice(last, Notice::HistoryWithheld);
    tell_owner(ctx, channel, &withheld_text(channel), &nonce).await;
}

/// Tells the owner `text` in a DM (about `channel`).
async fn tell_owner(ctx: &Ctx, channel: Snowflake, text: &str, nonce: &smolcord::rest::Nonce) {
    let Some(owner) = ctx.access.owner() else {
        log::warn!("no owner to tell that channel {channel} refuses the bot");
        return;
    };
    let dm = match ctx.rest.create_dm(owner).await {
        Ok(dm) => dm,
        Err(e) => {
            log::warn!("telling the owner about channel {channel}: opening the DM failed: {e}");
            ctx.reporter.rest_failure(FailureKind::Rest, &e);
            return;
        }
    };
    notify(ctx, dm.id, text, nonce).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, code: u64) -> RestError {
        RestError::Http {
            status,
            code: Some(code),
            message: "Missing Permissions".into(),
            route: "POST /channels/{channel_id}/messages".into(),
        }
    }

    #[test]
    fn the_owner_reads_what_to_change() {
        let text = owner_text(Snowflake::new(7), &http(403, 50013), Refused::Answer);
        assert!(text.contains("I cannot answer in <#7>"), "{text}");
        assert!(text.contains("Send Messages"), "{text}");
        let gone = owner_text(Snowflake::new(7), &http(404, 10003), Refused::Answer);
        assert!(gone.contains("remove it from `channels`"), "{gone}");
        let unread = owner_text(Snowflake::new(7), &http(403, 50001), Refused::History);
        assert!(unread.contains("could not read back <#7>"), "{unread}");
        assert!(unread.contains("Read Message History"), "{unread}");
        let withheld = withheld_text(Snowflake::new(7));
        assert!(withheld.contains("could not read back <#7>"), "{withheld}");
        assert!(
            withheld.contains("give the bot Read Message History"),
            "{withheld}"
        );
        assert!(refuses(&http(403, 50013)));
        assert!(!refuses(&http(400, 50035)));
    }
}
