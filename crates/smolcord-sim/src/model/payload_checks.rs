//! What the gateway refuses in a command's `d`: Discord closes with 4001
//! ("an invalid payload for an opcode") for a payload of the wrong shape,
//! and the simulator also refuses values outside the ranges the docs give
//! (the decisions are listed in the module doc of [`crate`]).
//! Each check returns the reason, for the close frame.

/// A command refused: the close code and the reason sent with it.
pub(crate) type Refusal = (smolcord::protocol::CloseCode, String);

use serde_json::{Map, Value};

/// Presence statuses a client may set (op 3, Identify `presence`).
const STATUSES: [&str; 5] = ["online", "dnd", "idle", "invisible", "offline"];
/// Activity types: playing, streaming, listening, watching, custom,
/// competing.
const ACTIVITY_TYPES: std::ops::RangeInclusive<u64> = 0..=5;
/// Identify `large_threshold`: "Value between 50 and 250".
const LARGE_THRESHOLD: std::ops::RangeInclusive<u64> = 50..=250;

fn object<'a>(d: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    d.as_object()
        .ok_or_else(|| format!("{what} `d` must be an object, not {}", kind_of(d)))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A snowflake as the gateway takes it: a string of digits (or a number).
pub(crate) fn snowflake(value: &Value) -> Option<u64> {
    match value {
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().ok()
        }
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

fn required_snowflake(d: &Map<String, Value>, field: &str, what: &str) -> Result<u64, String> {
    match d.get(field) {
        None => Err(format!("{what} needs `{field}`")),
        Some(value) => {
            snowflake(value).ok_or_else(|| format!("{what} `{field}` must be a snowflake"))
        }
    }
}

fn optional_bool(d: &Map<String, Value>, field: &str, what: &str) -> Result<(), String> {
    match d.get(field) {
        None | Some(Value::Null | Value::Bool(_)) => Ok(()),
        Some(_) => Err(format!("{what} `{field}` must be true or false")),
    }
}

/// op 4 Voice State Update: `guild_id`, `channel_id` (or null to leave),
/// `self_mute`, `self_deaf`.
pub(crate) fn voice_state(d: &Value) -> Result<(), String> {
    let what = "Voice State Update";
    let d = object(d, what)?;
    required_snowflake(d, "guild_id", what)?;
    match d.get("channel_id") {
        None => return Err(format!("{what} needs `channel_id` (null to leave)")),
        Some(Value::Null) => {}
        Some(value) if snowflake(value).is_some() => {}
        Some(_) => return Err(format!("{what} `channel_id` must be a snowflake or null")),
    }
    for field in ["self_mute", "self_deaf"] {
        match d.get(field) {
            Some(Value::Bool(_)) => {}
            None => return Err(format!("{what} needs `{field}`")),
            Some(_) => return Err(format!("{what} `{field}` must be true or false")),
        }
    }
    Ok(())
}

/// op 31 Request Soundboard Sounds: `guild_ids`, an array of snowflakes.
pub(crate) fn soundboard(d: &Value) -> Result<(), String> {
    let what = "Request Soundboard Sounds";
    let d = object(d, what)?;
    match d.get("guild_ids") {
        Some(Value::Array(ids)) if ids.iter().all(|id| snowflake(id).is_some()) => Ok(()),
        Some(_) => Err(format!("{what} `guild_ids` must be an array of snowflakes")),
        None => Err(format!("{what} needs `guild_ids`")),
    }
}

/// A presence (op 3, Identify `presence`): a known `status`, activities
/// with a `name` and a known `type`. (Its `since` is read leniently
/// elsewhere.)
pub(crate) fn presence(d: &Value) -> Result<(), String> {
    let what = "presence";
    let d = object(d, what)?;
    match d.get("status") {
        Some(Value::String(status)) if STATUSES.contains(&status.as_str()) => {}
        Some(Value::String(status)) => {
            return Err(format!(
                "presence status `{status}` is not one of {}",
                STATUSES.join(", ")
            ))
        }
        Some(_) => return Err("presence `status` must be a string".to_owned()),
        None => return Err("presence needs `status`".to_owned()),
    }
    optional_bool(d, "afk", what)?;
    let activities = match d.get("activities") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(activities)) => activities,
        Some(_) => return Err("presence `activities` must be an array".to_owned()),
    };
    for activity in activities {
        let activity = object(activity, "activity")?;
        if !activity.get("name").is_some_and(Value::is_string) {
            return Err("an activity needs a string `name`".to_owned());
        }
        match activity.get("type").and_then(Value::as_u64) {
            Some(kind) if ACTIVITY_TYPES.contains(&kind) => {}
            _ => {
                return Err(format!(
                    "activity type {} is not one of 0-5",
                    activity.get("type").unwrap_or(&Value::Null)
                ))
            }
        }
    }
    Ok(())
}

/// What the Identify struct's decoding does not check: `large_threshold`
/// in 50-250 and the initial presence.
pub(crate) fn identify_extras(d: &Value) -> Result<(), String> {
    let Some(d) = d.as_object() else {
        return Ok(()); // the decoder names it
    };
    match d.get("large_threshold") {
        None | Some(Value::Null) => {}
        Some(value) => match value.as_u64() {
            Some(n) if LARGE_THRESHOLD.contains(&n) => {}
            _ => return Err(format!("large_threshold {value} is not between 50 and 250")),
        },
    }
    match d.get("presence") {
        None | Some(Value::Null) => Ok(()),
        Some(presence) => self::presence(presence),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_shapes_are_named() {
        for d in [json!("garbage"), json!([1, 2]), json!(null), json!(7)] {
            assert!(voice_state(&d).unwrap_err().contains("must be an object"));
            assert!(soundboard(&d).unwrap_err().contains("must be an object"));
            assert!(presence(&d).unwrap_err().contains("must be an object"));
        }
        let good =
            json!({"guild_id": "1", "channel_id": null, "self_mute": false, "self_deaf": true});
        assert_eq!(voice_state(&good), Ok(()));
        let bad =
            json!({"guild_id": "x", "channel_id": null, "self_mute": false, "self_deaf": true});
        assert!(voice_state(&bad).unwrap_err().contains("guild_id"));
        assert_eq!(soundboard(&json!({"guild_ids": ["1", 2]})), Ok(()));
        assert!(soundboard(&json!({"guild_ids": "1"})).is_err());
    }

    #[test]
    fn presences_and_identify_ranges() {
        assert_eq!(presence(&json!({"status": "idle", "since": null})), Ok(()));
        assert!(presence(&json!({"status": "banana"}))
            .unwrap_err()
            .contains("banana"));
        let activity =
            |kind: u64| json!({"status": "online", "activities": [{"name": "x", "type": kind}]});
        assert_eq!(presence(&activity(5)), Ok(()));
        assert!(presence(&activity(42)).unwrap_err().contains("42"));
        assert_eq!(identify_extras(&json!({"large_threshold": 250})), Ok(()));
        assert!(identify_extras(&json!({"large_threshold": 10}))
            .unwrap_err()
            .contains("between 50 and 250"));
        assert!(identify_extras(&json!({"presence": {"status": "banana"}})).is_err());
    }
}
