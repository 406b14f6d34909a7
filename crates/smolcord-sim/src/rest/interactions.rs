//! The interaction routes (`state/interactions.rs` says what they do):
//! registering the global commands and a guild's (the bulk overwrite) and
//! listing a guild's, the first answer, the edit of the original answer.

use crate::model::objects;
use crate::state::interactions::InteractionAnswer;
use crate::state::interactions::ANSWER_FLAGS;
use crate::state::shared::{Shared, State};
use crate::wire::http::Response;
use serde_json::{json, Value};
use smolcord::protocol::{Snowflake, MESSAGE_FLAG_EPHEMERAL};

fn error(status: u16, code: u32, message: &str) -> Response {
    Response::json(status, &json!({"message": message, "code": code}))
}

fn invalid_form(field: &str, message: &str) -> Response {
    Response::json(
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
) -> Response {
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
        Ok(list) => Response::json(200, &Value::Array(list)),
        Err((field, why)) => invalid_form(&field, &why),
    }
}

/// `PUT /applications/{id}/guilds/{guild_id}/commands`: the bulk
/// overwrite of one guild's commands, checked as the global one.
pub(crate) fn set_guild(
    shared: &Shared,
    state: &mut State,
    application_id: Snowflake,
    guild_id: Snowflake,
    body: Option<&Value>,
) -> Response {
    if let Err(refused) = guild_access(shared, state, application_id, guild_id) {
        return refused;
    }
    let State {
        interactions, ids, ..
    } = state;
    let book = interactions
        .guild_commands
        .entry(guild_id.get())
        .or_default();
    match book.overwrite(application_id.get(), body, || ids.next()) {
        Ok(mut list) => {
            for command in &mut list {
                command["guild_id"] = json!(guild_id.to_string());
            }
            book.commands.clone_from(&list);
            Response::json(200, &Value::Array(list))
        }
        Err((field, why)) => invalid_form(&field, &why),
    }
}

/// `GET /applications/{id}/guilds/{guild_id}/commands`: the guild's
/// commands as registered (an empty list before any).
pub(crate) fn list_guild(
    shared: &Shared,
    state: &State,
    application_id: Snowflake,
    guild_id: Snowflake,
) -> Response {
    if let Err(refused) = guild_access(shared, state, application_id, guild_id) {
        return refused;
    }
    let list = state
        .interactions
        .guild_commands
        .get(&guild_id.get())
        .map(|book| book.commands.clone())
        .unwrap_or_default();
    Response::json(200, &Value::Array(list))
}

/// The simulator's application (its bot) in a guild the simulator knows;
/// else Discord's refusal: 403 50001 for another application, 404 10004
/// for a guild it is not in.
fn guild_access(
    shared: &Shared,
    state: &State,
    application_id: Snowflake,
    guild_id: Snowflake,
) -> Result<(), Response> {
    if application_id != shared.config.bot_id {
        return Err(error(403, 50001, "Missing Access"));
    }
    if !state.dir.guilds.iter().any(|g| g.id == guild_id) {
        return Err(error(404, 10004, "Unknown Guild"));
    }
    Ok(())
}

/// `POST /interactions/{id}/{token}/callback`.
pub(crate) fn callback(
    state: &mut State,
    interaction_id: Snowflake,
    token: &str,
    body: Option<&Value>,
) -> Response {
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
    Response::no_content()
}

/// `PATCH /webhooks/{application_id}/{token}/messages/@original`.
pub(crate) fn edit_original(
    shared: &Shared,
    state: &mut State,
    application_id: Snowflake,
    token: &str,
    body: Option<&Value>,
) -> Response {
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
    Response::json(
        200,
        &json!({
            "id": id.to_string(), "channel_id": channel, "type": 20,
            "author": objects::bot_author(&shared.config), "content": text,
            "flags": flags, "attachments": [], "embeds": [], "mentions": [],
        }),
    )
}
