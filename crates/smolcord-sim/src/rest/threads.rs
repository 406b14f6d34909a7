//! Threads started from a message (`POST
//! /channels/{id}/messages/{id}/threads`), as Discord documents them: a
//! public thread (type 11) whose id is the message's, in the message's
//! guild channel, announced by THREAD_CREATE (GUILDS intent); one thread
//! per message (a second try: 400 160004); a channel where the bot lacks
//! permission to post (`set_send_permission`) refuses with 403 50013, as
//! Create Public Threads goes with it in practice. Messages in a thread
//! are messages of the thread's channel, like any other.

use crate::model::objects;
use crate::state::directory::ChannelInfo;
use crate::state::shared::{Shared, State};
use crate::wire::http::Response;
use serde_json::{json, Value};

fn error(status: u16, code: u32, message: &str) -> Response {
    Response::json(status, &json!({"message": message, "code": code}))
}

fn invalid_name(message: &str) -> Response {
    Response::json(
        400,
        &json!({
            "message": "Invalid Form Body",
            "code": 50035,
            "errors": {"name": {"_errors": [{"code": "BASE_TYPE_BAD_LENGTH", "message": message}]}},
        }),
    )
}

/// A thread channel object.
pub(crate) fn thread_object(id: u64, guild_id: u64, parent: u64, name: &str, bot: u64) -> Value {
    json!({
        "id": id.to_string(),
        "type": 11,
        "guild_id": guild_id.to_string(),
        "parent_id": parent.to_string(),
        "owner_id": bot.to_string(),
        "name": name,
        "last_message_id": null,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "flags": 0,
        "thread_metadata": {
            "archived": false,
            "auto_archive_duration": 1440,
            "archive_timestamp": objects::timestamp_now(),
            "locked": false,
        },
    })
}

/// Serves the route.
pub(crate) fn start_from_message(
    shared: &Shared,
    state: &mut State,
    channel_id: u64,
    message_id: u64,
    body: Option<&Value>,
) -> Response {
    let Some(guild_id) = state.dir.channels.get(&channel_id).map(|c| c.guild_id) else {
        return error(404, 10003, "Unknown Channel");
    };
    let Some(guild_id) = guild_id else {
        // DMs have no threads.
        return error(400, 50024, "Cannot execute action on this channel type");
    };
    if state.dir.history.get(channel_id, message_id).is_none() {
        return error(404, 10008, "Unknown Message");
    }
    if state.dir.send_denied.contains(&channel_id) {
        return error(403, 50013, "Missing Permissions");
    }
    if state.dir.thread_parent.contains_key(&message_id) {
        return error(
            400,
            160004,
            "A thread has already been created for this message",
        );
    }
    let name = match body.and_then(|b| b.get("name")) {
        Some(Value::String(name)) => name.clone(),
        _ => return invalid_name("This field is required"),
    };
    let length = name.chars().count();
    if !(1..=100).contains(&length) {
        return invalid_name("Must be between 1 and 100 in length.");
    }
    let thread = thread_object(
        message_id,
        guild_id,
        channel_id,
        &name,
        shared.config.bot_id.get(),
    );
    state.dir.channels.insert(
        message_id,
        ChannelInfo {
            guild_id: Some(guild_id),
            name: Some(name),
            recipient: None,
        },
    );
    state.dir.thread_parent.insert(message_id, channel_id);
    let mut created = thread.clone();
    created["newly_created"] = json!(true);
    state.dispatch(&shared.config, "THREAD_CREATE", &created);
    Response::json(201, &thread)
}
