//! The channel directory: which channels the bot can see, from GUILD_CREATE,
//! GUILD_DELETE and CHANNEL_CREATE / UPDATE / DELETE, saved as
//! `channels.json` so an agent (or an operator) can resolve a channel id to
//! a name.
//!
//! A fresh session brings every guild's whole channel list at once (2 500
//! GUILD_CREATEs on a full shard), so an event must cost what it carries,
//! not what the directory holds. The directory is kept per guild, and each
//! guild's part is shared (an `Arc`) with the snapshot a write takes: an
//! event touches only its own guild's part (copying it first only if a
//! write still holds it), and [`ChannelDirectory::snapshot`] copies one
//! pointer per guild. The writer (`persist::Deferred`) takes that snapshot
//! once its debounce is over and serialises it on the blocking pool, so
//! nothing on the event loop grows with the directory.
//!
//! Bounded: at most [`MAX_GUILDS`] guilds, [`MAX_CHANNELS`] channels,
//! [`MAX_GUILD_CHANNELS`] of them in one guild, names cut at
//! [`MAX_NAME_CHARS`]. What does not fit is left out of the file (the first
//! time, with a warning in the log).
//!
//! ```
//! use smolcord_app::bridge::store::directory::ChannelDirectory;
//! use smolcord::protocol::Snowflake;
//!
//! let mut dir = ChannelDirectory::default();
//! let guild = r#"{"id":"3","name":"home","channels":[{"id":"10","type":0,"name":"general"}]}"#;
//! assert!(dir.apply("GUILD_CREATE", guild).unwrap());
//! assert!(!dir.apply("GUILD_CREATE", guild).unwrap(), "nothing new");
//! let file = serde_json::to_value(dir.snapshot()).unwrap();
//! assert_eq!(file["guilds"]["3"], "home");
//! assert_eq!(file["channels"]["10"]["name"], "general");
//! assert_eq!(dir.channel(Snowflake::new(10)).unwrap().guild_id, Some(Snowflake::new(3)));
//! ```

use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize, Serializer};
use smolcord::protocol::{Channel, GuildCreate, Snowflake, UnavailableGuild};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The file name inside the state dir.
pub const DIRECTORY_FILE: &str = "channels.json";

/// Guilds kept at most: ten shards' worth (Discord asks a bot to shard at
/// 2 500 guilds per shard).
pub const MAX_GUILDS: usize = 25_000;
/// Channels kept at most, all guilds together (2 500 guilds of 60).
pub const MAX_CHANNELS: usize = 150_000;
/// Channels kept at most for one guild: Discord's 500 channels (categories
/// included) and 1 000 active threads.
pub const MAX_GUILD_CHANNELS: usize = 1_500;
/// Guild and channel names are cut at this many characters (Discord's
/// longest name is 100).
pub const MAX_NAME_CHARS: usize = 100;

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

/// What is known of one guild (or, under the key `None`, of the channels
/// outside any guild).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Part {
    /// The guild's name, once its GUILD_CREATE came: only such guilds are
    /// listed under `guilds` (a CHANNEL_* event alone lists its channel).
    created: Option<Option<String>>,
    channels: Channels,
}

/// One part's channels, sorted by id: a guild of one channel costs that
/// channel, not a tree node sized for eleven (20 000 small guilds took
/// 17 MiB more as `BTreeMap`s). Changes are O(channels of the guild).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Channels(Vec<(Snowflake, ChannelEntry)>);

impl Channels {
    /// From a list in event order; of two entries with one id the later wins.
    fn from_list(mut list: Vec<(Snowflake, ChannelEntry)>) -> Channels {
        list.reverse();
        list.sort_by_key(|(id, _)| *id);
        list.dedup_by_key(|(id, _)| *id);
        list.shrink_to_fit();
        Channels(list)
    }

