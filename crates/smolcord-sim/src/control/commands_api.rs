//! The control API's slash commands: `POST /control/command` (a user uses
//! a registered command in their DM with the bot) and `GET
//! /control/interaction?id=ID` (what the bot answered), so the demo and
//! scripts can do what [`crate::Simulator::use_command`] and
//! [`crate::Simulator::interaction_answer`] do for Rust tests.

use crate::control::fields::{bad, id_field, str_field};
use crate::state::shared::Shared;
use crate::wire::http::{Request, Response};
use serde_json::{json, Value};
use smolcord::protocol::Snowflake;

/// `POST /control/command`.
pub(crate) fn use_command(shared: &Shared, body: &Value) -> Result<Response, Response> {
    let user = id_field(body, "user_id")?;
    let user_name = str_field(body, "user_name", "user")?;
    let name = str_field(body, "name", "")?;
    if name.is_empty() {
        return Err(bad("missing field `name` (the command's name)"));
    }
    let options: Vec<(&str, &str)> = match body.get("options") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(key, value)| match value {
                Value::String(text) => Ok((key.as_str(), text.as_str())),
                _ => Err(bad(format!("option `{key}` must be a string"))),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("field `options` must be an object of strings")),
    };
    let used = shared
        .use_command(user, user_name, name, &options)
        .map_err(|e| bad(e.to_string()))?;
    Ok(Response::json(
        200,
        &json!({"interaction_id": used.interaction_id, "channel_id": used.channel_id}),
    ))
}

/// `GET /control/interaction?id=ID`.
pub(crate) fn answer(shared: &Shared, request: &Request) -> Result<Response, Response> {
    let id = request
        .query_param("id")
        .ok_or_else(|| bad("missing query parameter `id`"))?
        .parse::<u64>()
        .map_err(|_| bad("query parameter `id` must be a Discord id"))?;
    Ok(Response::json(
        200,
        &match shared.interaction_answer(Snowflake::new(id)) {
            None => json!({"answered": false}),
            Some(answer) => json!({
                "answered": true,
                "deferred": answer.deferred,
                "ephemeral": answer.ephemeral,
                "content": answer.content,
                "edits": answer.edits,
                "after_ms": answer.after.as_millis() as u64,
                "refused_callbacks": answer.refused_callbacks,
            }),
        },
    ))
}
