//! What a client sends: Heartbeat, Identify, Resume, Presence Update,
//! Voice State Update, Request Guild Members, Request Soundboard Sounds,
//! and [`Command::Raw`] for an opcode this model does not cover.
//!
//! ```
//! use smolcord::protocol::{Command, RawCommand};
//! let raw = RawCommand::new(43, serde_json::json!({"guild_id": "1", "fields": ["status"]})).unwrap();
//! assert_eq!(Command::Raw(raw).to_json().unwrap(), r#"{"op":43,"d":{"fields":["status"],"guild_id":"1"}}"#);
//! // The session's own opcodes belong to the shard: a raw Identify is refused.
//! assert!(RawCommand::new(2, serde_json::json!({})).is_err());
//! ```

use super::intents::Intents;
use super::opcode::OpCode;
use super::snowflake::Snowflake;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The gateway refuses any payload larger than this (close code 4002).
pub const MAX_PAYLOAD_BYTES: usize = 4096;

/// `properties` of Identify.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConnectionProperties {
    /// Operating system.
    pub os: String,
    /// Library name.
    pub browser: String,
    /// Library name.
    pub device: String,
}

impl Default for ConnectionProperties {
    fn default() -> ConnectionProperties {
        ConnectionProperties {
            os: std::env::consts::OS.to_owned(),
            browser: "smolcord".to_owned(),
            device: "smolcord".to_owned(),
        }
    }
}

/// op 2: start a new session.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Identify {
    /// The bot token, raw (no `Bot ` prefix). Never printed by `Debug`.
    pub token: String,
    /// Client properties.
    pub properties: ConnectionProperties,
    /// Per-payload zlib compression (smolcord never asks for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compress: Option<bool>,
    /// Member count above which offline members are not sent (50-250).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub large_threshold: Option<u8>,
    /// `[shard_id, shard_count]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<[u32; 2]>,
    /// Initial presence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence: Option<PresenceUpdate>,
    /// The intents bitmask.
    pub intents: Intents,
}

impl fmt::Debug for Identify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identify")
            .field("token", &"<redacted>")
            .field("properties", &self.properties)
            .field("compress", &self.compress)
            .field("large_threshold", &self.large_threshold)
            .field("shard", &self.shard)
            .field("presence", &self.presence)
            .field("intents", &self.intents)
            .finish()
    }
}

/// op 6: resume a session after a reconnect.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Resume {
    /// The bot token, raw. Never printed by `Debug`.
    pub token: String,
    /// The session to resume (from READY).
    pub session_id: String,
    /// The last dispatch sequence number received.
    pub seq: u64,
}

impl fmt::Debug for Resume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resume")
            .field("token", &"<redacted>")
            .field("session_id", &self.session_id)
            .field("seq", &self.seq)
            .finish()
    }
}

/// An activity in a presence. Bots may set `name`, `type`, `state` and
/// `url` ([Discord: Activity Object](https://discord.com/developers/docs/events/gateway-events#activity-object)).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Activity {
    /// Shown text.
    pub name: String,
    /// 0 playing, 1 streaming, 2 listening, 3 watching, 4 custom, 5 competing.
    #[serde(rename = "type")]
    pub kind: u8,
    /// The user's current party status, or the text of a custom status (type 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Stream URL, validated when `type` is 1 (streaming).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// op 3: set the bot's presence (also Identify's `presence`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PresenceUpdate {
    /// Unix ms since the client went idle, or null.
    pub since: Option<u64>,
    /// Activities.
    #[serde(default)]
    pub activities: Vec<Activity>,
    /// `online`, `dnd`, `idle`, `invisible` or `offline`.
    pub status: String,
    /// Whether the client is AFK.
    #[serde(default)]
    pub afk: bool,
}

impl PresenceUpdate {
    /// Plain `online` with no activity.
    pub fn online() -> PresenceUpdate {
        PresenceUpdate {
            since: None,
            activities: Vec::new(),
            status: "online".to_owned(),
            afk: false,
        }
    }
}

/// op 8: ask for guild members (answered by GUILD_MEMBERS_CHUNK).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestGuildMembers {
    /// The guild.
    pub guild_id: Snowflake,
    /// A username prefix (no privileged intent needed), or `""` with
    /// `limit` 0 for every member (needs GUILD_MEMBERS; Discord allows one
    /// such request per guild per 30 s and answers a repeat with a
    /// RATE_LIMITED dispatch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Maximum members, 0 for no limit with an empty query.
    pub limit: u32,
    /// Include presences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presences: Option<bool>,
    /// Specific users.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_ids: Vec<Snowflake>,
    /// Echoed back in the chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
}

/// op 4: join, move between or leave (`channel_id: None`) voice channels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VoiceStateUpdate {
    /// The guild.
    pub guild_id: Snowflake,
    /// The voice channel to join, or `None` to leave.
    pub channel_id: Option<Snowflake>,
    /// Whether the bot is muted.
    pub self_mute: bool,
    /// Whether the bot is deafened.
    pub self_deaf: bool,
}

