//! Intake: what becomes of a MESSAGE_CREATE. Two pure decisions:
//!
//! - [`classify`], on the dispatch loop, never waits: ignore our own (and
//!   other bots') messages, skip replays of messages already processed
//!   before a restart, catch the owner's `!restart`, queue the rest;
//! - [`decide`], in the channel's worker once access is fresh: accept,
//!   make the first user the owner (TOFU), answer with a pairing code, or
//!   stay silent (strangers in guild channels; everyone but the owner in
//!   safe mode).

use crate::bridge::access::book::Role;
use crate::bridge::access::restart::{is_restart_command, RuntimeState};
use smolcord::protocol::{Message, Snowflake};

/// The dispatch loop's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Intake {
    /// Drop it (why, for the debug log).
    Ignore(&'static str),
    /// Processed before a restart: skip.
    Replay,
    /// The owner asks for a restart.
    Restart,
    /// Into the channel's queue.
    Queue,
}

pub(crate) fn classify(
    message: &Message,
    bot_user: Option<Snowflake>,
    runtime: &RuntimeState,
    role: Role,
) -> Intake {
    if bot_user == Some(message.author.id) {
        return Intake::Ignore("our own message");
    }
    if message.author.bot == Some(true) {
        return Intake::Ignore("from a bot");
    }
    if runtime.is_processed(message.channel_id, message.id) {
        return Intake::Replay;
    }
    if role == Role::Owner && is_restart_command(&message.content) {
        return Intake::Restart;
    }
    Intake::Queue
}

/// The worker's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Hand it to the agent.
    Accept,
    /// TOFU: this user becomes the owner, then Accept.
    BecomeOwner,
    /// A stranger in a DM: pairing.
    Pair,
    /// Say nothing (why, for the log).
    Silent(&'static str),
}

pub(crate) fn decide(role: Role, safe_mode: bool, tofu_open: bool, direct: bool) -> Verdict {
    match role {
        Role::Owner => Verdict::Accept,
        _ if safe_mode => Verdict::Silent("safe mode: only the owner is answered"),
        Role::Allowed => Verdict::Accept,
        Role::Stranger if !direct => Verdict::Silent("a stranger outside a DM"),
        Role::Stranger if tofu_open => Verdict::BecomeOwner,
        Role::Stranger => Verdict::Pair,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smolcord::protocol::User;

    fn message(author: u64, content: &str) -> Message {
        Message {
            id: Snowflake::new(100),
            channel_id: Snowflake::new(7),
            guild_id: None,
            author: User {
                id: Snowflake::new(author),
                username: "u".into(),
                discriminator: None,
                global_name: None,
                bot: None,
            },
            content: content.into(),
            timestamp: None,
            attachments: vec![],
            flags: None,
            kind: 0,
            message_reference: None,
        }
    }

    #[test]
    fn classify_messages() {
        let runtime = RuntimeState::default();
        let bot = Some(Snowflake::new(1));
        assert_eq!(
            classify(&message(1, "hi"), bot, &runtime, Role::Stranger),
            Intake::Ignore("our own message")
        );
        let mut from_bot = message(2, "hi");
        from_bot.author.bot = Some(true);
        assert_eq!(
            classify(&from_bot, bot, &runtime, Role::Stranger),
            Intake::Ignore("from a bot")
        );
        assert_eq!(
            classify(&message(2, "!restart"), bot, &runtime, Role::Owner),
            Intake::Restart
        );
        assert_eq!(
            classify(&message(2, "!restart"), bot, &runtime, Role::Allowed),
            Intake::Queue
        );
        let mut seen = RuntimeState::default();
        seen.mark_processed(Snowflake::new(7), Snowflake::new(100));
        assert_eq!(
            classify(&message(2, "!restart"), bot, &seen, Role::Owner),
            Intake::Replay
        );
        assert_eq!(
            classify(&message(2, "hi"), None, &runtime, Role::Allowed),
            Intake::Queue
        );
    }

    #[test]
    fn decide_access() {
        use Role::*;
        assert_eq!(decide(Owner, true, false, true), Verdict::Accept);
        assert!(matches!(
            decide(Allowed, true, false, true),
            Verdict::Silent(_)
        ));
        assert!(matches!(
            decide(Stranger, true, true, true),
            Verdict::Silent(_)
        ));
        assert_eq!(decide(Allowed, false, false, false), Verdict::Accept);
        assert_eq!(decide(Stranger, false, true, true), Verdict::BecomeOwner);
        assert_eq!(decide(Stranger, false, false, true), Verdict::Pair);
        assert!(matches!(
            decide(Stranger, false, true, false),
            Verdict::Silent(_)
        ));
    }
}