    fn find(&self, id: &Snowflake) -> Result<usize, usize> {
        self.0.binary_search_by_key(id, |(key, _)| *key)
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn contains_key(&self, id: &Snowflake) -> bool {
        self.find(id).is_ok()
    }

    fn get(&self, id: &Snowflake) -> Option<&ChannelEntry> {
        self.find(id).ok().map(|at| &self.0[at].1)
    }

    fn insert(&mut self, id: Snowflake, entry: ChannelEntry) {
        match self.find(&id) {
            Ok(at) => self.0[at].1 = entry,
            Err(at) => self.0.insert(at, (id, entry)),
        }
    }

    fn remove(&mut self, id: &Snowflake) {
        if let Ok(at) = self.find(id) {
            self.0.remove(at);
        }
    }

    fn keys(&self) -> impl Iterator<Item = &Snowflake> {
        self.0.iter().map(|(id, _)| id)
    }

    fn iter(&self) -> impl Iterator<Item = (&Snowflake, &ChannelEntry)> {
        self.0.iter().map(|(id, entry)| (id, entry))
    }
}

/// The channels the bot can see, per guild (see the module doc).
#[derive(Debug, Default)]
pub struct ChannelDirectory {
    parts: BTreeMap<Option<Snowflake>, Arc<Part>>,
    /// Which part holds each channel: one entry per channel, so a channel
    /// is never listed twice and a CHANNEL_DELETE without a guild finds it.
    home: HashMap<Snowflake, Option<Snowflake>>,
    /// Guilds and channels not kept because of a cap.
    left_out: u64,
}

/// The directory as it was when taken: what `channels.json` holds,
/// `{"guilds": {id: name}, "channels": {id: entry}}`, both by id.
/// Serialising it is the work that grows with the directory; it is done
/// where the snapshot is sent (the blocking pool).
#[derive(Clone, Debug)]
pub struct DirectorySnapshot {
    parts: Vec<(Option<Snowflake>, Arc<Part>)>,
}

fn bounded_name(name: &Option<String>) -> Option<String> {
    name.as_ref()
        .map(|name| match name.char_indices().nth(MAX_NAME_CHARS) {
            Some((cut, _)) => name[..cut].to_owned(),
            None => name.clone(),
        })
}

fn entry(channel: &Channel, guild: Option<Snowflake>) -> ChannelEntry {
    ChannelEntry {
        kind: channel.kind.0,
        guild_id: guild,
        name: bounded_name(&channel.name),
        parent_id: channel.parent_id,
    }
}

impl ChannelDirectory {
    /// Applies GUILD_CREATE: the guild's channel list replaces what was
    /// known for it. Returns whether anything changed. Costs the size of
    /// the event (and of what was known of that guild), whatever the size
    /// of the directory.
    pub fn guild_create(&mut self, guild: &GuildCreate) -> bool {
        if guild.unavailable == Some(true) {
            return false;
        }
        let key = Some(guild.id);
        let old = self.parts.get(&key).cloned();
        if old.is_none() && self.guilds() >= MAX_GUILDS {
            self.leave_out(&format!(
                "guild {} not kept: {MAX_GUILDS} guilds known",
                guild.id
            ));
            return false;
        }
        let held_elsewhere = self.home.len() - old.as_ref().map_or(0, |p| p.channels.len());
        let room = MAX_CHANNELS
            .saturating_sub(held_elsewhere)
            .min(MAX_GUILD_CHANNELS);
        // A guild's own list: its channels, whatever they claim.
        let mut channels = Channels::from_list(
            guild
                .channels
                .iter()
                .chain(&guild.threads)
                .map(|channel| (channel.id, entry(channel, key)))
                .collect(),
        );
        let cut = channels.len().saturating_sub(room);
        channels.0.truncate(room);
        let part = Part {
            created: Some(bounded_name(&guild.name)),
            channels,
        };
        if cut > 0 {
            self.leave_out(&format!(
                "{cut} channel(s) of guild {} not kept (at most {MAX_GUILD_CHANNELS} per guild, {MAX_CHANNELS} in all)",
                guild.id
            ));
            self.left_out += cut as u64 - 1;
        }
        if old.as_deref() == Some(&part) {
            return false;
        }
        if let Some(old) = old {
            for id in old.channels.keys() {
                if self.home.get(id) == Some(&key) {
                    self.home.remove(id);
                }
            }
        }
        for &id in part.channels.keys() {
            if let Some(previous) = self.home.insert(id, key) {
                if previous != key {
                    self.remove_from(previous, id);
                }
            }
        }
        self.parts.insert(key, Arc::new(part));
        true
    }

    /// Applies GUILD_DELETE: the bot left the guild (or was removed), so
    /// its channels go; a guild in an outage (`unavailable`) is kept, as
    /// it comes back with a GUILD_CREATE.
    pub fn guild_delete(&mut self, guild: &UnavailableGuild) -> bool {
        if guild.unavailable {
            return false;
        }
        let key = Some(guild.id);
        let Some(part) = self.parts.remove(&key) else {
            return false;
        };
        for id in part.channels.keys() {
            if self.home.get(id) == Some(&key) {
                self.home.remove(id);
            }
        }
        true
    }

