//! The `channels` section: the server channels the bot answers in, each
//! with who may use it and whether a message must mention the bot.
//!
//! ```json
//! "channels": [
//!   {"id": "1300000000000000101"},
//!   {"id": "1300000000000000102", "users": ["1200000000000000011"], "mention": false}
//! ]
//! ```
//!
//! Named by id, so a renamed channel keeps its settings and a new one is
//! never answered by accident. `users` absent: the owner and the allowed
//! users (the DM rules); present: those users and the owner. `mention`
//! (default true): only messages that mention the bot or reply to it are
//! taken; false needs the privileged MESSAGE_CONTENT intent (Discord
//! withholds the text of the others), which the bridge then requests.
//! `thread` (default false): the answer goes into a thread started from
//! the message, where the conversation goes on without mentions (so it
//! needs MESSAGE_CONTENT too).
//! `context_messages` (default 0, at most [`MAX_CONTEXT_MESSAGES`]): the
//! task carries that many messages from before it (docs/agent.md).

use serde::Deserialize;
use smolcord::protocol::{Intents, Snowflake};

/// The most channels the section may name: each has its own queue and
/// worker, and a bridge on a Pi that answers in more than this many
/// channels is better split.
pub const MAX_CHANNELS: usize = 64;
/// The most users one channel may list (the same order as a DM bridge's
/// allowed users: a team, not a server).
pub const MAX_CHANNEL_USERS: usize = 256;
/// The most messages a channel's `context_messages` window may hold: one
/// history read (Discord pages 100 at most), a few KiB of task each.
pub const MAX_CONTEXT_MESSAGES: u8 = 50;

/// One answered server channel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    /// The channel id.
    pub id: Snowflake,
    /// Who may use it besides the owner; `None`: the allowed users.
    #[serde(default)]
    pub users: Option<Vec<Snowflake>>,
    /// Only messages that mention the bot (or reply to it) are taken.
    #[serde(default = "yes")]
    pub mention: bool,
    /// How many messages before the taken one the task carries (0: none).
    #[serde(default)]
    pub context_messages: u8,
    /// Answer in a thread started from the message; the conversation then
    /// goes on there without mentions.
    #[serde(default)]
    pub thread: bool,
}

fn yes() -> bool {
    true
}

impl ChannelConfig {
    /// A channel with the defaults: the owner and allowed users, behind a
    /// mention.
    pub fn new(id: Snowflake) -> ChannelConfig {
        ChannelConfig {
            id,
            users: None,
            mention: true,
            context_messages: 0,
            thread: false,
        }
    }
}

/// The intents `channels` adds to the configured ones: GUILD_MESSAGES
/// when any channel is named (else Discord sends no guild message at all,
/// and a DM-only bridge is not sent every message of every server it is
/// in), MESSAGE_CONTENT when one of them needs no mention, or answers in
/// threads (where the conversation goes on without mentions, and Discord
/// withholds the text of a message that does not mention the bot).
pub fn intents_for(channels: &[ChannelConfig]) -> Intents {
    let mut intents = Intents::empty();
    if !channels.is_empty() {
        intents |= Intents::GUILD_MESSAGES;
    }
    if channels
        .iter()
        .any(|channel| !channel.mention || channel.thread)
    {
        intents |= Intents::MESSAGE_CONTENT;
    }
    intents
}

/// What is wrong with the section, if anything (the caller names the key
/// and the file).
pub(super) fn check(channels: &[ChannelConfig]) -> Result<(), String> {
    if channels.len() > MAX_CHANNELS {
        return Err(format!(
            "{} channels; at most {MAX_CHANNELS}",
            channels.len()
        ));
    }
    for (at, channel) in channels.iter().enumerate() {
        if channels[..at]
            .iter()
            .any(|earlier| earlier.id == channel.id)
        {
            return Err(format!("channel {} is listed twice", channel.id));
        }
        if channel.context_messages > MAX_CONTEXT_MESSAGES {
            return Err(format!(
                "channel {}: context_messages {}; at most {MAX_CONTEXT_MESSAGES}",
                channel.id, channel.context_messages
            ));
        }
        if let Some(users) = &channel.users {
            if users.len() > MAX_CHANNEL_USERS {
                return Err(format!(
                    "channel {}: {} users; at most {MAX_CHANNEL_USERS}",
                    channel.id,
                    users.len()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<ChannelConfig>, serde_json::Error> {
        serde_json::from_str(text)
    }

    #[test]
    fn defaults_are_everyone_allowed_behind_a_mention() {
        let channels =
            parse(r#"[{"id": "12"}, {"id": 13, "users": ["5"], "mention": false}]"#).unwrap();
        assert_eq!(channels[0], ChannelConfig::new(Snowflake::new(12)));
        assert_eq!(channels[1].users, Some(vec![Snowflake::new(5)]));
        assert!(!channels[1].mention);
        assert!(parse(r#"[{"id": "12", "mentoin": false}]"#)
            .unwrap_err()
            .to_string()
            .contains("unknown field `mentoin`"));
    }

    #[test]
    fn intents_follow_the_channels() {
        assert_eq!(intents_for(&[]), Intents::empty());
        let behind_mention = [ChannelConfig::new(Snowflake::new(1))];
        assert_eq!(intents_for(&behind_mention), Intents::GUILD_MESSAGES);
        let open = [ChannelConfig {
            mention: false,
            ..ChannelConfig::new(Snowflake::new(1))
        }];
        assert_eq!(
            intents_for(&open),
            Intents::GUILD_MESSAGES | Intents::MESSAGE_CONTENT
        );
    }

    #[test]
    fn bounds_and_duplicates_are_refused() {
        let many: Vec<_> = (0..=MAX_CHANNELS as u64)
            .map(|id| ChannelConfig::new(Snowflake::new(id + 1)))
            .collect();
        assert!(check(&many).unwrap_err().contains("at most 64"));
        let twice = [
            ChannelConfig::new(Snowflake::new(1)),
            ChannelConfig::new(Snowflake::new(1)),
        ];
        assert!(check(&twice).unwrap_err().contains("listed twice"));
        assert!(check(&many[..3]).is_ok());
        let wide = [ChannelConfig {
            context_messages: 51,
            ..ChannelConfig::new(Snowflake::new(1))
        }];
        assert!(check(&wide).unwrap_err().contains("context_messages 51"));
    }
}
