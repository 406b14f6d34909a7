//! Server channels: which guild messages become tasks, and who counts as
//! allowed in a channel. Pure, like [`super::verdict`]: the dispatch loop
//! asks [`admit`] before it decodes a message in full (from a peek at the
//! raw JSON: `intake/peek.rs`), the worker [`channel_role`] with the fresh
//! access state.
//!
//! A guild message is taken only in a channel named in `channels`, and
//! there (by default) only when it mentions the bot or replies to one of
//! its messages: the bot sits in a team's channel and speaks when spoken
//! to. Everything else is skipped on the loop, before any queue.

use crate::bridge::access::book::Role;
use crate::config::ChannelConfig;
use smolcord::protocol::{Message, Snowflake};

/// How a guild message addresses the bot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Addressing {
    /// It mentions the bot.
    pub mentions: bool,
    /// It replies to one of the bot's messages.
    pub replies: bool,
}

impl Addressing {
    /// How `message` addresses `bot` (unknown before READY: not at all).
    pub(crate) fn of(message: &Message, bot: Option<Snowflake>) -> Addressing {
        bot.map_or_else(Addressing::default, |bot| Addressing {
            mentions: message.mentions_user(bot),
            replies: message.replies_to(bot),
        })
    }
}

/// Why a guild message is not taken, or `Ok` to take it. `entry`: the
/// message's channel in `channels` (and whether the message is in a thread
/// the bot started there: [`crate::bridge::ctx::Ctx::channel_entry`]);
/// `addressing`: whether it mentions or answers the bot.
pub(crate) fn admit(
    addressing: Addressing,
    entry: Option<(&ChannelConfig, bool)>,
) -> Result<(), &'static str> {
    let Some((entry, in_thread)) = entry else {
        return Err("a server channel not in `channels`");
    };
    // In its own thread the bot is the one spoken to: no mention needed.
    if !entry.mention || in_thread {
        return Ok(());
    }
    if addressing.mentions || addressing.replies {
        Ok(())
    } else {
        Err("no mention of the bot (the channel requires one)")
    }
}

/// `role` (from the access book) as it stands in the channel `entry`: the
/// owner everywhere; with a `users` list, those users and nobody else;
/// without one, the allowed users (as in DMs).
pub(crate) fn channel_role(entry: &ChannelConfig, role: Role, author: Snowflake) -> Role {
    match (&entry.users, role) {
        (_, Role::Owner) => Role::Owner,
        (Some(users), _) if users.contains(&author) => Role::Allowed,
        (Some(_), _) => Role::Stranger,
        (None, role) => role,
    }
}

/// What becomes of a server channel's message read back after a gap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReadBack {
    /// A task, as live intake would have made it.
    Take,
    /// Live intake would have skipped it before any queue (why).
    NotAddressed(&'static str),
    /// Addressed to the bot by someone not allowed there: nothing posted,
    /// counted as a stranger's.
    Stranger,
}

/// The read-back's verdict on a message of a server channel, by live
/// intake's rules ([`admit`], then [`channel_role`] on `role`, the
/// author's role in the access book). A user's message is a default one
/// (type 0) or a reply (19); Discord's system messages in a history (a
/// thread's starter message, joins, pins) are no request to anyone.
pub(crate) fn read_back(
    message: &Message,
    bot: Option<Snowflake>,
    entry: Option<(&ChannelConfig, bool)>,
    role: Role,
) -> ReadBack {
    if !matches!(message.kind, 0 | 19) {
        return ReadBack::NotAddressed("a system message");
    }
    if let Err(why) = admit(Addressing::of(message, bot), entry) {
        return ReadBack::NotAddressed(why);
    }
    let role = match entry {
        Some((entry, _)) => channel_role(entry, role, message.author.id),
        None => role,
    };
    match role {
        Role::Stranger => ReadBack::Stranger,
        _ => ReadBack::Take,
    }
}

