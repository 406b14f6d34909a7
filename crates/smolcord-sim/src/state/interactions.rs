//! Interactions: a user's use of a registered command becomes an
//! INTERACTION_CREATE (type 2 APPLICATION_COMMAND, in the user's DM with
//! the bot: `user`, `channel_id`, `token`, `data.name`, `data.options`),
//! and the application answers it over REST as Discord's docs say:
//!
//! - `POST /interactions/{id}/{token}/callback`, type 4 (a message) or 5
//!   (deferred, "thinking…"), `data.flags` 64 for ephemeral; 204. Within
//!   3 s of the use, else 404 10062 "Unknown interaction"; once, else
//!   400 40060 "Interaction has already been acknowledged."; a wrong token
//!   is 10062 too.
//! - `PATCH /webhooks/{application_id}/{token}/messages/@original`: sets
//!   the answer's text for 15 minutes (then 401 50027 "Invalid Webhook
//!   Token"); before any callback 404 10008 "Unknown Message".
//!
//! Neither needs the bot token: the interaction's token authorises them.
//! What the bot answered is read with
//! [`crate::Simulator::interaction_answer`]. The answers are kept with
//! their interaction (the newest [`INTERACTIONS_KEPT`]), not in the
//! channel's history: an ephemeral message is not in it on Discord
//! either (a decision in the crate's list).

use crate::state::app_commands::CommandBook;
use serde_json::Value;
use smolcord::protocol::{Snowflake, MESSAGE_FLAG_EPHEMERAL};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Interactions remembered (with their answers); older ones are forgotten
/// (their callbacks then get 10062, as a stale one would).
pub const INTERACTIONS_KEPT: usize = 1024;
/// Discord's deadline for the first answer.
pub const ANSWER_DEADLINE: Duration = Duration::from_secs(3);
/// How long an interaction's token answers and edits.
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Message flags an interaction answer may set: EPHEMERAL, SUPPRESS_EMBEDS
/// (4), SUPPRESS_NOTIFICATIONS (4096).
pub(crate) const ANSWER_FLAGS: u64 = MESSAGE_FLAG_EPHEMERAL | 4 | 4096;

/// How the bot answered an interaction, as a test reads it.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InteractionAnswer {
    /// The first answer was type 5 (deferred).
    pub deferred: bool,
    /// Only the user sees it (flag 64).
    pub ephemeral: bool,
    /// The text shown now: type 4's, or the last edit's (`None` while a
    /// deferred answer still "thinks").
    pub content: Option<String>,
    /// Edits of the answer taken.
    pub edits: u32,
    /// How long after the use the first answer came.
    pub after: Duration,
    /// Further callbacks refused (a second answer, 40060).
    pub refused_callbacks: u32,
}

/// A use of a command ([`crate::Simulator::use_command`]).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsedCommand {
    /// The interaction.
    pub interaction_id: Snowflake,
    /// The user's DM channel with the bot, where it was used.
    pub channel_id: Snowflake,
}

pub(crate) struct Pending {
    pub(crate) id: u64,
    pub(crate) token: String,
    pub(crate) used: Instant,
    pub(crate) payload: Value,
    pub(crate) answer: Option<InteractionAnswer>,
    /// A callback that came too late.
    pub(crate) late: bool,
}

/// Registered commands and the interactions made of them.
pub(crate) struct InteractionBook {
    pub(crate) commands: CommandBook,
    /// The application's commands per guild (only guilds the simulator
    /// knows: as many as its directory holds).
    pub(crate) guild_commands: std::collections::HashMap<u64, CommandBook>,
    pub(crate) pending: VecDeque<Pending>,
    pub(crate) deadline: Duration,
    pub(crate) lifetime: Duration,
}

impl Default for InteractionBook {
    fn default() -> Self {
        InteractionBook {
            commands: CommandBook::default(),
            guild_commands: std::collections::HashMap::new(),
            pending: VecDeque::new(),
            deadline: ANSWER_DEADLINE,
            lifetime: TOKEN_LIFETIME,
        }
    }
}

impl InteractionBook {
    pub(crate) fn find(&mut self, id: u64, token: &str) -> Option<&mut Pending> {
        self.pending
            .iter_mut()
            .find(|p| p.id == id && p.token == token)
    }
}
