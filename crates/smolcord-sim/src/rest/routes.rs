//! The REST routes a bridge (and discord.py, serenity, twilight) needs, under
//! `/api/v10` (`/api/v9` too), plus the `/attachments/` file server.
//!
//! Requests are checked like Discord checks them (`Authorization: Bot
//! <token>`, a JSON or `multipart/form-data` body, message length, empty
//! messages, unknown channels, Discord's upload limits — `upload_limits.rs`;
//! rate limits when [`SimConfig::rest_rate_limit`](crate::SimConfig) is
//! set) and answered with full objects and `Content-Type: application/json`
//! exactly. Uploaded files become the message's attachments, served under
//! `/attachments/` like Discord's CDN. Every request is recorded.

use super::ratelimit_headers::{route_bucket, too_many, with_counts, RouteBucket, Scope};
use super::{message_body, replies};
use crate::model::config::RestRateLimit;
use crate::model::objects::{self, MessagePlace};
use crate::state::directory::StoredFile;
use crate::state::faults::{RestFaultKind, UploadShape};
use crate::state::history::{self, StoredMessage};
use crate::state::nonces::{Original, NONCE_MAX_CHARS};
use crate::state::ratelimit::{Decision, Standing};
use crate::state::rest_faults::FaultTarget;
use crate::state::rest_log::{redact_path, RestRecord};
use crate::state::shared::{Shared, State};
use crate::wire::http::{Request, Response};
use crate::wire::multipart::{self, Part};
use serde_json::{json, Value};
use smolcord::rest::{Method, Route, Unmatched};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A request body as understood.
struct Body {
    json: Option<Value>,
    files: Vec<Part>,
}

fn error(status: u16, code: u32, message: &str) -> Response {
    Response::json(status, &json!({"message": message, "code": code}))
}

fn invalid_form(field: &str, code: &str, message: &str) -> Response {
    Response::json(
        400,
        &json!({
            "message": "Invalid Form Body",
            "code": 50035,
            "errors": {field: {"_errors": [{"code": code, "message": message}]}},
        }),
    )
}

/// 403 50013: the bot lacks a permission in the channel (Send Messages,
/// set by [`crate::Simulator::set_send_permission`]).
fn missing_permissions() -> Response {
    error(403, 50013, "Missing Permissions")
}

/// 403 50001: the bot cannot see the channel (no View Channel, set by
/// [`crate::Simulator::set_view_permission`]): Discord answers every
/// route on it so, reads of its history included.
fn missing_access() -> Response {
    error(403, 50001, "Missing Access")
}

/// Whether the bot cannot see `channel_id` (see [`missing_access`]).
/// Without Read Message History it sees the channel, and its history
/// reads come back empty (`channel_messages`).
fn unseen(state: &State, channel_id: u64) -> bool {
    state.dir.view_denied.contains(&channel_id)
}

fn not_found() -> Response {
    error(404, 0, "404: Not Found")
}

fn read_body(request: &Request) -> Result<Body, Response> {
    let mut body = Body {
        json: None,
        files: Vec::new(),
    };
    if request.body.is_empty() {
        return Ok(body);
    }
    let content_type = request.header("content-type").unwrap_or("");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let bad_json = || error(400, 50109, "The request body contains invalid JSON.");
    match essence.as_str() {
        "application/json" => {
            body.json = Some(serde_json::from_slice(&request.body).map_err(|_| bad_json())?);
        }
        "multipart/form-data" => {
            let parts = multipart::parse(content_type, &request.body)
                .map_err(|err| invalid_form("files", "MULTIPART_INVALID", &err))?;
            for part in parts {
                if part.name == "payload_json" {
                    body.json = Some(serde_json::from_slice(&part.data).map_err(|_| bad_json())?);
                } else if part.filename.is_some() {
                    body.files.push(part);
                }
            }
        }
        // Discord answers 50035 when a body comes without a usable type.
        _ => {
            return Err(invalid_form(
                "_errors",
                "CONTENT_TYPE_INVALID",
                "Expected \"Content-Type\" header to be one of {'application/json', 'application/x-www-form-urlencoded', 'multipart/form-data'}.",
            ))
        }
    }
    Ok(body)
}