/// The text for the agent: the message without the bot's mention (`<@id>`
/// or the older `<@!id>`), which only addressed the bot.
pub(crate) fn without_mention(content: &str, bot: Option<Snowflake>) -> String {
    let Some(bot) = bot else {
        return content.to_owned();
    };
    content
        .replace(&format!("<@{bot}>"), "")
        .replace(&format!("<@!{bot}>"), "")
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use smolcord::protocol::User;

    const BOT: Snowflake = Snowflake::new(1);

    fn user(id: u64) -> User {
        User {
            id: Snowflake::new(id),
            username: "u".into(),
            discriminator: None,
            global_name: None,
            bot: None,
        }
    }

    fn message(mentions: &[u64], replies_to: Option<u64>) -> Message {
        let mut message: Message = serde_json::from_value(serde_json::json!({
            "id": "100", "channel_id": "7", "guild_id": "9",
            "author": {"id": "5", "username": "u"}, "content": "hi"
        }))
        .unwrap();
        message.mentions = mentions.iter().map(|id| user(*id)).collect();
        if let Some(author) = replies_to {
            let mut answered = message.clone();
            answered.author = user(author);
            message.referenced_message = Some(Box::new(answered));
        }
        message
    }

    #[test]
    fn a_listed_channel_takes_mentions_and_replies_to_the_bot() {
        let entry = ChannelConfig::new(Snowflake::new(7));
        let bot = Some(BOT);
        let listed = Some((&entry, false));
        let of = |mentions: &[u64], replies_to: Option<u64>, bot| {
            Addressing::of(&message(mentions, replies_to), bot)
        };
        assert_eq!(admit(of(&[1], None, bot), listed), Ok(()));
        assert_eq!(admit(of(&[], Some(1), bot), listed), Ok(()));
        assert!(admit(of(&[], None, bot), listed).is_err());
        assert!(admit(of(&[2], Some(3), bot), listed).is_err());
        assert!(admit(of(&[1], None, None), listed).is_err());
        assert!(admit(of(&[1], None, bot), None).is_err());
        assert_eq!(
            admit(of(&[], None, bot), Some((&entry, true))),
            Ok(()),
            "in the bot's thread"
        );
        let open = ChannelConfig {
            mention: false,
            ..entry.clone()
        };
        assert_eq!(admit(of(&[], None, bot), Some((&open, false))), Ok(()));
    }

    #[test]
    fn a_users_list_replaces_the_allowed_users() {
        let everyone = ChannelConfig::new(Snowflake::new(7));
        let listed = ChannelConfig {
            users: Some(vec![Snowflake::new(5)]),
            ..everyone.clone()
        };
        let (five, six) = (Snowflake::new(5), Snowflake::new(6));
        assert_eq!(channel_role(&everyone, Role::Allowed, six), Role::Allowed);
        assert_eq!(
            channel_role(&everyone, Role::Stranger, five),
            Role::Stranger
        );
        assert_eq!(channel_role(&listed, Role::Stranger, five), Role::Allowed);
        assert_eq!(channel_role(&listed, Role::Allowed, six), Role::Stranger);
        assert_eq!(channel_role(&listed, Role::Owner, six), Role::Owner);
    }

    #[test]
    fn a_message_read_back_is_judged_as_live_intake_would() {
        let entry = ChannelConfig::new(Snowflake::new(7));
        let listed = ChannelConfig {
            users: Some(vec![Snowflake::new(6)]),
            ..entry.clone()
        };
        let open = ChannelConfig {
            mention: false,
            ..entry.clone()
        };
        let bot = Some(BOT);
        let mut system = message(&[1], None);
        system.kind = 21;
        type Row<'a> = (Message, Option<(&'a ChannelConfig, bool)>, Role, ReadBack);
        let table: [Row; 9] = [
            (
                message(&[1], None),
                Some((&entry, false)),
                Role::Allowed,
                ReadBack::Take,
            ),
            (
                message(&[], Some(1)),
                Some((&entry, false)),
                Role::Owner,
                ReadBack::Take,
            ),
            (
                message(&[], None),
                Some((&entry, false)),
                Role::Allowed,
                ReadBack::NotAddressed("no mention of the bot (the channel requires one)"),
            ),
            (
                message(&[], None),
                Some((&open, false)),
                Role::Allowed,
                ReadBack::Take,
            ),
            (
                message(&[], None),
                Some((&entry, true)),
                Role::Allowed,
                ReadBack::Take,
            ),
            (
                message(&[1], None),
                Some((&entry, false)),
                Role::Stranger,
                ReadBack::Stranger,
            ),
            // Author 5 is not in the channel's own list.
            (
                message(&[1], None),
                Some((&listed, false)),
                Role::Allowed,
                ReadBack::Stranger,
            ),
            (
                message(&[1], None),
                None,
                Role::Allowed,
                ReadBack::NotAddressed("a server channel not in `channels`"),
            ),
            (
                system,
                Some((&entry, true)),
                Role::Allowed,
                ReadBack::NotAddressed("a system message"),
            ),
        ];
        for (n, (message, entry, role, expected)) in table.into_iter().enumerate() {
            assert_eq!(read_back(&message, bot, entry, role), expected, "row {n}");
        }
    }

    #[test]
    fn the_mention_is_not_part_of_the_task() {
        assert_eq!(without_mention("<@1> what time?", Some(BOT)), "what time?");
        assert_eq!(without_mention("so <@!1>, well", Some(BOT)), "so , well");
        assert_eq!(without_mention("<@2> hi", Some(BOT)), "<@2> hi");
    }
}
