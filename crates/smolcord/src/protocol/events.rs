//! What the gateway sends: Hello, READY and the dispatch events the bridge
//! uses (MESSAGE_CREATE, GUILD_CREATE, CHANNEL_CREATE/UPDATE/DELETE).
//!
//! Unknown fields are ignored everywhere (Discord adds fields without
//! notice); only the fields smolcord reads are modelled.

use super::snowflake::Snowflake;
use serde::{Deserialize, Serialize};

pub use super::commands::Activity;

/// Message flag IS_VOICE_MESSAGE (1 << 13).
pub const MESSAGE_FLAG_IS_VOICE_MESSAGE: u64 = 1 << 13;

/// op 10: the first frame on a connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Milliseconds between heartbeats.
    pub heartbeat_interval: u64,
}

/// A user (only the fields the bridge reads).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct User {
    /// User id.
    pub id: Snowflake,
    /// Username.
    pub username: String,
    /// Legacy discriminator (`"0"` for migrated users).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discriminator: Option<String>,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_name: Option<String>,
    /// Whether the user is a bot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot: Option<bool>,
}

/// A guild stub in READY (each arrives later as GUILD_CREATE).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnavailableGuild {
    /// Guild id.
    pub id: Snowflake,
    /// Always true in READY.
    #[serde(default)]
    pub unavailable: bool,
}

/// READY's `application` field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadyApplication {
    /// Application id.
    pub id: Snowflake,
    /// Application flags.
    #[serde(default)]
    pub flags: u64,
}

/// The READY dispatch: a new session exists.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    /// API version.
    pub v: u8,
    /// The bot user.
    pub user: User,
    /// Guilds, unavailable until their GUILD_CREATE.
    #[serde(default)]
    pub guilds: Vec<UnavailableGuild>,
    /// The session to resume later.
    pub session_id: String,
    /// Where to reconnect for a resume.
    pub resume_gateway_url: String,
    /// `[shard_id, shard_count]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<[u32; 2]>,
    /// The application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub application: Option<ReadyApplication>,
}

/// An attachment on a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    /// Attachment id.
    pub id: Snowflake,
    /// File name.
    pub filename: String,
    /// MIME type, e.g. `audio/ogg`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Signed CDN URL (expires).
    pub url: String,
    /// Proxied URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_url: Option<String>,
    /// Voice messages: length in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
    /// Voice messages: base64 waveform.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waveform: Option<String>,
    /// Attachment flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<u64>,
}

impl Attachment {
    /// Whether this looks like audio (content type `audio/*`).
    pub fn is_audio(&self) -> bool {
        self.content_type
            .as_deref()
            .is_some_and(|kind| kind.starts_with("audio/"))
    }
}

/// MESSAGE_CREATE's payload (a message object).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Message id.
    pub id: Snowflake,
    /// Channel id (a DM channel for direct messages).
    pub channel_id: Snowflake,
    /// Guild id; absent for DMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<Snowflake>,
    /// The author.
    pub author: User,
    /// Text. Without the MESSAGE_CONTENT intent it is empty in guild
    /// messages, except those that mention the bot and the bot's own; DMs
    /// always carry it.
    #[serde(default)]
    pub content: String,
    /// ISO 8601 send time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// Attachments.
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    /// Message flags (IS_VOICE_MESSAGE is 1 << 13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<u64>,
    /// Message type (0 default, 19 reply, ...).
    #[serde(rename = "type", default)]
    pub kind: u8,
    /// Users mentioned by the message (a reply pings its author unless the
    /// reply turned that off: Discord lists them here then too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mentions: Vec<User>,
    /// What a reply (type 19) answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_reference: Option<MessageReference>,
    /// The message a reply answers, as Discord includes it (absent when it
    /// was not looked up, `null` when it was deleted). Boxed: it is a
    /// message itself, one level deep (Discord does not nest further).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub referenced_message: Option<Box<Message>>,
}

/// A message's `message_reference`: the message a reply answers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageReference {
    /// The message answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<Snowflake>,
    /// Its channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_id: Option<Snowflake>,
    /// Its guild.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<Snowflake>,
}

