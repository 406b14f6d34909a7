//! INTERACTION_CREATE: a use of one of the application's (slash) commands,
//! and the token that answers it.
//!
//! The token is a credential (for 15 minutes it posts and edits as the
//! application in the interaction's channel), so [`InteractionToken`] is
//! kept like the bot's [`Token`](crate::token::Token): no `Display`, a
//! redacted `Debug`, one [`InteractionToken::expose`]. It goes into a URL
//! path, so only URL-safe characters are taken (Discord's are
//! `[A-Za-z0-9._-]`); anything else fails the decode, naming the field.
//!
//! ```
//! use smolcord::protocol::Interaction;
//! let interaction: Interaction = serde_json::from_str(r#"{
//!     "id": "1300000000000000500", "application_id": "1100000000000000001",
//!     "type": 2, "token": "aW50ZXJhY3Rpb24", "channel_id": "1300000000000000042",
//!     "user": {"id": "1100000000000000007", "username": "owner"},
//!     "data": {"id": "1300000000000000300", "name": "approve", "type": 1,
//!              "options": [{"name": "code", "type": 3, "value": "ABCD2345"}]}
//! }"#).unwrap();
//! assert_eq!(interaction.invoker().unwrap().username, "owner");
//! let data = interaction.data.as_ref().unwrap();
//! assert_eq!(data.option_str("code"), Some("ABCD2345"));
//! assert_eq!(format!("{:?}", interaction.token), "InteractionToken(<redacted>)");
//! ```

use super::events::User;
use super::snowflake::Snowflake;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Interaction type 2: a use of an application (slash) command.
pub const INTERACTION_APPLICATION_COMMAND: u8 = 2;
/// Message flag EPHEMERAL (1 << 6): only the user who used the command
/// sees the answer.
pub const MESSAGE_FLAG_EPHEMERAL: u64 = 1 << 6;
/// Longest interaction token taken. Discord's are a few hundred
/// characters; the cap keeps a hostile payload from putting megabytes
/// into every URL built from it.
pub const INTERACTION_TOKEN_MAX_CHARS: usize = 1024;

/// The token of one interaction: answers and edits it, for 15 minutes.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct InteractionToken(String);

impl InteractionToken {
    /// Wraps a token; `None` if it is empty, longer than
    /// [`INTERACTION_TOKEN_MAX_CHARS`] or has a character that is not
    /// URL-safe (it becomes a path segment).
    pub fn new(raw: &str) -> Option<InteractionToken> {
        let safe = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-');
        (!raw.is_empty() && raw.len() <= INTERACTION_TOKEN_MAX_CHARS && raw.bytes().all(safe))
            .then(|| InteractionToken(raw.to_owned()))
    }

    /// The raw token, for the request path only. Never log or format it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Removes every occurrence of the token from `text`.
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.0, "<redacted>")
    }
}

impl fmt::Debug for InteractionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InteractionToken(<redacted>)")
    }
}

impl Serialize for InteractionToken {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for InteractionToken {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        InteractionToken::new(&raw).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`token`: an interaction token is 1 to {INTERACTION_TOKEN_MAX_CHARS} URL-safe characters ({} given)",
                raw.len()
            ))
        })
    }
}

/// A guild member, as far as an interaction carries one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InteractionMember {
    /// The member's user.
    pub user: User,
}

/// One option given with a command (`/approve code:ABCD2345`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandOptionValue {
    /// The option's name.
    pub name: String,
    /// Its type (3 string, 4 integer, 5 boolean, 6 user, …).
    #[serde(rename = "type")]
    pub kind: u8,
    /// Its value (absent for sub-commands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
}

/// An application command interaction's `data`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandData {
    /// The command's id (as registered).
    pub id: Snowflake,
    /// The command's name.
    pub name: String,
    /// The command's type (1 slash command).
    #[serde(rename = "type", default)]
    pub kind: u8,
    /// The options the user gave.
    #[serde(default)]
    pub options: Vec<CommandOptionValue>,
}

impl CommandData {
    /// The string value of the option `name`, if given as a string.
    pub fn option_str(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|option| option.name == name)
            .and_then(|option| option.value.as_ref())
            .and_then(serde_json::Value::as_str)
    }
}

/// INTERACTION_CREATE's payload (only the fields smolcord reads).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interaction {
    /// Interaction id (its time is when it was used: the 3 s deadline
    /// runs from it).
    pub id: Snowflake,
    /// The application.
    pub application_id: Snowflake,
    /// Interaction type ([`INTERACTION_APPLICATION_COMMAND`] for a command).
    #[serde(rename = "type")]
    pub kind: u8,
    /// The command and its options (commands and components).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<CommandData>,
    /// The guild, when used in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<Snowflake>,
    /// The channel it was used in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<Snowflake>,
    /// Who used it, in a guild.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<InteractionMember>,
    /// Who used it, in a DM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<User>,
    /// Answers it (15 minutes).
    pub token: InteractionToken,
}

impl Interaction {
    /// Who used it: `member.user` in a guild, `user` in a DM.
    pub fn invoker(&self) -> Option<&User> {
        self.member
            .as_ref()
            .map(|member| &member.user)
            .or(self.user.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_that_could_leave_its_path_segment_is_refused() {
        assert!(InteractionToken::new("abc.DEF_12-3").is_some());
        for bad in ["", "a/b", "a?b", "a b", "a%2f", "ä"] {
            assert!(InteractionToken::new(bad).is_none(), "{bad:?}");
        }
        assert!(InteractionToken::new(&"a".repeat(INTERACTION_TOKEN_MAX_CHARS + 1)).is_none());
        let err = serde_json::from_str::<InteractionToken>("\"../x\"").unwrap_err();
        assert!(err.to_string().contains("`token`"), "{err}");
    }

    #[test]
    fn the_token_never_prints_itself() {
        let token = InteractionToken::new("s3cr3t").unwrap();
        assert!(!format!("{token:?}").contains("s3cr3t"));
        assert_eq!(token.redact("x s3cr3t y"), "x <redacted> y");
    }

    #[test]
    fn the_invoker_is_the_member_in_a_guild_and_the_user_in_a_dm() {
        let user = |id| User {
            id: Snowflake::new(id),
            username: "u".into(),
            discriminator: None,
            global_name: None,
            bot: None,
        };
        let mut interaction = Interaction {
            id: Snowflake::new(1),
            application_id: Snowflake::new(2),
            kind: INTERACTION_APPLICATION_COMMAND,
            data: None,
            guild_id: None,
            channel_id: None,
            member: None,
            user: Some(user(7)),
            token: InteractionToken::new("t").unwrap(),
        };
        assert_eq!(interaction.invoker().map(|u| u.id.get()), Some(7));
        interaction.member = Some(InteractionMember { user: user(8) });
        assert_eq!(interaction.invoker().map(|u| u.id.get()), Some(8));
    }
}