    /// Applies CHANNEL_CREATE or CHANNEL_UPDATE.
    pub fn upsert(&mut self, channel: &Channel) -> bool {
        let key = channel.guild_id;
        let new = entry(channel, key);
        let previous = self.home.get(&channel.id).copied();
        if previous == Some(key) {
            let part = self.parts.entry(key).or_default();
            if part.channels.get(&channel.id) == Some(&new) {
                return false;
            }
            Arc::make_mut(part).channels.insert(channel.id, new);
            return true;
        }
        let full = if previous.is_none() && self.home.len() >= MAX_CHANNELS {
            Some("channels known")
        } else if key.is_some() && !self.parts.contains_key(&key) && self.guilds() >= MAX_GUILDS {
            Some("guilds known")
        } else if self
            .parts
            .get(&key)
            .is_some_and(|p| p.channels.len() >= MAX_GUILD_CHANNELS)
        {
            Some("channels known in its guild")
        } else {
            None
        };
        if let Some(what) = full {
            self.leave_out(&format!("channel {} not kept: the most {what}", channel.id));
            return false;
        }
        if let Some(previous) = previous {
            self.remove_from(previous, channel.id);
        }
        let part = self.parts.entry(key).or_default();
        Arc::make_mut(part).channels.insert(channel.id, new);
        self.home.insert(channel.id, key);
        true
    }

    /// Applies CHANNEL_DELETE.
    pub fn delete(&mut self, channel: &Channel) -> bool {
        match self.home.remove(&channel.id) {
            Some(key) => {
                self.remove_from(key, channel.id);
                true
            }
            None => false,
        }
    }

    /// Applies a dispatch by name; `Ok(changed)`, or the decode error.
    pub fn apply(&mut self, name: &str, raw: &str) -> Result<bool, serde_json::Error> {
        Ok(match name {
            "GUILD_CREATE" => self.guild_create(&serde_json::from_str(raw)?),
            "GUILD_DELETE" => self.guild_delete(&serde_json::from_str(raw)?),
            "CHANNEL_CREATE" | "CHANNEL_UPDATE" => self.upsert(&serde_json::from_str(raw)?),
            "CHANNEL_DELETE" => self.delete(&serde_json::from_str(raw)?),
            _ => false,
        })
    }

    /// The directory as it is now, for a write: one pointer per guild.
    pub fn snapshot(&self) -> DirectorySnapshot {
        DirectorySnapshot {
            parts: self
                .parts
                .iter()
                .map(|(key, part)| (*key, part.clone()))
                .collect(),
        }
    }

    /// A channel, if known.
    pub fn channel(&self, id: Snowflake) -> Option<&ChannelEntry> {
        let key = self.home.get(&id)?;
        self.parts.get(key)?.channels.get(&id)
    }

    /// Channels known.
    pub fn channels(&self) -> usize {
        self.home.len()
    }

    /// Guilds known (those heard of by CHANNEL_* events alone included).
    pub fn guilds(&self) -> usize {
        self.parts.len() - usize::from(self.parts.contains_key(&None))
    }

    /// Guilds and channels not kept because of a cap, since the start.
    pub fn left_out(&self) -> u64 {
        self.left_out
    }

    fn remove_from(&mut self, key: Option<Snowflake>, id: Snowflake) {
        if let Some(part) = self.parts.get_mut(&key) {
            if part.channels.contains_key(&id) {
                Arc::make_mut(part).channels.remove(&id);
            }
            if part.channels.is_empty() && part.created.is_none() {
                self.parts.remove(&key);
            }
        }
    }