/// op 31: ask for the soundboard sounds of guilds (answered by
/// SOUNDBOARD_SOUNDS dispatches).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestSoundboardSounds {
    /// The guilds.
    pub guild_ids: Vec<Snowflake>,
}

/// Any other opcode with its payload, for what this model does not cover
/// (op 43 Request Channel Info, or one Discord adds later). The opcodes the
/// shard runs the session with itself — 1 Heartbeat, 2 Identify, 6 Resume —
/// and the ones only the gateway sends are refused: a second Identify or a
/// stray Resume would end the session the shard keeps.
#[derive(Clone, Debug, PartialEq)]
pub struct RawCommand {
    op: u8,
    d: serde_json::Value,
}

impl RawCommand {
    /// `op` with payload `d`, unless `op` is the shard's own or a receive-only one.
    pub fn new(op: u8, d: serde_json::Value) -> Result<RawCommand, CommandError> {
        match OpCode::from_u8(op) {
            Some(
                OpCode::Heartbeat
                | OpCode::Identify
                | OpCode::Resume
                | OpCode::Dispatch
                | OpCode::Reconnect
                | OpCode::InvalidSession
                | OpCode::Hello
                | OpCode::HeartbeatAck,
            ) => Err(CommandError::Reserved { op }),
            _ => Ok(RawCommand { op, d }),
        }
    }

    /// The opcode.
    pub fn op(&self) -> u8 {
        self.op
    }
}

/// Why a command could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandError {
    /// Serialising the payload failed.
    Encode {
        /// The opcode.
        op: u8,
        /// serde_json's reason.
        detail: String,
    },
    /// The encoded payload is over [`MAX_PAYLOAD_BYTES`] (Discord closes 4002).
    TooLarge {
        /// The opcode.
        op: u8,
        /// The encoded size.
        bytes: usize,
    },
    /// A [`RawCommand`] with an opcode the shard sends itself or only receives.
    Reserved {
        /// The opcode.
        op: u8,
    },
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Encode { op, detail } => write!(f, "cannot encode op {op}: {detail}"),
            CommandError::TooLarge { op, bytes } => write!(
                f,
                "op {op} command is {bytes} bytes; the gateway accepts at most {MAX_PAYLOAD_BYTES}"
            ),
            CommandError::Reserved { op } => write!(
                f,
                "op {op} is not sent as a raw command: the shard sends heartbeats, Identify and Resume itself, and the others only arrive"
            ),
        }
    }
}

impl std::error::Error for CommandError {}

/// A command a client sends to the gateway.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Command {
    /// op 1 with the last sequence number seen (or null).
    Heartbeat(Option<u64>),
    /// op 2.
    Identify(Identify),
    /// op 3.
    PresenceUpdate(PresenceUpdate),
    /// op 6.
    Resume(Resume),
    /// op 4.
    VoiceStateUpdate(VoiceStateUpdate),
    /// op 8.
    RequestGuildMembers(RequestGuildMembers),
    /// op 31.
    RequestSoundboardSounds(RequestSoundboardSounds),
    /// Any other opcode (see [`RawCommand`]).
    Raw(RawCommand),
}

/// Alias kept for readers looking for the heartbeat payload type.
pub type Heartbeat = Option<u64>;

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    op: u8,
    d: &'a T,
}

impl Command {
    /// The wire opcode this command is sent with.
    pub fn op(&self) -> u8 {
        let code = match self {
            Command::Heartbeat(_) => OpCode::Heartbeat,
            Command::Identify(_) => OpCode::Identify,
            Command::PresenceUpdate(_) => OpCode::PresenceUpdate,
            Command::Resume(_) => OpCode::Resume,
            Command::VoiceStateUpdate(_) => OpCode::VoiceStateUpdate,
            Command::RequestGuildMembers(_) => OpCode::RequestGuildMembers,
            Command::RequestSoundboardSounds(_) => OpCode::RequestSoundboardSounds,
            Command::Raw(raw) => return raw.op,
        };
        code.as_u8()
    }

