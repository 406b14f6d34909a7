//! Replies as Discord makes them: a `message_reference` (type 0, the
//! default) must name a message that exists, and the reply carries it whole
//! as `referenced_message` (Discord's `null` there means "deleted", so the
//! simulator never sends `null` for a message it has). A reference to a
//! message that does not exist is 400 50035 (`MESSAGE_REFERENCE_UNKNOWN_MESSAGE`)
//! unless `fail_if_not_exists: false`, which sends the message without the
//! reference. Other reference types (forwards) are passed through.

use crate::wire::http::Response;
use serde_json::{json, Value};

/// What a reply gets.
pub(crate) struct Reply {
    /// Its `message_reference`, completed (`channel_id`, `guild_id`).
    pub reference: Value,
    /// Its `referenced_message`, `None` for a reference type that has none.
    pub referenced: Option<Value>,
}

fn as_id(value: Option<&Value>) -> Option<u64> {
    match value? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

fn unknown_message() -> Response {
    Response::json(
        400,
        &json!({
            "message": "Invalid Form Body",
            "code": 50035,
            "errors": {"message_reference": {"_errors": [
                {"code": "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "message": "Unknown message"}
            ]}},
        }),
    )
}

/// The reply a message body asks for in channel `channel_id` (of guild
/// `guild_id`); `lookup(channel, message)` finds a stored message object.
/// `Ok(None)`: no reference (or one dropped by `fail_if_not_exists:
/// false`); `Err`: the 400 to answer.
pub(crate) fn resolve(
    body: &Value,
    channel_id: u64,
    guild_id: Option<u64>,
    lookup: impl Fn(u64, u64) -> Option<Value>,
) -> Result<Option<Reply>, Response> {
    let Some(reference) = body.get("message_reference").filter(|v| v.is_object()) else {
        return Ok(None);
    };
    let kind = reference.get("type").and_then(Value::as_u64).unwrap_or(0);
    let mut completed = reference.clone();
    if completed.get("channel_id").is_none_or(Value::is_null) {
        completed["channel_id"] = json!(channel_id.to_string());
    }
    if kind != 0 {
        return Ok(Some(Reply {
            reference: completed,
            referenced: None,
        }));
    }
    let target_channel = as_id(completed.get("channel_id")).unwrap_or(channel_id);
    let found = as_id(reference.get("message_id")).and_then(|id| lookup(target_channel, id));
    let Some(mut referenced) = found else {
        let fail = reference
            .get("fail_if_not_exists")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        return if fail {
            Err(unknown_message())
        } else {
            log::debug!("sim: reply to an unknown message sent without its reference");
            Ok(None)
        };
    };
    // One level: the referenced message's own reply is not repeated.
    if let Some(object) = referenced.as_object_mut() {
        object.remove("referenced_message");
    }
    completed["type"] = json!(0);
    completed["message_id"] = referenced["id"].clone();
    if let Some(guild_id) = guild_id {
        completed["guild_id"] = json!(guild_id.to_string());
    }
    if let Some(object) = completed.as_object_mut() {
        object.remove("fail_if_not_exists");
    }
    Ok(Some(Reply {
        reference: completed,
        referenced: Some(referenced),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(channel: u64, id: u64) -> Option<Value> {
        (channel == 7 && id == 70)
            .then(|| json!({"id": "70", "content": "first", "referenced_message": {"id": "1"}}))
    }

    #[test]
    fn a_reply_carries_the_message_it_answers() {
        let body = json!({"message_reference": {"message_id": "70"}});
        let reply = resolve(&body, 7, Some(9), lookup).unwrap().unwrap();
        let referenced = reply.referenced.unwrap();
        assert_eq!(referenced["content"], "first");
        assert!(referenced.get("referenced_message").is_none());
        assert_eq!(
            reply.reference,
            json!({"type": 0, "message_id": "70", "channel_id": "7", "guild_id": "9"})
        );
    }

    #[test]
    fn an_unknown_message_is_refused_unless_told_otherwise() {
        let body = json!({"message_reference": {"message_id": "71"}});
        let refused = resolve(&body, 7, None, lookup).err().unwrap();
        assert_eq!(refused.status, 400);
        let lenient = json!({"message_reference": {"message_id": 71, "fail_if_not_exists": false}});
        assert!(resolve(&lenient, 7, None, lookup).unwrap().is_none());
        assert!(resolve(&json!({"content": "x"}), 7, None, lookup)
            .unwrap()
            .is_none());
        let forward =
            json!({"message_reference": {"type": 1, "message_id": "71", "channel_id": "8"}});
        assert!(resolve(&forward, 7, None, lookup)
            .unwrap()
            .unwrap()
            .referenced
            .is_none());
    }
}