impl Message {
    /// Whether the message carries the IS_VOICE_MESSAGE flag.
    pub fn is_voice_message(&self) -> bool {
        self.flags
            .is_some_and(|flags| flags & MESSAGE_FLAG_IS_VOICE_MESSAGE != 0)
    }

    /// Attachments to transcribe: audio ones, or all of them on a voice
    /// message (a voice message holds exactly one audio file).
    pub fn audio_attachments(&self) -> impl Iterator<Item = &Attachment> {
        let voice = self.is_voice_message();
        self.attachments
            .iter()
            .filter(move |attachment| voice || attachment.is_audio())
    }

    /// Whether this is a direct message (no guild). Only as sure as
    /// `guild_id`: a MESSAGE_CREATE from the gateway carries its guild, a
    /// message read over REST (a channel's history, a fetched message)
    /// never does, so for those ask the channel (`GET /channels/{id}`:
    /// its `guild_id`, or its type).
    pub fn is_direct(&self) -> bool {
        self.guild_id.is_none()
    }

    /// Whether the message mentions `user`.
    pub fn mentions_user(&self, user: Snowflake) -> bool {
        self.mentions.iter().any(|mentioned| mentioned.id == user)
    }

    /// Whether the message replies to a message `user` wrote.
    pub fn replies_to(&self, user: Snowflake) -> bool {
        self.referenced_message
            .as_ref()
            .is_some_and(|answered| answered.author.id == user)
    }
}

/// A channel type number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ChannelType(pub u8);

impl ChannelType {
    /// Text channel in a guild.
    pub const GUILD_TEXT: ChannelType = ChannelType(0);
    /// Direct message.
    pub const DM: ChannelType = ChannelType(1);
    /// Voice channel.
    pub const GUILD_VOICE: ChannelType = ChannelType(2);
    /// Group DM.
    pub const GROUP_DM: ChannelType = ChannelType(3);
    /// Category.
    pub const GUILD_CATEGORY: ChannelType = ChannelType(4);
}

/// A channel (CHANNEL_CREATE/UPDATE/DELETE payload, GUILD_CREATE's
/// `channels`, and the REST answer to opening a DM).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    /// Channel id.
    pub id: Snowflake,
    /// Channel type.
    #[serde(rename = "type")]
    pub kind: ChannelType,
    /// Owning guild (absent in GUILD_CREATE's list and for DMs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<Snowflake>,
    /// Name (guild channels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Category.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<Snowflake>,
    /// Sorting position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<i32>,
    /// DM recipients.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipients: Vec<User>,
    /// The newest message posted in the channel (it may name one since
    /// deleted); Discord gives it whether or not the bot may read the
    /// history (without Read Message History a history read answers no
    /// messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_id: Option<Snowflake>,
}

