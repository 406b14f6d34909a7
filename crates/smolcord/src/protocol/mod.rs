//! The Discord gateway v10 wire model: frames, opcodes, commands, events,
//! close codes and intents, as serde types. No I/O lives here.
//!
//! Decoding is lazy: [`Frame::decode`] reads `op`, `s` and `t` and keeps `d`
//! as raw JSON, so a dispatch nobody handles is never parsed, and an unknown
//! event name or unknown field is carried along instead of rejected.
//!
//! ```
//! use smolcord::protocol::{Frame, OpCode, Hello};
//! let frame = Frame::decode(br#"{"op":10,"d":{"heartbeat_interval":41250},"s":null,"t":null}"#).unwrap();
//! assert_eq!(frame.opcode(), Some(OpCode::Hello));
//! let hello: Hello = frame.data().unwrap();
//! assert_eq!(hello.heartbeat_interval, 41250);
//! ```

mod close_code;
mod commands;
mod events;
mod frame;
mod gateway_bot;
mod intents;
mod interaction;
mod opcode;
mod parse_error;
mod snowflake;

pub use close_code::{CloseAction, CloseCode};
pub use commands::{
    Command, CommandError, ConnectionProperties, Heartbeat, Identify, PresenceUpdate, RawCommand,
    RequestGuildMembers, RequestSoundboardSounds, Resume, VoiceStateUpdate, MAX_PAYLOAD_BYTES,
};
pub use events::{
    Activity, Attachment, Channel, ChannelType, GuildCreate, Hello, Message, MessageReference,
    Ready, ReadyApplication, UnavailableGuild, User, MESSAGE_FLAG_IS_VOICE_MESSAGE,
};
pub use frame::{DecodeError, Frame};
pub use gateway_bot::{GatewayBot, SessionStartLimit};
pub use intents::Intents;
pub use interaction::{
    CommandData, CommandOptionValue, Interaction, InteractionMember, InteractionToken,
    INTERACTION_APPLICATION_COMMAND, INTERACTION_TOKEN_MAX_CHARS, MESSAGE_FLAG_EPHEMERAL,
};
pub use opcode::OpCode;
pub use parse_error::ParseError;
pub use snowflake::Snowflake;

/// The gateway API version smolcord speaks.
pub const API_VERSION: u8 = 10;

/// Which shard receives events for `guild_id` when the bot runs `shard_count`
/// shards (Discord's formula; DMs always go to shard 0).
pub fn shard_for_guild(guild_id: Snowflake, shard_count: u32) -> u32 {
    if shard_count == 0 {
        return 0;
    }
    ((guild_id.get() >> 22) % u64::from(shard_count)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_formula_matches_discord_docs() {
        // 41771983423143937 >> 22 == 9959216934.
        let guild = Snowflake::new(41771983423143937);
        assert_eq!(shard_for_guild(guild, 1), 0);
        assert_eq!(shard_for_guild(guild, 2), (9_959_216_934u64 % 2) as u32);
        assert_eq!(shard_for_guild(guild, 7), (9_959_216_934u64 % 7) as u32);
        assert_eq!(shard_for_guild(guild, 0), 0);
    }
}
