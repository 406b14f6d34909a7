//! The channel directory: which channels the bot can see, from GUILD_CREATE
//! and CHANNEL_CREATE / UPDATE / DELETE, saved as `channels.json` so an
//! agent (or an operator) can resolve a channel id to a name.
//!
//! Guilds send their whole channel list on every connect, so writes are
//! debounced by the persister: a burst of events is one write.

use crate::protocol::{Channel, GuildCreate, Snowflake};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The file name inside the state dir.
pub const DIRECTORY_FILE: &str = "channels.json";

/// One known channel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelEntry {
    /// Channel type number.
    pub kind: u8,
    /// The guild, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<Snowflake>,
    /// Name (guild channels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<Snowflake>,
}

/// What `channels.json` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelDirectory {
    /// Guild names by id.
    pub guilds: BTreeMap<Snowflake, Option<String>>,
    /// Channels by id.
    pub channels: BTreeMap<Snowflake, ChannelEntry>,
}

fn entry(channel: &Channel, guild: Option<Snowflake>) -> ChannelEntry {
    ChannelEntry {
        kind: channel.kind.0,
        guild_id: channel.guild_id.or(guild),
        name: channel.name.clone(),
        parent_id: channel.parent_id,
    }
}

impl ChannelDirectory {
    /// Applies GUILD_CREATE: the guild's channel list replaces what was
    /// known for it. Returns whether anything changed.
    pub fn guild_create(&mut self, guild: &GuildCreate) -> bool {
        if guild.unavailable == Some(true) {
            return false;
        }
        let before = self.clone();
        self.guilds.insert(guild.id, guild.name.clone());
        self.channels.retain(|_, c| c.guild_id != Some(guild.id));
        for channel in guild.channels.iter().chain(&guild.threads) {
            self.channels
                .insert(channel.id, entry(channel, Some(guild.id)));
        }
        *self != before
    }

    /// Applies CHANNEL_CREATE or CHANNEL_UPDATE.
    pub fn upsert(&mut self, channel: &Channel) -> bool {
        let new = entry(channel, None);
        self.channels.insert(channel.id, new.clone()) != Some(new)
    }

    /// Applies CHANNEL_DELETE.
    pub fn delete(&mut self, channel: &Channel) -> bool {
        self.channels.remove(&channel.id).is_some()
    }

    /// Applies a dispatch by name; `Ok(changed)`, or the decode error.
    pub fn apply(&mut self, name: &str, raw: &str) -> Result<bool, serde_json::Error> {
        Ok(match name {
            "GUILD_CREATE" => self.guild_create(&serde_json::from_str(raw)?),
            "CHANNEL_CREATE" | "CHANNEL_UPDATE" => self.upsert(&serde_json::from_str(raw)?),
            "CHANNEL_DELETE" => self.delete(&serde_json::from_str(raw)?),
            _ => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guild_and_channel_events() {
        let mut dir = ChannelDirectory::default();
        let guild = r#"{"id":"3","name":"home","channels":[
            {"id":"10","type":0,"name":"general"},{"id":"11","type":4,"name":"cat"}]}"#;
        assert!(dir.apply("GUILD_CREATE", guild).unwrap());
        assert!(
            !dir.apply("GUILD_CREATE", guild).unwrap(),
            "same list: no change"
        );
        assert_eq!(dir.channels.len(), 2);
        assert_eq!(
            dir.channels[&Snowflake::new(10)].guild_id,
            Some(Snowflake::new(3))
        );
        assert!(dir
            .apply(
                "CHANNEL_UPDATE",
                r#"{"id":"10","type":0,"guild_id":"3","name":"renamed"}"#
            )
            .unwrap());
        assert_eq!(
            dir.channels[&Snowflake::new(10)].name.as_deref(),
            Some("renamed")
        );
        assert!(dir
            .apply("CHANNEL_DELETE", r#"{"id":"11","type":4,"guild_id":"3"}"#)
            .unwrap());
        assert_eq!(dir.channels.len(), 1);
        // A guild that reconnects with fewer channels loses the missing ones.
        assert!(dir
            .apply("GUILD_CREATE", r#"{"id":"3","name":"home","channels":[]}"#)
            .unwrap());
        assert!(dir.channels.is_empty());
        assert!(dir.apply("CHANNEL_CREATE", r#"{"id":"x"}"#).is_err());
        assert!(!dir.apply("MESSAGE_CREATE", "{}").unwrap());
    }
}