/// GUILD_CREATE's payload (only what a channel directory needs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuildCreate {
    /// Guild id.
    pub id: Snowflake,
    /// Guild name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// True when the guild is in an outage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<bool>,
    /// Channels of the guild.
    #[serde(default)]
    pub channels: Vec<Channel>,
    /// Active threads.
    #[serde(default)]
    pub threads: Vec<Channel>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Frame;

    const READY: &str = r#"{"op":0,"s":1,"t":"READY","d":{
        "v":10,"user_settings":{},"session_type":"normal",
        "user":{"verified":true,"username":"smolbot","mfa_enabled":false,"id":"1100000000000000001",
                "global_name":null,"flags":0,"email":null,"discriminator":"0","bot":true,"avatar":null},
        "session_id":"9c1a1f1d0b1f4a2e8e0b3d6f0c2a9b7e",
        "resume_gateway_url":"wss://gateway-us-east1-c.discord.gg",
        "relationships":[],"private_channels":[],"presences":[],
        "guilds":[{"unavailable":true,"id":"41771983423143937"}],
        "guild_join_requests":[],"geo_ordered_rtc_regions":["us-east"],
        "application":{"id":"1100000000000000001","flags":8953856},
        "auth_session_id_hash":"x","_trace":["[\"gateway-prd\",{}]"],
        "shard":[0,1]}}"#;

    #[test]
    fn ready_from_a_real_shape() {
        let frame = Frame::decode(READY.as_bytes()).unwrap();
        let ready: Ready = frame.data().unwrap();
        assert_eq!(ready.session_id, "9c1a1f1d0b1f4a2e8e0b3d6f0c2a9b7e");
        assert_eq!(
            ready.resume_gateway_url,
            "wss://gateway-us-east1-c.discord.gg"
        );
        assert_eq!(ready.user.username, "smolbot");
        assert_eq!(ready.guilds.len(), 1);
        assert_eq!(ready.shard, Some([0, 1]));
        assert_eq!(ready.application.unwrap().flags, 8953856);
    }

    const VOICE_DM: &str = r#"{"op":0,"s":5,"t":"MESSAGE_CREATE","d":{
        "type":0,"tts":false,"timestamp":"2026-11-29T10:00:00.000000+00:00","pinned":false,
        "nonce":"1","mentions":[],"mention_roles":[],"mention_everyone":false,
        "id":"1200000000000000002","flags":8192,"embeds":[],"edited_timestamp":null,
        "content":"","components":[],"channel_type":1,"channel_id":"1200000000000000003",
        "author":{"username":"alice","public_flags":0,"id":"1200000000000000004","global_name":"Alice",
                  "discriminator":"0","avatar":null},
        "attachments":[{"width":null,"waveform":"AAAA","url":"https://cdn.discordapp.com/attachments/1/2/voice-message.ogg?ex=1&is=2&hm=3",
            "size":12345,"proxy_url":"https://media.discordapp.net/x","id":"1200000000000000005",
            "filename":"voice-message.ogg","duration_secs":3.2,"content_type":"audio/ogg","flags":8}]}}"#;

    #[test]
    fn voice_message_dm() {
        let frame = Frame::decode(VOICE_DM.as_bytes()).unwrap();
        let message: Message = frame.data().unwrap();
        assert!(message.is_voice_message());
        assert!(message.is_direct());
        assert_eq!(message.author.username, "alice");
        let audio: Vec<_> = message.audio_attachments().collect();
        assert_eq!(audio.len(), 1);
        assert_eq!(audio[0].duration_secs, Some(3.2));
        assert_eq!(audio[0].content_type.as_deref(), Some("audio/ogg"));
    }

    #[test]
    fn guild_message_with_a_non_audio_attachment() {
        let text = r#"{"id":"1","channel_id":"2","guild_id":"3","author":{"id":"4","username":"b"},
            "content":"hi","attachments":[{"id":"5","filename":"a.png","content_type":"image/png","size":1,"url":"u"}]}"#;
        let message: Message = serde_json::from_str(text).unwrap();
        assert!(!message.is_direct());
        assert!(!message.is_voice_message());
        assert_eq!(message.audio_attachments().count(), 0);
    }

    #[test]
    fn guild_create_and_channel_events() {
        let text = r#"{"id":"3","name":"home","unavailable":false,"member_count":2,"roles":[],
            "channels":[{"id":"10","type":0,"name":"general","position":0,"parent_id":null},
                        {"id":"11","type":4,"name":"cat"}],"threads":[]}"#;
        let guild: GuildCreate = serde_json::from_str(text).unwrap();
        assert_eq!(guild.channels.len(), 2);
        assert_eq!(guild.channels[1].kind, ChannelType::GUILD_CATEGORY);
        let channel: Channel = serde_json::from_str(
            r#"{"id":"12","type":1,"recipients":[{"id":"4","username":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(channel.kind, ChannelType::DM);
        assert_eq!(channel.recipients.len(), 1);
    }

    #[test]
    fn missing_required_fields_are_named() {
        let err =
            serde_json::from_str::<Message>(r#"{"id":"1","author":{"id":"2","username":"x"}}"#)
                .unwrap_err()
                .to_string();
        assert!(err.contains("channel_id"), "{err}");
    }
}