/// Answers a request under `/api/`.
pub(crate) fn handle(shared: &Shared, request: &Request) -> Response {
    let now = Instant::now();
    let body = read_body(request);
    let mut state = shared.lock();
    if request.header("user-agent").is_none_or(str::is_empty) {
        note_no_user_agent(&mut state, request);
    }
    let response = match &body {
        Ok(body) => respond(shared, &mut state, request, body),
        Err(response) => Response {
            status: response.status,
            headers: response.headers.clone(),
            body: response.body.clone(),
        },
    };
    let (json, files) = match body {
        Ok(body) => (
            body.json.unwrap_or(Value::Null),
            body.files
                .into_iter()
                .map(|f| f.filename.unwrap_or_default())
                .collect(),
        ),
        Err(_) => (Value::Null, Vec::new()),
    };
    let record = RestRecord {
        at_ms: state.stats.ms(now),
        method: request.method.clone(),
        path: redact_path(&request.path),
        query: request.query.clone(),
        body: json,
        files,
        status: response.status,
    };
    log::debug!(
        "sim: REST {} {} -> {}",
        record.method,
        record.path,
        record.status
    );
    state.record_rest(record);
    response
}

/// Counts a request without `User-Agent`, warning at the first.
fn note_no_user_agent(state: &mut State, request: &Request) {
    let totals = &mut state.stats.totals;
    totals.rest_without_user_agent += 1;
    if totals.rest_without_user_agent == 1 {
        log::warn!(
            "sim: REST {} {} has no User-Agent (Discord asks for `DiscordBot (url, version)`); \
             served, and counted in totals.rest_without_user_agent",
            request.method,
            redact_path(&request.path)
        );
    }
}

/// How long to hold back the answer to `request` (a `Delay` REST fault
/// for its path, taken here; the server waits after [`handle`]).
pub(crate) fn take_delay(shared: &Shared, request: &Request) -> Option<Duration> {
    match take_matching(
        &mut shared.lock(),
        &request.method,
        &request.path,
        true,
        UploadShape::default(),
        true,
    )? {
        RestFaultKind::Delay(delay) => Some(delay),
        _ => None,
    }
}

/// The next REST fault (not a delay) aimed at `path` (the identify
/// queue's: a fault without `path_prefix` is for the REST routes, not
/// for it), if any.
pub(crate) fn take_aimed_fault(state: &mut State, path: &str) -> Option<RestFaultKind> {
    take_matching(state, "GET", path, false, UploadShape::default(), false)
}

/// Takes one of the first fault matching `path`: a `Delay` if `delay`,
/// else any other kind; one without `path_prefix` only if `unaimed`.
fn take_matching(
    state: &mut State,
    method: &str,
    path: &str,
    delay: bool,
    shape: UploadShape,
    unaimed: bool,
) -> Option<RestFaultKind> {
    let target = FaultTarget {
        method,
        path,
        shape,
        unaimed,
    };
    state.rest_faults.take(target, delay)
}

/// The answer a REST fault makes outside `/api/` (the identify queue):
/// no route, so a 429 carries no bucket headers of its own.
pub(crate) fn fault_response(kind: RestFaultKind) -> Response {
    let none = RouteBucket {
        bucket: String::new(),
        major: String::new(),
        channel: false,
    };
    let counts = Standing {
        limit: 1,
        remaining: 0,
        reset_after: Duration::ZERO,
    };
    fault_answer(kind, &none, &counts)
}

/// The answer a REST fault makes for a request to `route` whose bucket
/// stands at `counts`.
fn fault_answer(kind: RestFaultKind, route: &RouteBucket, counts: &Standing) -> Response {
    match kind {
        RestFaultKind::RateLimited {
            retry_after,
            global,
        } => {
            let scope = if global { Scope::Global } else { Scope::User };
            too_many(scope, retry_after, route, counts)
        }
        RestFaultKind::SharedRateLimited { retry_after } => {
            too_many(Scope::Shared, retry_after, route, counts)
        }
        RestFaultKind::Forbidden => error(403, 50007, "Cannot send messages to this user"),
        RestFaultKind::ServerError(status) => error(status, 0, &format!("{status}: Server Error")),
        RestFaultKind::Unauthorized => error(401, 0, "401: Unauthorized"),
        RestFaultKind::RefuseUpload { status, .. } => {
            error(status, 0, &format!("{status}: the upload was refused"))
        }
        // Taken by `take_delay` only; never answered as a fault.
        RestFaultKind::Delay(_) => error(500, 0, "500: Server Error"),
    }
}

