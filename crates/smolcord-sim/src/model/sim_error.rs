//! [`SimError`]: why the simulator's own API refused a call (the control
//! API answers the same refusals as HTTP 400 with this text).

use smolcord::protocol::Snowflake;
use std::fmt;

/// Why a call of the simulator's API was refused.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// No guild channel with this id.
    UnknownChannel(Snowflake),
    /// No guild with this id.
    UnknownGuild(Snowflake),
    /// No such message in the channel (a reply's target).
    UnknownMessage {
        /// The channel.
        channel: Snowflake,
        /// The message.
        message: Snowflake,
    },
    /// No registered command of this name usable in a DM with the bot
    /// (or an option it does not declare).
    UnknownCommand(String),
    /// No interaction with this id is remembered.
    UnknownInteraction(Snowflake),
    /// A figure outside what the simulator serves.
    OutOfRange {
        /// The field.
        field: &'static str,
        /// The figure given.
        value: u64,
        /// The largest allowed (the smallest is 1).
        max: u64,
    },
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::UnknownChannel(id) => {
                write!(f, "channel {id} is not a known guild channel")
            }
            SimError::UnknownGuild(id) => write!(f, "guild {id} is not known"),
            SimError::UnknownMessage { channel, message } => {
                write!(f, "message {message} is not in channel {channel}")
            }
            SimError::UnknownCommand(name) => write!(
                f,
                "`/{name}` is not a registered command usable in the bot's DM (the application registers its commands with PUT /applications/{{id}}/commands)"
            ),
            SimError::UnknownInteraction(id) => write!(f, "interaction {id} is not known"),
            SimError::OutOfRange { field, value, max } => {
                write!(f, "{field} must be 1 to {max}, not {value}")
            }
        }
    }
}

impl std::error::Error for SimError {}
