//! What a MESSAGE_CREATE is addressed to, read before the message is
//! decoded in full. With GUILD_MESSAGES the bridge receives every message
//! of every channel it can see and answers a few: a message in a channel
//! not in `channels`, or without the mention its channel requires, is
//! dropped from this peek (serde skips the fields it does not name: no
//! text, author, attachments or member built), and only the rest is
//! decoded as a [`smolcord::protocol::Message`].

use serde::Deserialize;
use smolcord::protocol::Snowflake;

#[derive(Deserialize)]
struct Id {
    id: Snowflake,
}

#[derive(Deserialize)]
struct Answered {
    author: Id,
}

/// The fields a guild message is judged by.
#[derive(Deserialize)]
pub(crate) struct Peek {
    pub channel_id: Snowflake,
    #[serde(default)]
    pub guild_id: Option<Snowflake>,
    #[serde(default)]
    mentions: Vec<Id>,
    #[serde(default)]
    referenced_message: Option<Answered>,
}

impl Peek {
    /// Reads the fields from a MESSAGE_CREATE's raw `d`.
    pub(crate) fn read(raw: &str) -> Result<Peek, serde_json::Error> {
        serde_json::from_str(raw)
    }

    /// Whether the message mentions `bot`.
    pub(crate) fn mentions(&self, bot: Snowflake) -> bool {
        self.mentions.iter().any(|user| user.id == bot)
    }

    /// Whether the message replies to one of `bot`'s.
    pub(crate) fn replies_to(&self, bot: Snowflake) -> bool {
        self.referenced_message
            .as_ref()
            .is_some_and(|answered| answered.author.id == bot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peek_reads_what_a_guild_message_is_judged_by() {
        let raw = r#"{"id":"9","channel_id":"7","guild_id":"5","content":"hi <@1>",
            "author":{"id":"3","username":"u"},"member":{"roles":[]},
            "mentions":[{"id":"1","username":"bot","bot":true}],
            "referenced_message":{"id":"8","author":{"id":"1"},"content":"x"}}"#;
        let peek = Peek::read(raw).unwrap();
        assert_eq!(peek.channel_id, Snowflake::new(7));
        assert_eq!(peek.guild_id, Some(Snowflake::new(5)));
        assert!(peek.mentions(Snowflake::new(1)));
        assert!(peek.replies_to(Snowflake::new(1)));
        assert!(!peek.mentions(Snowflake::new(2)));
        // Deleted reply target (`null`), no mentions: a DM.
        let dm = Peek::read(r#"{"channel_id":"7","referenced_message":null}"#).unwrap();
        assert_eq!(dm.guild_id, None);
        assert!(!dm.replies_to(Snowflake::new(1)));
    }
}
