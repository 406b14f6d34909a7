//! The few Discord REST objects the bridge reads. Only the fields it uses;
//! serde ignores the rest, so Discord adding fields never breaks decoding.

use serde::Deserialize;

/// `GET /gateway/bot`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GatewayBot {
    /// Gateway URL (`wss://gateway.discord.gg`), without query.
    pub url: String,
    /// Recommended shard count.
    pub shards: u32,
    /// The identify budget.
    pub session_start_limit: SessionStartLimit,
}

/// How many fresh sessions (identifies) may still be started.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SessionStartLimit {
    /// Identifies allowed per window (1000 for most bots).
    pub total: u32,
    /// Identifies left in this window.
    pub remaining: u32,
    /// Milliseconds until the window resets.
    pub reset_after: u64,
    /// Identifies allowed per 5 s.
    pub max_concurrency: u32,
}

/// A channel (here: the DM channel from `POST /users/@me/channels`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Channel {
    /// Channel id (snowflake).
    pub id: String,
    /// Channel type (1 = DM).
    #[serde(rename = "type", default)]
    pub kind: u8,
}

/// A message as returned by create / edit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Message {
    /// Message id (snowflake).
    pub id: String,
    /// Channel id (snowflake).
    pub channel_id: String,
    /// Text content.
    #[serde(default)]
    pub content: String,
}
