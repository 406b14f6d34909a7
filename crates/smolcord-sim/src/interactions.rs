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

use super::app_commands::CommandBook;
use super::objects;
use super::sim_error::SimError;
use super::state::{Shared, State};
use serde_json::{json, Value};
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
const ANSWER_FLAGS: u64 = MESSAGE_FLAG_EPHEMERAL | 4 | 4096;

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

struct Pending {
    id: u64,
    token: String,
    used: Instant,
    payload: Value,
    answer: Option<InteractionAnswer>,
    /// A callback that came too late.
    late: bool,
}

/// Registered commands and the interactions made of them.
pub(crate) struct InteractionBook {
    pub(crate) commands: CommandBook,
    pending: VecDeque<Pending>,
    deadline: Duration,
    lifetime: Duration,
}

impl Default for InteractionBook {
    fn default() -> Self {
        InteractionBook {
            commands: CommandBook::default(),
            pending: VecDeque::new(),
            deadline: ANSWER_DEADLINE,
            lifetime: TOKEN_LIFETIME,
        }
    }
}

impl InteractionBook {
    fn find(&mut self, id: u64, token: &str) -> Option<&mut Pending> {
        self.pending
            .iter_mut()
            .find(|p| p.id == id && p.token == token)
    }
}

fn error(status: u16, code: u32, message: &str) -> super::http::Response {
    super::http::Response::json(status, &json!({"message": message, "code": code}))
}

fn invalid_form(field: &str, message: &str) -> super::http::Response {
    super::http::Response::json(
        400,
        &json!({"message": "Invalid Form Body", "code": 50035,
                "errors": {field: {"_errors": [{"code": "BASE_TYPE_INVALID", "message": message}]}}}),
    )
}

/// `PUT /applications/{id}/commands`.
pub(crate) fn set_global(
    shared: &Shared,
    state: &mut State,
    application_id: Snowflake,
    body: Option<&Value>,
) -> super::http::Response {
    // The simulator's application is its bot (`SimConfig::bot_id`).
    if application_id != shared.config.bot_id {
        return error(403, 50001, "Missing Access");
    }
    let State {
        interactions, ids, ..
    } = state;
    match interactions
        .commands
        .overwrite(application_id.get(), body, || ids.next())
    {
        Ok(list) => super::http::Response::json(200, &Value::Array(list)),
        Err((field, why)) => invalid_form(&field, &why),
    }
}

/// `POST /interactions/{id}/{token}/callback`.
pub(crate) fn callback(
    state: &mut State,
    interaction_id: Snowflake,
    token: &str,
    body: Option<&Value>,
) -> super::http::Response {
    let deadline = state.interactions.deadline;
    let Some(pending) = state.interactions.find(interaction_id.get(), token) else {
        return error(404, 10062, "Unknown interaction");
    };
    if let Some(answer) = &mut pending.answer {
        answer.refused_callbacks += 1;
        return error(400, 40060, "Interaction has already been acknowledged.");
    }
    let after = pending.used.elapsed();
    if after > deadline {
        pending.late = true;
        return error(404, 10062, "Unknown interaction");
    }
    let body = body.cloned().unwrap_or(Value::Null);
    let kind = body["type"].as_u64();
    let data = &body["data"];
    let flags = data["flags"].as_u64().unwrap_or(0);
    if flags & !ANSWER_FLAGS != 0 {
        return invalid_form(
            "data.flags",
            "only EPHEMERAL, SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS",
        );
    }
    let content = match kind {
        Some(4) => match data["content"].as_str() {
            Some(text) if !text.is_empty() && text.chars().count() <= 2000 => Some(text.to_owned()),
            _ => return invalid_form("data.content", "1 to 2000 characters"),
        },
        Some(5) => None,
        // 1 (PONG) is for HTTP interactions; components' types need a
        // component interaction.
        _ => return invalid_form("type", "4 or 5 for a command"),
    };
    pending.answer = Some(InteractionAnswer {
        deferred: kind == Some(5),
        ephemeral: flags & MESSAGE_FLAG_EPHEMERAL != 0,
        content,
        edits: 0,
        after,
        refused_callbacks: 0,
    });
    super::http::Response::no_content()
}

/// `PATCH /webhooks/{application_id}/{token}/messages/@original`.
pub(crate) fn edit_original(
    shared: &Shared,
    state: &mut State,
    application_id: Snowflake,
    token: &str,
    body: Option<&Value>,
) -> super::http::Response {
    let lifetime = state.interactions.lifetime;
    let found = state
        .interactions
        .pending
        .iter_mut()
        .find(|p| p.token == token && application_id == shared.config.bot_id);
    let Some(pending) = found else {
        return error(401, 50027, "Invalid Webhook Token");
    };
    if pending.used.elapsed() > lifetime {
        return error(401, 50027, "Invalid Webhook Token");
    }
    let Some(answer) = &mut pending.answer else {
        return error(404, 10008, "Unknown Message");
    };
    let text = body.and_then(|b| b["content"].as_str()).unwrap_or_default();
    if text.chars().count() > 2000 {
        return invalid_form("content", "at most 2000 characters");
    }
    answer.content = Some(text.to_owned());
    answer.edits += 1;
    let channel = pending.payload["channel_id"].clone();
    let flags = if answer.ephemeral {
        MESSAGE_FLAG_EPHEMERAL
    } else {
        0
    };
    let id = pending.id;
    super::http::Response::json(
        200,
        &json!({
            "id": id.to_string(), "channel_id": channel, "type": 20,
            "author": objects::bot_author(&shared.config), "content": text,
            "flags": flags, "attachments": [], "embeds": [], "mentions": [],
        }),
    )
}