    fn leave_out(&mut self, what: &str) {
        if self.left_out == 0 {
            log::warn!(
                "the channel directory is full ({what}); {DIRECTORY_FILE} leaves out what does not fit (at most {MAX_GUILDS} guilds, {MAX_CHANNELS} channels, {MAX_GUILD_CHANNELS} per guild); not logged again"
            );
        }
        self.left_out += 1;
    }
}

impl Serialize for DirectorySnapshot {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Guilds<'a>(&'a [(Option<Snowflake>, Arc<Part>)]);
        impl Serialize for Guilds<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_map(
                    self.0
                        .iter()
                        .filter_map(|(key, part)| Some((key.as_ref()?, part.created.as_ref()?))),
                )
            }
        }
        struct Channels<'a>(Vec<(&'a Snowflake, &'a ChannelEntry)>);
        impl Serialize for Channels<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_map(self.0.iter().copied())
            }
        }
        let mut channels: Vec<_> = self
            .parts
            .iter()
            .flat_map(|(_, part)| part.channels.iter())
            .collect();
        channels.sort_unstable_by_key(|(id, _)| **id);
        let mut file = serializer.serialize_struct("ChannelDirectory", 2)?;
        file.serialize_field("guilds", &Guilds(&self.parts))?;
        file.serialize_field("channels", &Channels(channels))?;
        file.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn file(dir: &ChannelDirectory) -> Value {
        serde_json::to_value(dir.snapshot()).unwrap()
    }

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
        assert_eq!(dir.channels(), 2);
        assert_eq!(
            dir.channel(Snowflake::new(10)).unwrap().guild_id,
            Some(Snowflake::new(3))
        );
        assert!(dir
            .apply(
                "CHANNEL_UPDATE",
                r#"{"id":"10","type":0,"guild_id":"3","name":"renamed"}"#
            )
            .unwrap());
        assert_eq!(
            dir.channel(Snowflake::new(10)).unwrap().name.as_deref(),
            Some("renamed")
        );
        assert!(dir
            .apply("CHANNEL_DELETE", r#"{"id":"11","type":4,"guild_id":"3"}"#)
            .unwrap());
        assert_eq!(dir.channels(), 1);
        // A guild that reconnects with fewer channels loses the missing ones.
        assert!(dir
            .apply("GUILD_CREATE", r#"{"id":"3","name":"home","channels":[]}"#)
            .unwrap());
        assert_eq!(dir.channels(), 0);
        assert_eq!(file(&dir), json!({"guilds": {"3": "home"}, "channels": {}}));
        assert!(dir.apply("CHANNEL_CREATE", r#"{"id":"x"}"#).is_err());
        assert!(!dir.apply("MESSAGE_CREATE", "{}").unwrap());
    }

    #[test]
    fn the_file_lists_every_channel_once_by_id() {
        let mut dir = ChannelDirectory::default();
        dir.apply(
            "GUILD_CREATE",
            r#"{"id":"5","name":"b","channels":[{"id":"30","type":0,"name":"x"},{"id":"10","type":0,"name":"y"}]}"#,
        )
        .unwrap();
        dir.apply(
            "GUILD_CREATE",
            r#"{"id":"4","name":"a","channels":[{"id":"20","type":0,"name":"z"}]}"#,
        )
        .unwrap();
        // A channel event before its guild's GUILD_CREATE, and a DM channel.
        dir.apply(
            "CHANNEL_CREATE",
            r#"{"id":"40","type":0,"guild_id":"6","name":"early"}"#,
        )
        .unwrap();
        dir.apply("CHANNEL_CREATE", r#"{"id":"15","type":1}"#)
            .unwrap();
        let text = serde_json::to_string(&dir.snapshot()).unwrap();
        assert_eq!(
            text,
            r#"{"guilds":{"4":"a","5":"b"},"channels":{"10":{"kind":0,"guild_id":"5","name":"y"},"15":{"kind":1},"20":{"kind":0,"guild_id":"4","name":"z"},"30":{"kind":0,"guild_id":"5","name":"x"},"40":{"kind":0,"guild_id":"6","name":"early"}}}"#
        );
        // The early channel's guild arrives without it: it goes.
        assert!(dir
            .apply("GUILD_CREATE", r#"{"id":"6","name":"c","channels":[]}"#)
            .unwrap());
        assert!(dir.channel(Snowflake::new(40)).is_none());
        // A channel claimed by another guild's list moves there, once.
        dir.apply(
            "GUILD_CREATE",
            r#"{"id":"4","name":"a","channels":[{"id":"20","type":0,"name":"z"},{"id":"30","type":0,"name":"x"}]}"#,
        )
        .unwrap();
        assert_eq!(dir.channels(), 4);
        let file = file(&dir);
        assert_eq!(file["channels"]["30"]["guild_id"], "4");
        assert_eq!(file["channels"].as_object().unwrap().len(), 4);
        // A delete without its guild still finds the channel.
        assert!(dir
            .apply("CHANNEL_DELETE", r#"{"id":"30","type":0}"#)
            .unwrap());
        assert!(dir.channel(Snowflake::new(30)).is_none());
    }

    #[test]
    fn a_guild_left_goes_and_one_in_an_outage_stays() {
        let mut dir = ChannelDirectory::default();
        let guild =
            r#"{"id":"3","name":"home","channels":[{"id":"10","type":0,"name":"general"}]}"#;
        dir.apply("GUILD_CREATE", guild).unwrap();
        assert!(!dir
            .apply("GUILD_DELETE", r#"{"id":"3","unavailable":true}"#)
            .unwrap());
        assert_eq!(dir.channels(), 1);
        assert!(dir.apply("GUILD_DELETE", r#"{"id":"3"}"#).unwrap());
        assert_eq!((dir.guilds(), dir.channels()), (0, 0));
        assert!(!dir.apply("GUILD_DELETE", r#"{"id":"3"}"#).unwrap());
        // An outage's GUILD_CREATE says nothing about channels.
        assert!(!dir
            .apply("GUILD_CREATE", r#"{"id":"3","unavailable":true}"#)
            .unwrap());
    }

    #[test]
    fn a_snapshot_keeps_what_it_saw() {
        let mut dir = ChannelDirectory::default();
        let guild =
            r#"{"id":"3","name":"home","channels":[{"id":"10","type":0,"name":"general"}]}"#;
        dir.apply("GUILD_CREATE", guild).unwrap();
        let before = dir.snapshot();
        dir.apply(
            "CHANNEL_UPDATE",
            r#"{"id":"10","type":0,"guild_id":"3","name":"renamed"}"#,
        )
        .unwrap();
        dir.apply("GUILD_DELETE", r#"{"id":"3"}"#).unwrap();
        let before = serde_json::to_value(before).unwrap();
        assert_eq!(before["channels"]["10"]["name"], "general");
        assert_eq!(file(&dir)["guilds"], json!({}));
    }

    fn guild_with(id: u64, first_channel: u64, channels: u64) -> GuildCreate {
        GuildCreate {
            id: Snowflake::new(id),
            name: Some(format!("g{id}")),
            unavailable: None,
            channels: (first_channel..first_channel + channels)
                .map(|c| Channel {
                    id: Snowflake::new(c),
                    kind: smolcord::protocol::ChannelType::GUILD_TEXT,
                    guild_id: None,
                    name: None,
                    parent_id: None,
                    position: None,
                    recipients: Vec::new(),
                    last_message_id: None,
                })
                .collect(),
            threads: Vec::new(),
        }
    }

    #[test]
    fn the_directory_is_bounded() {
        let mut dir = ChannelDirectory::default();
        // One guild over its own cap keeps MAX_GUILD_CHANNELS.
        dir.guild_create(&guild_with(1, 1_000_000, MAX_GUILD_CHANNELS as u64 + 7));
        assert_eq!(dir.channels(), MAX_GUILD_CHANNELS);
        assert_eq!(dir.left_out(), 7);
        dir.apply(
            "CHANNEL_CREATE",
            r#"{"id":"5","type":0,"guild_id":"1","name":"one more"}"#,
        )
        .unwrap();
        assert_eq!(dir.channels(), MAX_GUILD_CHANNELS);
        // Guilds up to MAX_CHANNELS in all, then guilds without channels.
        let per_guild = MAX_GUILD_CHANNELS as u64;
        let mut id = 2;
        while dir.channels() < MAX_CHANNELS {
            dir.guild_create(&guild_with(id, 10_000_000 + id * per_guild, per_guild));
            id += 1;
        }
        assert_eq!(dir.channels(), MAX_CHANNELS);
        dir.guild_create(&guild_with(id, 1, 3));
        assert_eq!(dir.channels(), MAX_CHANNELS);
        assert!(dir
            .apply("CHANNEL_CREATE", r#"{"id":"6","type":1}"#)
            .is_ok_and(|changed| !changed));
        // Guilds up to MAX_GUILDS.
        while dir.guilds() < MAX_GUILDS {
            id += 1;
            dir.guild_create(&guild_with(id, 0, 0));
        }
        assert!(!dir.guild_create(&guild_with(id + 1, 0, 0)));
        assert_eq!(dir.guilds(), MAX_GUILDS);
        // Names are cut at MAX_NAME_CHARS (on a character boundary).
        let long = "é".repeat(MAX_NAME_CHARS + 50);
        let channel = json!({"id":"10000000000","type":0,"guild_id":"2","name": long});
        dir.apply("CHANNEL_DELETE", r#"{"id":"10003000","type":0}"#)
            .unwrap();
        assert!(dir.upsert(&serde_json::from_value(channel).unwrap()));
        let name = dir.channel(Snowflake::new(10_000_000_000)).unwrap();
        assert_eq!(name.name.as_ref().unwrap().chars().count(), MAX_NAME_CHARS);
    }
}
