//! Thread mode: a channel with `"thread": true` answers a message in a
//! public thread started from it, named after its first line; the
//! conversation then goes on in the thread without mentions (the thread is
//! remembered in `runtime.json`, the newest 256). Exactly once: a thread
//! started before a crash is found again (Discord refuses a second one
//! from the same message with 160004, and a thread's id is its message's).
//! A thread that cannot be started (no Create Public Threads permission)
//! leaves the answer in the channel, as a reply (logged, journalled).

use crate::bridge::ctx::Ctx;
use crate::recorder::FailureKind;
use smolcord::protocol::{Message, Snowflake};
use smolcord::rest::RestError;

/// Discord's "A thread has already been created for this message".
const THREAD_ALREADY_CREATED: u64 = 160_004;
/// Thread names are cut here (Discord takes 100 characters; a shorter one
/// reads better in the channel list).
const NAME_CHARS: usize = 80;

/// The thread to answer `message` in, started now if its channel is in
/// thread mode and it is not in one of the bot's threads already; `None`:
/// answer in the channel. `text`: the message's text for the agent.
pub(crate) async fn open_for(ctx: &Ctx, message: &Message, text: &str) -> Option<Snowflake> {
    let (entry, in_thread) = ctx.channel_entry(message.channel_id)?;
    if !entry.thread || in_thread || message.is_direct() {
        return None;
    }
    let channel = message.channel_id;
    let name = thread_name(text, &message.author.username);
    let thread = match ctx
        .rest
        .start_thread_from_message(channel, message.id, &name)
        .await
    {
        Ok(thread) => thread.id,
        Err(RestError::Http {
            code: Some(THREAD_ALREADY_CREATED),
            ..
        }) => {
            log::info!(
                "message {} has its thread already (started before a restart)",
                message.id
            );
            message.id
        }
        Err(e) => {
            log::warn!(
                "starting a thread from message {} in channel {channel} failed ({e}); answering in the channel",
                message.id
            );
            ctx.reporter.rest_failure(FailureKind::Delivery, &e);
            return None;
        }
    };
    ctx.runtime.remember_thread(thread, channel);
    Some(thread)
}

/// The thread's name: the message's first line, cut at [`NAME_CHARS`];
/// for a message with no text, the author's.
fn thread_name(text: &str, author: &str) -> String {
    let first = text.lines().map(str::trim).find(|line| !line.is_empty());
    match first {
        Some(line) if line.chars().count() > NAME_CHARS => {
            let cut: String = line.chars().take(NAME_CHARS - 1).collect();
            format!("{}…", cut.trim_end())
        }
        Some(line) => line.to_owned(),
        None => format!("conversation with {author}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_the_first_line_cut() {
        assert_eq!(thread_name("\n  what time?\nmore", "ann"), "what time?");
        assert_eq!(thread_name("", "ann"), "conversation with ann");
        let long = thread_name(&"x".repeat(200), "ann");
        assert_eq!(long.chars().count(), NAME_CHARS);
        assert!(long.ends_with('…'));
    }
}
