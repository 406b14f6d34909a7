//! The bot's reactions (`PUT
//! /channels/{id}/messages/{id}/reactions/{emoji}/@me`), as Discord
//! documents them: 204 and a MESSAGE_REACTION_ADD (reaction intents); a
//! repeat changes nothing (204 again, no event); 404 10003 / 10008 for an
//! unknown channel or message; 403 50013 where the bot may not post
//! (`set_send_permission`: Add Reactions goes with it here).
//!
//! Decided where the simulator knows less than Discord: it has no custom
//! emoji, so `name:id` is 400 10014 Unknown Emoji; any other emoji is
//! taken as Unicode.

use crate::state::shared::{Shared, State};
use crate::wire::http::Response;
use serde_json::{json, Value};
use smolcord::rest::Emoji;

fn error(status: u16, code: u32, message: &str) -> Response {
    Response::json(status, &json!({"message": message, "code": code}))
}

/// Serves the route.
pub(crate) fn add_own(
    shared: &Shared,
    state: &mut State,
    channel_id: u64,
    message_id: u64,
    emoji: Emoji,
) -> Response {
    let Some(info) = state.dir.channels.get(&channel_id) else {
        return error(404, 10003, "Unknown Channel");
    };
    let guild_id = info.guild_id;
    if state.dir.send_denied.contains(&channel_id) {
        return error(403, 50013, "Missing Permissions");
    }
    if emoji.as_str().contains(':') {
        return error(400, 10014, "Unknown Emoji");
    }
    let name = emoji.as_str().to_owned();
    let Some(message) = state.dir.history.get_mut(channel_id, message_id) else {
        return error(404, 10008, "Unknown Message");
    };
    let reactions = &mut message.object["reactions"];
    if !reactions.is_array() {
        *reactions = json!([]);
    }
    let list = reactions
        .as_array_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    let (mut list, added) = add(list, &name);
    message.object["reactions"] = Value::Array(std::mem::take(&mut list));
    if added {
        let mut event = json!({
            "user_id": shared.config.bot_id.to_string(),
            "channel_id": channel_id.to_string(),
            "message_id": message_id.to_string(),
            "emoji": {"id": null, "name": name},
            "burst": false,
            "type": 0,
        });
        if let Some(guild) = guild_id {
            event["guild_id"] = json!(guild.to_string());
        }
        state.dispatch(&shared.config, "MESSAGE_REACTION_ADD", &event);
    }
    Response::no_content()
}

/// `list` with the bot's `name` reaction; true if it was not there.
fn add(mut list: Vec<Value>, name: &str) -> (Vec<Value>, bool) {
    if let Some(existing) = list.iter_mut().find(|r| r["emoji"]["name"] == name) {
        if existing["me"] == true {
            return (list, false);
        }
        let count = existing["count"].as_u64().unwrap_or(0) + 1;
        existing["count"] = json!(count);
        existing["count_details"]["normal"] = json!(count);
        existing["me"] = json!(true);
        return (list, true);
    }
    list.push(json!({
        "count": 1,
        "count_details": {"burst": 0, "normal": 1},
        "me": true,
        "me_burst": false,
        "burst_colors": [],
        "emoji": {"id": null, "name": name},
    }));
    (list, true)
}

/// The emoji the bot reacted with on a stored message object.
pub(crate) fn own(object: &Value) -> Vec<String> {
    object["reactions"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter(|r| r["me"] == true)
                .filter_map(|r| r["emoji"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bots_reaction_is_added_once() {
        let (list, added) = add(Vec::new(), "👀");
        assert!(added);
        let (list, again) = add(list, "👀");
        assert!(!again);
        assert_eq!(list.len(), 1);
        assert_eq!(own(&json!({"reactions": list})), ["👀"]);
    }
}