/// The limits the headers count against (enforced or only reported).
fn counted_limits(shared: &Shared) -> (RestRateLimit, bool) {
    match shared.config.rest_rate_limit {
        Some(limits) => (limits, true),
        None => (RestRateLimit::REPORTED, false),
    }
}

fn authorized(shared: &Shared, request: &Request) -> bool {
    request.header("authorization").is_some_and(|value| {
        let mut parts = value.splitn(2, ' ');
        let scheme = parts.next().unwrap_or("");
        let token = parts.next().unwrap_or("").trim();
        scheme.eq_ignore_ascii_case("Bot") && token == shared.config.token.expose()
    })
}

fn respond(shared: &Shared, state: &mut State, request: &Request, body: &Body) -> Response {
    let shape = UploadShape {
        files: !body.files.is_empty(),
        attachments_field: body
            .json
            .as_ref()
            .is_some_and(|j| j.get("attachments").is_some_and(Value::is_array)),
        edit: request.method == "PATCH",
    };
    let route = request
        .path
        .strip_prefix("/api/v10/")
        .or_else(|| request.path.strip_prefix("/api/v9/"));
    let segments: Vec<&str> = route
        .map(|r| r.trim_end_matches('/').split('/').collect())
        .unwrap_or_default();
    let method = request.method.as_str();
    let bucket = route_bucket(method, &segments);
    let (limits, enforce) = counted_limits(shared);
    if let Some(kind) = take_matching(state, &request.method, &request.path, false, shape, true) {
        log::info!(
            "sim: REST fault {kind:?} on {} {}",
            request.method,
            request.path
        );
        let counts =
            state
                .rate_book
                .standing(&limits, &bucket.bucket, &bucket.major, Instant::now());
        return fault_answer(kind, &bucket, &counts);
    }
    let Some(path) = route else {
        return not_found();
    };
    let route = match Method::parse(method)
        .ok_or(Unmatched::NotFound)
        .and_then(|m| Route::parse(m, path))
    {
        Ok(route) => route,
        // Discord's router: a known path with another method is 405.
        Err(Unmatched::MethodNotAllowed) => return error(405, 0, "405: Method Not Allowed"),
        Err(_) => return not_found(),
    };
    if route == Route::Gateway {
        return Response::json(200, &json!({"url": shared.gateway_url()}));
    }
    // The interaction routes are authorised by the token in their path.
    if route.interaction_token().is_none() && !authorized(shared, request) {
        return error(401, 0, "401: Unauthorized");
    }
    let config = &shared.config;
    let counts = match state.rate_book.check(
        &limits,
        &bucket.bucket,
        &bucket.major,
        Instant::now(),
        enforce,
    ) {
        Decision::Allow {
            limit,
            remaining,
            reset_after,
        } => Standing {
            limit,
            remaining,
            reset_after,
        },
        Decision::Limited {
            retry_after,
            global,
            limit,
        } => {
            let scope = if global { Scope::Global } else { Scope::User };
            let counts = Standing {
                limit,
                remaining: 0,
                reset_after: retry_after,
            };
            return too_many(scope, retry_after.as_secs_f64(), &bucket, &counts);
        }
    };
    let response = match route {
        Route::GatewayBot => {
            let limit = config.session_start_limit;
            Response::json(
                200,
                &json!({
                    "url": shared.gateway_url(),
                    "shards": config.required_shards.unwrap_or(state.limits.pacing().shards),
                    "session_start_limit": {
                        "total": limit.total,
                        "remaining": state.limits.start_remaining(),
                        "reset_after": limit.reset_after.as_millis() as u64,
                        "max_concurrency": state.limits.pacing().max_concurrency,
                    },
                }),
            )
        }
        Route::CurrentUser => Response::json(200, &objects::bot_user(config)),
        Route::CurrentApplication => Response::json(200, &objects::application(config)),
        Route::CreateDm => open_dm(state, body),
        Route::GetChannel { channel_id } => match channel_object(state, channel_id.get()) {
            Some(_) if unseen(state, channel_id.get()) => missing_access(),
            Some(object) => Response::json(200, &object),
            None => error(404, 10003, "Unknown Channel"),
        },
        Route::TriggerTyping { channel_id } => {
            if !state.dir.channels.contains_key(&channel_id.get()) {
                error(404, 10003, "Unknown Channel")
            } else if unseen(state, channel_id.get()) {
                missing_access()
            } else if state.dir.send_denied.contains(&channel_id.get()) {
                missing_permissions()
            } else {
                Response::no_content()
            }
        }
        Route::CreateMessage { channel_id } => post_message(shared, state, channel_id.get(), body),
        Route::GetMessages { channel_id } => channel_messages(state, channel_id.get(), request),
        Route::EditMessage {
            channel_id,
            message_id,
        } => edit_message(shared, state, channel_id.get(), message_id.get(), body),
        Route::GetMessage {
            channel_id,
            message_id,
        } => match state.dir.history.get(channel_id.get(), message_id.get()) {
            Some(found) => Response::json(200, &state.dir.history.as_read(found)),
            None => error(404, 10008, "Unknown Message"),
        },
        Route::StartThreadFromMessage {
            channel_id,
            message_id,
        } => super::threads::start_from_message(
            shared,
            state,
            channel_id.get(),
            message_id.get(),
            body.json.as_ref(),
        ),
        Route::CreateReaction {
            channel_id,
            message_id,
            emoji,
        } => super::reactions::add_own(shared, state, channel_id.get(), message_id.get(), emoji),
        Route::SetGlobalCommands { application_id } => {
            super::interactions::set_global(shared, state, application_id, body.json.as_ref())
        }
        Route::SetGuildCommands {
            application_id,
            guild_id,
        } => super::interactions::set_guild(
            shared,
            state,
            application_id,
            guild_id,
            body.json.as_ref(),
        ),
        Route::GetGuildCommands {
            application_id,
            guild_id,
        } => super::interactions::list_guild(shared, state, application_id, guild_id),
        Route::CreateInteractionResponse {
            interaction_id,
            token,
        } => {
            super::interactions::callback(state, interaction_id, token.expose(), body.json.as_ref())
        }
        Route::EditOriginalResponse {
            application_id,
            token,
        } => super::interactions::edit_original(
            shared,
            state,
            application_id,
            token.expose(),
            body.json.as_ref(),
        ),
        // A route the client knows and the simulator does not serve yet.
        _ => not_found(),
    };
    with_counts(response, &counts, &bucket.bucket)
}

