//! The `reactions` section: emoji the bot puts on a user's message when it
//! is taken and when it is answered or failed. Off by default (each key
//! optional):
//!
//! ```json
//! "reactions": {"taken": "👀", "done": "✅", "failed": "⚠️"}
//! ```
//!
//! A Unicode emoji, or a server's custom one as `name:id`.

use serde::de::{self, Deserializer};
use serde::Deserialize;
use smolcord::rest::Emoji;

/// Which emoji mark a message's progress.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reactions {
    /// Taken into handling (the agent runs, or the task is spooled).
    #[serde(default, deserialize_with = "emoji")]
    pub taken: Option<Emoji>,
    /// Answered.
    #[serde(default, deserialize_with = "emoji")]
    pub done: Option<Emoji>,
    /// The agent failed, or the answer could not be delivered.
    #[serde(default, deserialize_with = "emoji")]
    pub failed: Option<Emoji>,
}

fn emoji<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Emoji>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(text) => Emoji::new(&text).map(Some).map_err(de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emoji_are_checked_as_they_are_read() {
        let r: Reactions = serde_json::from_str(r#"{"taken": "👀", "done": "ok:123"}"#).unwrap();
        assert_eq!(r.taken.unwrap().as_str(), "👀");
        assert_eq!(r.done.unwrap().as_str(), "ok:123");
        assert_eq!(r.failed, None);
        let bad = serde_json::from_str::<Reactions>(r#"{"taken": "a b"}"#).unwrap_err();
        assert!(bad.to_string().contains("not an emoji"), "{bad}");
        assert!(serde_json::from_str::<Reactions>(r#"{"take": "👀"}"#).is_err());
    }
}
