//! The control API: JSON over HTTP under `/control`, for clients and
//! scripts that are not Rust tests. The forms are listed in the module
//! documentation of [`crate`]. A bad request gets 400 with
//! `{"error": "..."}` naming what is wrong.

use super::fields::{bad, body, bool_field, id_field, str_field};
use super::inject::ChannelPost;
use crate::state::faults::{Fault, RestFault};
use crate::state::shared::Shared;
use crate::wire::http::{Request, Response};
use base64::Engine;
use serde_json::{json, Value};
use smolcord::protocol::Snowflake;
use std::time::Duration;

/// Answers a request under `/control`.
pub(crate) fn handle(shared: &Shared, request: &Request) -> Response {
    match route(shared, request) {
        Ok(response) | Err(response) => response,
    }
}

fn route(shared: &Shared, request: &Request) -> Result<Response, Response> {
    let path = request
        .path
        .strip_prefix("/control")
        .unwrap_or("")
        .trim_end_matches('/');
    let method = request.method.as_str();
    Ok(match (method, path) {
        ("GET", "") => Response::json(
            200,
            &json!({"endpoints": [
                "POST /control/fault", "POST /control/rest-fault", "POST /control/dispatch",
                "POST /control/dm", "POST /control/guild-message",
                "POST /control/channel-permission", "GET /control/stats",
                "GET /control/identify", "POST /control/identify",
                "GET /control/rest-log", "GET /control/messages?channel_id=ID",
                "POST /control/command", "GET /control/interaction?id=ID"]}),
        ),
        ("POST", "/fault") => {
            let fault = Fault::from_json(&body(request)?).map_err(bad)?;
            let applied = shared.fault(fault);
            Response::json(200, &json!({"applied_to": applied}))
        }
        ("POST", "/rest-fault") => {
            let fault = RestFault::from_json(&body(request)?).map_err(bad)?;
            shared.rest_fault(fault);
            Response::json(200, &json!({"queued": true}))
        }
        ("POST", "/dispatch") => {
            let body = body(request)?;
            let event = match body.get("event") {
                Some(Value::String(e)) if !e.is_empty() => e.clone(),
                Some(_) => return Err(bad("field `event` must be a non-empty string")),
                None => return Err(bad("missing field `event`")),
            };
            let d = body.get("d").cloned().unwrap_or(Value::Null);
            let seqs = shared.dispatch(&event, &d);
            Response::json(200, &json!({"seqs": seqs}))
        }
        ("GET", "/identify") => Response::json(200, &json!(shared.lock().limits.pacing())),
        ("POST", "/identify") => {
            let current = shared.lock().limits.pacing();
            let pacing = current.updated(&body(request)?).map_err(bad)?;
            shared.set_pacing(pacing).map_err(|e| bad(e.to_string()))?;
            Response::json(200, &json!(pacing))
        }
        ("POST", "/dm") => dm(shared, &body(request)?)?,
        ("POST", "/dm-file") => super::cdn::dm_file(shared, &body(request)?)?,
        ("POST", "/cdn") => super::cdn::control(shared, &body(request)?)?,
        ("POST", "/command") => super::commands_api::use_command(shared, &body(request)?)?,
        ("GET", "/interaction") => super::commands_api::answer(shared, request)?,
        ("POST", "/guild-message") => {
            let body = body(request)?;
            let channel = id_field(&body, "channel_id")?;
            let author = id_field(&body, "author_id")?;
            let name = str_field(&body, "author_name", "user")?;
            let content = str_field(&body, "content", "")?;
            let mut post = ChannelPost::new(Snowflake::new(channel), author, name, content);
            post.mention_bot = bool_field(&body, "mention_bot", false)?;
            post.ping_replied = bool_field(&body, "ping_replied", true)?;
            if body.get("reply_to").is_some_and(|v| !v.is_null()) {
                post.reply_to = Some(Snowflake::new(id_field(&body, "reply_to")?));
            }
            let id = shared
                .post_in_channel(&post)
                .map_err(|e| bad(e.to_string()))?;
            Response::json(200, &json!({"message_id": id}))
        }
        ("POST", "/channel-permission") => {
            let body = body(request)?;
            let channel = Snowflake::new(id_field(&body, "channel_id")?);
            let mut answer = serde_json::Map::new();
            // Each given permission is set; none given: Send Messages on.
            let view = body.get("view_channel").is_some();
            let history = body.get("read_message_history").is_some();
            if body.get("send_messages").is_some() || !(view || history) {
                let allowed = bool_field(&body, "send_messages", true)?;
                shared
                    .set_send_permission(channel, allowed)
                    .map_err(|e| bad(e.to_string()))?;
                answer.insert("send_messages".into(), json!(allowed));
            }
            if view {
                let allowed = bool_field(&body, "view_channel", true)?;
                shared
                    .set_view_permission(channel, allowed)
                    .map_err(|e| bad(e.to_string()))?;
                answer.insert("view_channel".into(), json!(allowed));
            }
            if history {
                let allowed = bool_field(&body, "read_message_history", true)?;
                shared
                    .set_history_permission(channel, allowed)
                    .map_err(|e| bad(e.to_string()))?;
                answer.insert("read_message_history".into(), json!(allowed));
            }
            Response::json(200, &Value::Object(answer))
        }
        ("GET", "/stats") => {
            let stats = shared
                .lock()
                .stats
                .snapshot(shared.config.heartbeat_grace, shared.config.late_tolerance);
            Response::json(200, &serde_json::to_value(stats).unwrap_or(Value::Null))
        }
        ("GET", "/rest-log") => {
            let log: Vec<_> = shared.lock().rest_log.records().cloned().collect();
            Response::json(200, &serde_json::to_value(log).unwrap_or(Value::Null))
        }
        ("GET", "/messages") => {
            let channel = request
                .query_param("channel_id")
                .ok_or_else(|| bad("missing query parameter `channel_id`"))?
                .parse::<u64>()
                .map_err(|_| bad("query parameter `channel_id` must be a Discord id"))?;
            let messages = shared.lock().dir.history.bot_messages(channel);
            Response::json(200, &serde_json::to_value(messages).unwrap_or(Value::Null))
        }
        (
            _,
            ""
            | "/fault"
            | "/rest-fault"
            | "/dispatch"
            | "/dm"
            | "/guild-message"
            | "/channel-permission"
            | "/stats"
            | "/identify"
            | "/rest-log"
            | "/messages"
            | "/command"
            | "/interaction",
        ) => Response::json(
            405,
            &json!({"error": format!("{method} is not allowed on /control{path}")}),
        ),
        _ => Response::json(
            404,
            &json!({"error": format!("no control endpoint /control{path} (GET /control lists them)")}),
        ),
    })
}

/// `POST /control/dm`: a text DM, or a voice note when `voice_ogg_base64`
/// is given.
fn dm(shared: &Shared, body: &Value) -> Result<Response, Response> {
    let author = id_field(body, "author_id")?;
    let name = str_field(body, "author_name", "user")?;
    let voice = str_field(body, "voice_ogg_base64", "")?;
    if voice.is_empty() {
        let content = str_field(body, "content", "")?;
        let (message_id, channel_id) = shared.send_dm(author, name, content);
        return Ok(Response::json(
            200,
            &json!({"message_id": message_id, "channel_id": channel_id}),
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(voice)
        .map_err(|err| bad(format!("field `voice_ogg_base64` is not base64: {err}")))?;
    let seconds = match body.get("duration_secs") {
        None => 1.0,
        Some(v) => v
            .as_f64()
            .filter(|s| s.is_finite() && (0.0..86_400.0).contains(s))
            .ok_or_else(|| bad("field `duration_secs` must be a number of seconds"))?,
    };
    let note = shared.send_voice_dm(author, name, bytes, Duration::from_secs_f64(seconds));
    Ok(Response::json(
        200,
        &json!({"message_id": note.message_id, "channel_id": note.channel_id, "attachment_url": note.url}),
    ))
}