fn as_id(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// `GET /channels/{id}`'s answer, with the channel's `last_message_id`
/// (the newest message posted there; null before the first), which
/// Discord gives whatever the bot may read of the history.
fn channel_object(state: &State, id: u64) -> Option<Value> {
    let info = state.dir.channels.get(&id)?;
    let mut object = match (&info.recipient, info.guild_id) {
        (Some((user_id, name)), _) => objects::dm_channel(id, &objects::user(*user_id, name)),
        (None, Some(guild_id)) => {
            objects::text_channel(id, guild_id, info.name.as_deref().unwrap_or(""), 0, true)
        }
        (None, None) => return None,
    };
    if let Some(last) = state.dir.history.last_id(id) {
        object["last_message_id"] = json!(last.to_string());
    }
    Some(object)
}

fn open_dm(state: &mut State, body: &Body) -> Response {
    let Some(user_id) = as_id(body.json.as_ref().and_then(|j| j.get("recipient_id"))) else {
        return invalid_form(
            "recipient_id",
            "BASE_TYPE_REQUIRED",
            "This field is required",
        );
    };
    let name = state
        .dir
        .dm_by_user
        .get(&user_id)
        .and_then(|c| state.dir.channels.get(c))
        .and_then(|c| c.recipient.as_ref().map(|(_, n)| n.clone()))
        .unwrap_or_else(|| "user".to_owned());
    let state = &mut *state;
    let channel = state.dir.dm_channel(&mut state.ids, user_id, &name);
    Response::json(
        200,
        &objects::dm_channel(channel, &objects::user(user_id, &name)),
    )
}

/// Checks `content`; `Err` is the 400 answer.
fn check_content(json: &Value) -> Result<Option<String>, Response> {
    match json.get("content") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.chars().count() > 2000 => Err(invalid_form(
            "content",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 2000 or fewer in length.",
        )),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(invalid_form(
            "content",
            "STRING_TYPE_CONVERT",
            "Could not interpret value as string.",
        )),
    }
}