impl Shared {
    /// Dispatches the use of the registered command `name` by a user in
    /// their DM with the bot.
    pub(crate) fn use_command(
        &self,
        user_id: u64,
        user_name: &str,
        name: &str,
        options: &[(&str, &str)],
    ) -> Result<UsedCommand, SimError> {
        let mut state = self.lock();
        let state = &mut *state;
        let Some(command) = state.interactions.commands.get(name) else {
            return Err(SimError::UnknownCommand(name.to_owned()));
        };
        // Discord's client offers a command only where its contexts allow
        // (none given: the default, guilds and the bot's DM).
        let in_dm = command["contexts"]
            .as_array()
            .is_none_or(|list| list.iter().any(|c| c.as_u64() == Some(1)));
        if !in_dm {
            return Err(SimError::UnknownCommand(name.to_owned()));
        }
        let declared: Vec<&str> = command["options"]
            .as_array()
            .map(|list| list.iter().filter_map(|o| o["name"].as_str()).collect())
            .unwrap_or_default();
        if let Some((unknown, _)) = options.iter().find(|(n, _)| !declared.contains(n)) {
            return Err(SimError::UnknownCommand(format!("{name} {unknown}:")));
        }
        let command_id = command["id"].clone();
        let channel = state.dir.dm_channel(&mut state.ids, user_id, user_name);
        let id = state.ids.next();
        let token = format!(
            "aW50ZXJhY3Rpb246{id}.sim-{:x}",
            id.wrapping_mul(0x9e37_79b9)
        );
        let payload = json!({
            "id": id.to_string(),
            "application_id": self.config.bot_id.to_string(),
            "type": 2,
            "token": token,
            "version": 1,
            "channel_id": channel.to_string(),
            "channel": {"id": channel.to_string(), "type": 1},
            "user": objects::user(user_id, user_name),
            "context": 1,
            "locale": "en-US",
            "entitlements": [],
            "data": {
                "id": command_id, "name": name, "type": 1,
                "options": options.iter()
                    .map(|(n, v)| json!({"name": n, "type": 3, "value": v}))
                    .collect::<Vec<_>>(),
            },
        });
        let book = &mut state.interactions;
        if book.pending.len() == INTERACTIONS_KEPT {
            book.pending.pop_front();
        }
        book.pending.push_back(Pending {
            id,
            token,
            used: Instant::now(),
            payload: payload.clone(),
            answer: None,
            late: false,
        });
        state.dispatch(&self.config, "INTERACTION_CREATE", &payload);
        Ok(UsedCommand {
            interaction_id: Snowflake::new(id),
            channel_id: Snowflake::new(channel),
        })
    }

    /// Dispatches a known interaction's INTERACTION_CREATE again, as a
    /// resume replays what the session had not acknowledged.
    pub(crate) fn replay_interaction(&self, id: Snowflake) -> Result<Vec<u64>, SimError> {
        let mut state = self.lock();
        let payload = state
            .interactions
            .pending
            .iter()
            .find(|p| p.id == id.get())
            .map(|p| p.payload.clone())
            .ok_or(SimError::UnknownInteraction(id))?;
        Ok(state.dispatch(&self.config, "INTERACTION_CREATE", &payload))
    }

    pub(crate) fn interaction_answer(&self, id: Snowflake) -> Option<InteractionAnswer> {
        let state = self.lock();
        let pending = state
            .interactions
            .pending
            .iter()
            .find(|p| p.id == id.get())?;
        pending.answer.clone()
    }

    /// Whether the bot answered the interaction after its deadline.
    pub(crate) fn interaction_late(&self, id: Snowflake) -> bool {
        let state = self.lock();
        let pending = state.interactions.pending.iter().find(|p| p.id == id.get());
        pending.is_some_and(|p| p.late)
    }

    pub(crate) fn registered_commands(&self) -> (Vec<Value>, u64) {
        let state = self.lock();
        let book = &state.interactions.commands;
        (book.commands.clone(), book.overwrites)
    }

    pub(crate) fn set_interaction_deadlines(&self, answer: Duration, token: Duration) {
        let mut state = self.lock();
        state.interactions.deadline = answer;
        state.interactions.lifetime = token;
    }
}
