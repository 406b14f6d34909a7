//! The few Discord REST objects the bridge reads. Only the fields it uses;
//! serde ignores the rest, so Discord adding fields never breaks decoding.

use serde::Deserialize;

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
    /// Files attached to it.
    #[serde(default)]
    pub attachments: Vec<MessageAttachment>,
}

/// A file attached to a [`Message`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct MessageAttachment {
    /// Attachment id (snowflake).
    pub id: String,
    /// File name.
    pub filename: String,
    /// Size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Where it can be downloaded.
    #[serde(default)]
    pub url: String,
}
