//! The conversation around a message, for an agent without memory: the
//! message it replies to (Discord sends it along: no request), and, where
//! the channel asks for it (`context_messages`), the messages before it
//! from one bounded history read, oldest first, the bot's own replies
//! included. A read that fails leaves the window empty (logged): the task
//! goes ahead without it, never waits on it beyond the REST bound.

use crate::bridge::ctx::Ctx;
use crate::bridge::store::spool::{ContextMessage, Task};
use crate::recorder::FailureKind;
use smolcord::protocol::{Message, Snowflake};

use crate::config::channels::MAX_CONTEXT_MESSAGES;

/// Fills `task`'s `replied_to` and `context` for `message`.
pub(crate) async fn gather(ctx: &Ctx, message: &Message, task: &mut Task) {
    let bot = ctx.runtime.bot_user();
    task.replied_to = message
        .referenced_message
        .as_deref()
        .map(|answered| ContextMessage::new(answered, bot));
    let window = ctx
        .channel_entry(message.channel_id)
        .map_or(0, |(entry, _)| entry.context_messages)
        .min(MAX_CONTEXT_MESSAGES);
    if window == 0 {
        return;
    }
    match read_before(ctx, message.channel_id, message.id, window).await {
        Ok(before) => task.context = before.iter().map(|m| ContextMessage::new(m, bot)).collect(),
        Err(e) => {
            log::warn!(
                "reading the {window} messages before {} in channel {}: {e}; the task goes without them",
                message.id,
                message.channel_id
            );
            ctx.reporter.rest_failure(FailureKind::Rest, &e);
        }
    }
}

/// The `n` messages of `channel` right before `message`, oldest first.
async fn read_before(
    ctx: &Ctx,
    channel: Snowflake,
    message: Snowflake,
    n: u8,
) -> Result<Vec<Message>, smolcord::rest::RestError> {
    let page = ctx
        .rest
        .channel_messages_before(channel, message, n)
        .await?;
    Ok(oldest_first_before(page, message, n))
}

/// A history page (any order) cut to the `n` newest messages older than
/// `message`, oldest first.
fn oldest_first_before(mut page: Vec<Message>, message: Snowflake, n: u8) -> Vec<Message> {
    page.retain(|m| m.id < message);
    page.sort_unstable_by_key(|m| m.id);
    let skip = page.len().saturating_sub(usize::from(n));
    page.drain(..skip);
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: u64) -> Message {
        serde_json::from_value(serde_json::json!({
            "id": id.to_string(), "channel_id": "7",
            "author": {"id": "5", "username": "u"}, "content": format!("m{id}")
        }))
        .unwrap()
    }

    #[test]
    fn the_window_is_the_newest_before_the_message_oldest_first() {
        let page: Vec<_> = [14, 13, 12, 11, 10, 9].into_iter().map(message).collect();
        let ids: Vec<u64> = oldest_first_before(page, Snowflake::new(13), 3)
            .iter()
            .map(|m| m.id.get())
            .collect();
        assert_eq!(ids, [10, 11, 12]);
        let few = oldest_first_before(vec![message(2)], Snowflake::new(13), 3);
        assert_eq!(few.len(), 1);
    }
}