    /// Encodes the command as gateway JSON, refusing payloads over
    /// [`MAX_PAYLOAD_BYTES`] with an error naming the size.
    pub fn to_json(&self) -> Result<String, CommandError> {
        let op = self.op();
        let json = match self {
            Command::Heartbeat(seq) => serde_json::to_string(&Envelope { op, d: seq }),
            Command::Identify(d) => serde_json::to_string(&Envelope { op, d }),
            Command::PresenceUpdate(d) => serde_json::to_string(&Envelope { op, d }),
            Command::Resume(d) => serde_json::to_string(&Envelope { op, d }),
            Command::VoiceStateUpdate(d) => serde_json::to_string(&Envelope { op, d }),
            Command::RequestGuildMembers(d) => serde_json::to_string(&Envelope { op, d }),
            Command::RequestSoundboardSounds(d) => serde_json::to_string(&Envelope { op, d }),
            Command::Raw(raw) => serde_json::to_string(&Envelope { op, d: &raw.d }),
        }
        .map_err(|err| CommandError::Encode {
            op,
            detail: err.to_string(),
        })?;
        if json.len() > MAX_PAYLOAD_BYTES {
            return Err(CommandError::TooLarge {
                op,
                bytes: json.len(),
            });
        }
        Ok(json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn identify() -> Identify {
        Identify {
            token: "tok.en".into(),
            properties: ConnectionProperties {
                os: "linux".into(),
                browser: "my_library".into(),
                device: "my_library".into(),
            },
            compress: None,
            large_threshold: None,
            shard: Some([0, 1]),
            presence: Some(PresenceUpdate::online()),
            intents: Intents::from_bits(513),
        }
    }

    #[test]
    fn identify_matches_documented_shape() {
        let json: Value =
            serde_json::from_str(&Command::Identify(identify()).to_json().unwrap()).unwrap();
        assert_eq!(
            json,
            json!({"op":2,"d":{"token":"tok.en","intents":513,
                "properties":{"os":"linux","browser":"my_library","device":"my_library"},
                "shard":[0,1],
                "presence":{"since":null,"activities":[],"status":"online","afk":false}}})
        );
    }

    #[test]
    fn heartbeat_and_resume() {
        assert_eq!(
            Command::Heartbeat(Some(251)).to_json().unwrap(),
            r#"{"op":1,"d":251}"#
        );
        assert_eq!(
            Command::Heartbeat(None).to_json().unwrap(),
            r#"{"op":1,"d":null}"#
        );
        let resume = Command::Resume(Resume {
            token: "t".into(),
            session_id: "abc".into(),
            seq: 1337,
        });
        assert_eq!(
            resume.to_json().unwrap(),
            r#"{"op":6,"d":{"token":"t","session_id":"abc","seq":1337}}"#
        );
    }

    #[test]
    fn debug_hides_the_token() {
        let text = format!(
            "{:?} {:?}",
            Command::Identify(identify()),
            Resume {
                token: "tok.en".into(),
                session_id: "s".into(),
                seq: 1
            }
        );
        assert!(!text.contains("tok.en"), "{text}");
    }

    #[test]
    fn oversized_payload_is_refused_with_its_size() {
        let mut presence = PresenceUpdate::online();
        presence.activities.push(Activity {
            name: "x".repeat(5000),
            kind: 0,
            state: None,
            url: None,
        });
        let err = Command::PresenceUpdate(presence).to_json().unwrap_err();
        assert!(matches!(err, CommandError::TooLarge { op: 3, .. }), "{err}");
        assert!(err.to_string().contains("at most 4096"), "{err}");
    }

    #[test]
    fn voice_and_soundboard_match_documented_shapes() {
        let voice = Command::VoiceStateUpdate(VoiceStateUpdate {
            guild_id: Snowflake::new(41771983423143937),
            channel_id: None,
            self_mute: false,
            self_deaf: true,
        });
        let json: Value = serde_json::from_str(&voice.to_json().unwrap()).unwrap();
        assert_eq!(
            json,
            json!({"op":4,"d":{"guild_id":"41771983423143937","channel_id":null,"self_mute":false,"self_deaf":true}})
        );
        let sounds = Command::RequestSoundboardSounds(RequestSoundboardSounds {
            guild_ids: vec![Snowflake::new(613425648685547541)],
        });
        assert_eq!(
            sounds.to_json().unwrap(),
            r#"{"op":31,"d":{"guild_ids":["613425648685547541"]}}"#
        );
    }

    #[test]
    fn raw_commands_cannot_take_over_the_session() {
        for op in [0, 1, 2, 6, 7, 9, 10, 11] {
            assert_eq!(
                RawCommand::new(op, json!({})),
                Err(CommandError::Reserved { op }),
                "{op}"
            );
        }
        let raw = RawCommand::new(43, json!({"guild_id":"1"})).unwrap();
        assert_eq!(raw.op(), 43);
        assert_eq!(
            Command::Raw(raw).to_json().unwrap(),
            r#"{"op":43,"d":{"guild_id":"1"}}"#
        );
    }

    #[test]
    fn activity_carries_state_and_url_only_when_set() {
        let activity = Activity {
            name: "Custom Status".into(),
            kind: 4,
            state: Some("on call".into()),
            url: None,
        };
        assert_eq!(
            serde_json::to_value(&activity).unwrap(),
            json!({"name":"Custom Status","type":4,"state":"on call"})
        );
    }

    #[test]
    fn identify_reads_back_with_unknown_fields() {
        let text = r#"{"token":"x","properties":{"os":"l","browser":"b","device":"d","extra":1},
            "intents":4096,"compress":true,"large_threshold":250,"new_field":[]}"#;
        let identify: Identify = serde_json::from_str(text).unwrap();
        assert_eq!(identify.compress, Some(true));
        assert_eq!(identify.large_threshold, Some(250));
        assert_eq!(identify.intents, Intents::DIRECT_MESSAGES);
    }
}