fn non_empty_array(json: &Value, field: &str) -> bool {
    json.get(field)
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// Discord's limits on uploads (`upload_limits.rs`); `Err` is its answer.
fn check_files(shared: &Shared, body: &Body) -> Result<(), Response> {
    let sizes: Vec<usize> = body.files.iter().map(|f| f.data.len()).collect();
    super::upload_limits::check(&sizes, shared.config.upload_limit)
}

/// Keeps the uploaded files (served under `/attachments/`) and returns
/// their attachment objects.
fn store_files(shared: &Shared, state: &mut State, channel_id: u64, body: &Body) -> Vec<Value> {
    let mut attachments = Vec::new();
    for file in &body.files {
        let attachment_id = state.ids.next();
        let filename = file.filename.clone().unwrap_or_else(|| "file".to_owned());
        let content_type = file
            .content_type
            .clone()
            .unwrap_or_else(|| "application/octet-stream".to_owned());
        let url = format!(
            "{}/attachments/{channel_id}/{attachment_id}/{filename}",
            shared.http_base()
        );
        attachments.push(json!({
            "id": attachment_id.to_string(),
            "filename": filename,
            "size": file.data.len(),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }));
        state.dir.files.insert(
            attachment_id,
            StoredFile {
                content_type,
                bytes: Arc::new(file.data.clone()),
            },
        );
    }
    attachments
}

fn post_message(shared: &Shared, state: &mut State, channel_id: u64, body: &Body) -> Response {
    if !state.dir.channels.contains_key(&channel_id) {
        return error(404, 10003, "Unknown Channel");
    };
    if unseen(state, channel_id) {
        return missing_access();
    }
    if state.dir.send_denied.contains(&channel_id) {
        return missing_permissions();
    }
    let guild_id = state.dir.channels.get(&channel_id).and_then(|c| c.guild_id);
    let json = body.json.clone().unwrap_or_else(|| json!({}));
    let content = match check_content(&json) {
        Ok(content) => content.unwrap_or_default(),
        Err(response) => return response,
    };
    if let Err(response) = message_body::check(&json, true) {
        return response;
    }
    let reply = match replies::resolve(&json, channel_id, guild_id, |channel, id| {
        stored_message(state, channel, id)
    }) {
        Ok(reply) => reply,
        Err(response) => return response,
    };
    let has_something = !content.is_empty()
        || !body.files.is_empty()
        || ["embeds", "sticker_ids", "components", "attachments"]
            .iter()
            .any(|f| non_empty_array(&json, f))
        || json.get("poll").is_some_and(|p| !p.is_null());
    if !has_something {
        return error(400, 50006, "Cannot send an empty message");
    }
    let nonce = match enforced_nonce(&json) {
        Ok(nonce) => nonce,
        Err(response) => return response,
    };
    let now = Instant::now();
    if let Some(nonce) = &nonce {
        if let Some(original) = state.nonces.find(nonce, now) {
            let object = state
                .dir
                .history
                .get(original.channel_id, original.message_id)
                .map(|m| m.object.clone());
            if let Some(object) = object {
                state.stats.totals.duplicates_prevented += 1;
                log::info!("sim: nonce {nonce:?} seen before: original message returned");
                return Response::json(200, &object);
            }
        }
    }
    if let Err(response) = check_files(shared, body) {
        return response;
    }
    let id = state.ids.next();
    let attachments = store_files(shared, state, channel_id, body);
    let place = MessagePlace {
        channel_id,
        guild_id,
    };
    let flags = json.get("flags").and_then(Value::as_u64).unwrap_or(0);
    let mut object = objects::message(
        id,
        &place,
        objects::bot_author(&shared.config),
        &content,
        attachments,
        flags,
    );
    for field in [
        "embeds",
        "components",
        "tts",
        "nonce",
        "sticker_items",
        "poll",
    ] {
        if let Some(value) = json.get(field).filter(|v| !v.is_null()) {
            object[field] = value.clone();
        }
    }
    if let Some(reply) = reply {
        object["message_reference"] = reply.reference;
        if let Some(referenced) = reply.referenced {
            object["referenced_message"] = referenced;
            object["type"] = json!(19);
        }
    }
    state
        .dir
        .history
        .push(channel_id, StoredMessage::new(id, true, object.clone()));
    if let Some(nonce) = nonce {
        let original = Original {
            channel_id,
            message_id: id,
        };
        state.nonces.remember(nonce, original, now);
    }
    // Discord echoes the bot's own message on the gateway, too.
    state.dispatch(&shared.config, "MESSAGE_CREATE", &object);
    Response::json(200, &object)
}

/// The `nonce` to check for uniqueness: present only with `enforce_nonce`;
/// `Err` is the 400 for a nonce Discord would not take.
fn enforced_nonce(json: &Value) -> Result<Option<String>, Response> {
    let nonce = match json.get("nonce") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
        Some(_) => {
            return Err(invalid_form(
                "nonce",
                "STRING_TYPE_CONVERT",
                "Could not interpret value as string.",
            ))
        }
    };
    if nonce.chars().count() > NONCE_MAX_CHARS {
        return Err(invalid_form(
            "nonce",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 25 or fewer in length.",
        ));
    }
    let enforced = json.get("enforce_nonce").and_then(Value::as_bool) == Some(true);
    Ok(enforced.then_some(nonce))
}

