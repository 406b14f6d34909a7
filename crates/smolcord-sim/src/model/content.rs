//! MESSAGE_CONTENT as Discord documents it: an app without the intent gets
//! a guild message's `content`, `embeds`, `attachments`, `components` and
//! `poll` empty, unless the app wrote the message or is mentioned in it;
//! DMs always carry them. "Across Discord's APIs": the gateway's
//! MESSAGE_CREATE/UPDATE (per session: the intents it identified with)
//! and REST reads of messages (per application: the intent enabled on the
//! Developer Portal, [`SimConfig::enabled_privileged_intents`](crate::SimConfig)).
//!
//! Where the docs are silent (decided here): a reply's `referenced_message`
//! is judged on its own, by the same rule (a reply that mentions the bot
//! does not reveal the text of the message it answers, unless that one
//! was the bot's or mentioned it too).

use serde_json::Value;

fn as_id(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

/// Whether `d` is a guild message (DMs are exempt from the rule).
pub(crate) fn in_guild(d: &Value) -> bool {
    d.get("guild_id").is_some_and(|g| !g.is_null())
}

/// `d` as an app with id `bot_id` and without MESSAGE_CONTENT sees it.
/// `in_guild`: the message is a guild one (for a stored message whose
/// object may lack `guild_id`, the caller knows better).
pub(crate) fn withhold(d: &Value, bot_id: u64, in_guild: bool) -> Value {
    let mut d = d.clone();
    if in_guild {
        withhold_in_place(&mut d, bot_id);
    }
    d
}

fn withhold_in_place(d: &mut Value, bot_id: u64) {
    let by_bot = as_id(d.get("author").and_then(|a| a.get("id"))) == Some(bot_id);
    let mentions_bot = d
        .get("mentions")
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|u| as_id(u.get("id")) == Some(bot_id)));
    let Some(object) = d.as_object_mut() else {
        return;
    };
    if let Some(referenced) = object.get_mut("referenced_message") {
        if referenced.is_object() {
            withhold_in_place(referenced, bot_id);
        }
    }
    if by_bot || mentions_bot {
        return;
    }
    for (field, empty) in [
        ("content", Value::String(String::new())),
        ("embeds", Value::Array(Vec::new())),
        ("attachments", Value::Array(Vec::new())),
        ("components", Value::Array(Vec::new())),
    ] {
        if object.contains_key(field) {
            object.insert(field.to_owned(), empty);
        }
    }
    object.remove("poll");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn guild_messages_lose_content_without_the_intent() {
        let d = json!({"content":"hi","author":{"id":"5"},"attachments":[1],"mentions":[]});
        assert_eq!(withhold(&d, 9, true)["content"], "");
        assert_eq!(withhold(&d, 9, true)["attachments"], json!([]));
        assert_eq!(withhold(&d, 9, false)["content"], "hi");
        assert_eq!(withhold(&d, 5, true)["content"], "hi");
        let mention = json!({"content":"hi","author":{"id":"5"},"mentions":[{"id":"9"}]});
        assert_eq!(withhold(&mention, 9, true)["content"], "hi");
    }

    #[test]
    fn the_message_a_reply_answers_is_judged_on_its_own() {
        let reply = json!({"content":"<@9> look","author":{"id":"5"},"mentions":[{"id":"9"}],
            "referenced_message":{"content":"secret","author":{"id":"6"},"mentions":[]}});
        let seen = withhold(&reply, 9, true);
        assert_eq!(seen["content"], "<@9> look");
        assert_eq!(seen["referenced_message"]["content"], "");
        let to_bot = json!({"content":"more","author":{"id":"5"},"mentions":[{"id":"9"}],
            "referenced_message":{"content":"mine","author":{"id":"9"}}});
        assert_eq!(
            withhold(&to_bot, 9, true)["referenced_message"]["content"],
            "mine"
        );
    }
}