/// A message a reply may reference (`replies::resolve`'s lookup).
fn stored_message(state: &State, channel_id: u64, message_id: u64) -> Option<Value> {
    state
        .dir
        .history
        .get(channel_id, message_id)
        .map(|m| m.object.clone())
}

fn find_message(state: &mut State, channel: u64, message: u64) -> Option<&mut StoredMessage> {
    state.dir.history.get_mut(channel, message)
}

/// `GET /channels/{id}/messages` (see [`crate::state::history`]): 404
/// 10003 for a channel that does not exist (or was deleted), 403 50001
/// for one the bot cannot see.
fn channel_messages(state: &State, channel_id: u64, request: &Request) -> Response {
    if !state.dir.channels.contains_key(&channel_id) {
        return error(404, 10003, "Unknown Channel");
    };
    if unseen(state, channel_id) {
        return missing_access();
    }
    match history::page_query(request) {
        // No Read Message History: "no messages will be returned" (a
        // query Discord would refuse is refused all the same).
        Ok(_) if state.dir.history_denied.contains(&channel_id) => {
            Response::json(200, &Value::Array(Vec::new()))
        }
        Ok((anchor, limit)) => Response::json(
            200,
            &Value::Array(state.dir.history.page(channel_id, anchor, limit)),
        ),
        Err(response) => response,
    }
}

fn edit_message(
    shared: &Shared,
    state: &mut State,
    channel: u64,
    message: u64,
    body: &Body,
) -> Response {
    let json = body.json.clone().unwrap_or_else(|| json!({}));
    let content = match check_content(&json) {
        Ok(content) => content,
        Err(response) => return response,
    };
    if let Err(response) = message_body::check(&json, false) {
        return response;
    }
    if let Err(response) = check_files(shared, body) {
        return response;
    }
    match find_message(state, channel, message) {
        None => return error(404, 10008, "Unknown Message"),
        Some(found) if !found.by_bot => {
            return error(403, 50005, "Cannot edit a message authored by another user")
        }
        Some(_) => {}
    }
    // Uploaded files are added to the message's attachments.
    let added = match channel {
        channel_id if !body.files.is_empty() => store_files(shared, state, channel_id, body),
        _ => Vec::new(),
    };
    let Some(found) = find_message(state, channel, message) else {
        return error(404, 10008, "Unknown Message");
    };
    if !added.is_empty() {
        let mut attachments = found.object["attachments"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        attachments.extend(added);
        found.object["attachments"] = Value::Array(attachments);
    }
    if let Some(content) = content {
        found.object["content"] = json!(content);
    }
    for field in ["embeds", "components", "flags"] {
        if let Some(value) = json.get(field).filter(|v| !v.is_null()) {
            found.object[field] = value.clone();
        }
    }
    found.edits += 1;
    found.object["edited_timestamp"] = json!(objects::timestamp_now());
    let object = found.object.clone();
    state.dispatch(&shared.config, "MESSAGE_UPDATE", &object);
    Response::json(200, &object)
}

/// Serves `/attachments/{channel}/{attachment}/{filename}` (no auth, like
/// Discord's CDN).
pub(crate) fn attachment(shared: &Shared, request: &Request) -> Response {
    let now = Instant::now();
    let id = request
        .path
        .trim_start_matches('/')
        .split('/')
        .nth(2)
        .and_then(|id| id.parse::<u64>().ok());
    let mut state = shared.lock();
    let response = match (
        request.method.as_str(),
        id.and_then(|id| state.dir.files.get(&id)),
    ) {
        ("GET", Some(file)) => {
            Response::bytes(200, &file.content_type, file.bytes.as_ref().clone())
        }
        _ => not_found(),
    };
    let record = RestRecord {
        at_ms: state.stats.ms(now),
        method: request.method.clone(),
        path: redact_path(&request.path),
        query: request.query.clone(),
        body: Value::Null,
        files: Vec::new(),
        status: response.status,
    };
    state.record_rest(record);
    response
}
