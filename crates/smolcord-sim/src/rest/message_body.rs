//! A light check of the message fields smolcord and the compat clients
//! send, as Discord checks them: the wrong type or a value past a
//! documented limit is 400 50035 "Invalid Form Body" with the field's path
//! in `errors` (`{"embeds": {"0": {"title": {"_errors": [...]}}}}`), using
//! Discord's error codes (`STRING_TYPE_CONVERT`, `BASE_TYPE_MAX_LENGTH`,
//! ...). `content` and `nonce` are checked where the message is made; the
//! rest is here: `tts`, `flags` (on create only the settable bits),
//! `embeds` (≤ 10, their field types and lengths, 6000 characters in all),
//! `allowed_mentions`, `sticker_ids`, `components`, `attachments`,
//! `message_reference`.

use crate::wire::http::Response;
use serde_json::{json, Map, Value};

/// Flags a message may be created with: SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS,
/// IS_VOICE_MESSAGE, IS_COMPONENTS_V2.
const SETTABLE_FLAGS: u64 = (1 << 2) | (1 << 12) | (1 << 13) | (1 << 15);
const MAX_EMBEDS: usize = 10;
const MAX_EMBED_FIELDS: usize = 25;
const MAX_EMBED_TOTAL: usize = 6000;
const MAX_STICKERS: usize = 3;

/// One problem: where (path from the body's root) and what.
struct Problem {
    path: Vec<String>,
    code: &'static str,
    message: String,
}

impl Problem {
    /// The 400 Discord answers: the path as nested objects.
    fn response(self) -> Response {
        let mut errors = json!({"_errors": [{"code": self.code, "message": self.message}]});
        for part in self.path.iter().rev() {
            errors = json!({ part: errors });
        }
        Response::json(
            400,
            &json!({"message": "Invalid Form Body", "code": 50035, "errors": errors}),
        )
    }
}

struct Checker {
    path: Vec<String>,
}

type Checked = Result<(), Problem>;

impl Checker {
    fn at<T>(&mut self, part: impl ToString, f: impl FnOnce(&mut Checker) -> T) -> T {
        self.path.push(part.to_string());
        let out = f(self);
        self.path.pop();
        out
    }

    fn fail(&self, code: &'static str, message: impl Into<String>) -> Checked {
        Err(Problem {
            path: self.path.clone(),
            code,
            message: message.into(),
        })
    }

    fn string(&self, value: &Value, max: usize) -> Result<usize, Problem> {
        match value {
            Value::String(s) => {
                let chars = s.chars().count();
                if chars > max {
                    self.fail(
                        "BASE_TYPE_MAX_LENGTH",
                        format!("Must be {max} or fewer in length."),
                    )?;
                }
                Ok(chars)
            }
            other => {
                self.fail(
                    "STRING_TYPE_CONVERT",
                    format!("Could not interpret \"{other}\" as string."),
                )?;
                Ok(0)
            }
        }
    }

    fn boolean(&self, value: &Value) -> Checked {
        match value {
            Value::Bool(_) => Ok(()),
            other => self.fail(
                "BOOLEAN_TYPE_CONVERT",
                format!("Could not interpret \"{other}\" as boolean."),
            ),
        }
    }

    fn integer(&self, value: &Value) -> Result<u64, Problem> {
        match value.as_u64() {
            Some(n) => Ok(n),
            None => {
                self.fail(
                    "NUMBER_TYPE_COERCE",
                    format!("Value \"{value}\" is not int."),
                )?;
                Ok(0)
            }
        }
    }

    fn object<'a>(&self, value: &'a Value) -> Result<&'a Map<String, Value>, Problem> {
        match value {
            Value::Object(map) => Ok(map),
            _ => Err(Problem {
                path: self.path.clone(),
                code: "MODEL_TYPE_CONVERT",
                message: "Only dictionaries may be used in a ModelType".to_owned(),
            }),
        }
    }

    fn list<'a>(&self, value: &'a Value, max: usize) -> Result<&'a [Value], Problem> {
        match value {
            Value::Array(items) if items.len() <= max => Ok(items),
            Value::Array(_) => Err(Problem {
                path: self.path.clone(),
                code: "BASE_TYPE_MAX_LENGTH",
                message: format!("Must be {max} or fewer in length."),
            }),
            _ => Err(Problem {
                path: self.path.clone(),
                code: "LIST_TYPE_CONVERT",
                message: "Only iterables may be used in a ListType".to_owned(),
            }),
        }
    }

    /// An optional string field of `map`; its length in characters.
    fn text(
        &mut self,
        map: &Map<String, Value>,
        field: &str,
        max: usize,
    ) -> Result<usize, Problem> {
        match map.get(field) {
            None | Some(Value::Null) => Ok(0),
            Some(value) => self.at(field, |c| c.string(value, max)),
        }
    }

    /// A required string field of `map`.
    fn required_text(
        &mut self,
        map: &Map<String, Value>,
        field: &str,
        max: usize,
    ) -> Result<usize, Problem> {
        match map.get(field) {
            None | Some(Value::Null) => self.at(field, |c| {
                c.fail("BASE_TYPE_REQUIRED", "This field is required")?;
                Ok(0)
            }),
            Some(value) => self.at(field, |c| c.string(value, max)),
        }
    }

    fn embed(&mut self, value: &Value) -> Result<usize, Problem> {
        let embed = self.object(value)?;
        let mut total = self.text(embed, "title", 256)?;
        total += self.text(embed, "description", 4096)?;
        self.text(embed, "url", 2048)?;
        self.text(embed, "timestamp", 64)?;
        if let Some(color) = embed.get("color").filter(|v| !v.is_null()) {
            self.at("color", |c| {
                if c.integer(color)? > 0xFF_FFFF {
                    c.fail(
                        "NUMBER_TYPE_MAX",
                        "int value should be less than or equal to 16777215.",
                    )?;
                }
                Ok(())
            })?;
        }
        if let Some(footer) = embed.get("footer").filter(|v| !v.is_null()) {
            total += self.at("footer", |c| {
                let footer = c.object(footer)?;
                c.text(footer, "icon_url", 2048)?;
                c.required_text(footer, "text", 2048)
            })?;
        }
        if let Some(author) = embed.get("author").filter(|v| !v.is_null()) {
            total += self.at("author", |c| {
                let author = c.object(author)?;
                c.text(author, "url", 2048)?;
                c.text(author, "icon_url", 2048)?;
                c.required_text(author, "name", 256)
            })?;
        }
        for media in ["image", "thumbnail"] {
            if let Some(value) = embed.get(media).filter(|v| !v.is_null()) {
                self.at(media, |c| {
                    let media = c.object(value)?;
                    c.required_text(media, "url", 2048).map(|_| ())
                })?;
            }
        }
        if let Some(fields) = embed.get("fields").filter(|v| !v.is_null()) {
            total += self.at("fields", |c| {
                let mut total = 0;
                for (i, field) in c.list(fields, MAX_EMBED_FIELDS)?.iter().enumerate() {
                    total += c.at(i, |c| {
                        let field = c.object(field)?;
                        let name = c.required_text(field, "name", 256)?;
                        let value = c.required_text(field, "value", 1024)?;
                        if let Some(inline) = field.get("inline").filter(|v| !v.is_null()) {
                            c.at("inline", |c| c.boolean(inline))?;
                        }
                        Ok::<_, Problem>(name + value)
                    })?;
                }
                Ok::<_, Problem>(total)
            })?;
        }
        Ok(total)
    }

    fn body(&mut self, body: &Map<String, Value>, creating: bool) -> Checked {
        if let Some(tts) = body.get("tts").filter(|v| !v.is_null()) {
            self.at("tts", |c| c.boolean(tts))?;
        }
        if let Some(flags) = body.get("flags").filter(|v| !v.is_null()) {
            self.at("flags", |c| {
                let flags = c.integer(flags)?;
                if creating && flags & !SETTABLE_FLAGS != 0 {
                    c.fail(
                        "MESSAGE_FLAGS_INVALID",
                        format!(
                            "Only SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS, IS_VOICE_MESSAGE and \
                             IS_COMPONENTS_V2 can be set (not {:#x}).",
                            flags & !SETTABLE_FLAGS
                        ),
                    )?;
                }
                Ok(())
            })?;
        }
        if let Some(embeds) = body.get("embeds").filter(|v| !v.is_null()) {
            self.at("embeds", |c| {
                let mut total = 0;
                for (i, embed) in c.list(embeds, MAX_EMBEDS)?.iter().enumerate() {
                    total += c.at(i, |c| c.embed(embed))?;
                }
                if total > MAX_EMBED_TOTAL {
                    c.fail(
                        "MAX_EMBED_SIZE_EXCEEDED",
                        format!("Embed size exceeds maximum size of {MAX_EMBED_TOTAL}"),
                    )?;
                }
                Ok(())
            })?;
        }
        if let Some(mentions) = body.get("allowed_mentions").filter(|v| !v.is_null()) {
            self.at("allowed_mentions", |c| {
                let mentions = c.object(mentions)?;
                if let Some(parse) = mentions.get("parse") {
                    c.at("parse", |c| {
                        for (i, kind) in c.list(parse, 3)?.iter().enumerate() {
                            c.at(i, |c| match kind.as_str() {
                                Some("roles" | "users" | "everyone") => Ok(()),
                                _ => c.fail(
                                    "ENUM_TYPE_COERCE",
                                    format!("Value \"{kind}\" is not a valid enum value."),
                                ),
                            })?;
                        }
                        Ok(())
                    })?;
                }
                for list in ["users", "roles"] {
                    if let Some(ids) = mentions.get(list) {
                        c.at(list, |c| c.list(ids, 100).map(|_| ()))?;
                    }
                }
                if let Some(replied) = mentions.get("replied_user").filter(|v| !v.is_null()) {
                    c.at("replied_user", |c| c.boolean(replied))?;
                }
                Ok(())
            })?;
        }
        if let Some(stickers) = body.get("sticker_ids").filter(|v| !v.is_null()) {
            self.at("sticker_ids", |c| {
                c.list(stickers, MAX_STICKERS).map(|_| ())
            })?;
        }
        for list in ["components", "attachments"] {
            if let Some(items) = body.get(list).filter(|v| !v.is_null()) {
                self.at(list, |c| c.list(items, usize::MAX).map(|_| ()))?;
            }
        }
        if let Some(reference) = body.get("message_reference").filter(|v| !v.is_null()) {
            self.at("message_reference", |c| {
                let reference = c.object(reference)?;
                if let Some(flag) = reference.get("fail_if_not_exists").filter(|v| !v.is_null()) {
                    c.at("fail_if_not_exists", |c| c.boolean(flag))?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }
}

/// Checks a message body for create (`creating`) or edit; `Err` is the 400.
pub(crate) fn check(body: &Value, creating: bool) -> Result<(), Response> {
    let Some(body) = body.as_object() else {
        return Ok(()); // an empty or non-object body is answered elsewhere
    };
    Checker { path: Vec::new() }
        .body(body, creating)
        .map_err(Problem::response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(body: Value) -> Value {
        let response = check(&body, true).expect_err("refused");
        assert_eq!(response.status, 400);
        let json: Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(json["code"], 50035);
        json["errors"].clone()
    }

    #[test]
    fn the_path_names_the_field() {
        let e = errors(json!({"embeds": [{"title": "ok"}, {"title": {"a": 1}}]}));
        assert_eq!(
            e["embeds"]["1"]["title"]["_errors"][0]["code"],
            "STRING_TYPE_CONVERT"
        );
        let e = errors(json!({"embeds": [{"fields": [{"name": "n"}]}]}));
        assert_eq!(
            e["embeds"]["0"]["fields"]["0"]["value"]["_errors"][0]["code"],
            "BASE_TYPE_REQUIRED"
        );
        let e = errors(json!({"embeds": [{"title": "x".repeat(257)}]}));
        assert_eq!(
            e["embeds"]["0"]["title"]["_errors"][0]["code"],
            "BASE_TYPE_MAX_LENGTH"
        );
        let e = errors(json!({"embeds": (0..11).map(|_| json!({})).collect::<Vec<_>>()}));
        assert_eq!(e["embeds"]["_errors"][0]["code"], "BASE_TYPE_MAX_LENGTH");
        let e = errors(json!({"embeds": "nope"}));
        assert_eq!(e["embeds"]["_errors"][0]["code"], "LIST_TYPE_CONVERT");
        let e = errors(
            json!({"embeds": [{"description": "d".repeat(4000)}, {"description": "d".repeat(4000)}]}),
        );
        assert_eq!(e["embeds"]["_errors"][0]["code"], "MAX_EMBED_SIZE_EXCEEDED");
        let e = errors(json!({"flags": 2}));
        assert_eq!(e["flags"]["_errors"][0]["code"], "MESSAGE_FLAGS_INVALID");
        let e = errors(json!({"tts": "yes"}));
        assert_eq!(e["tts"]["_errors"][0]["code"], "BOOLEAN_TYPE_CONVERT");
        let e = errors(json!({"allowed_mentions": {"parse": ["people"]}}));
        assert_eq!(
            e["allowed_mentions"]["parse"]["0"]["_errors"][0]["code"],
            "ENUM_TYPE_COERCE"
        );
    }

    #[test]
    fn what_clients_send_passes() {
        for body in [
            json!({"content": "hi", "tts": false, "flags": 4096 | 4}),
            json!({"flags": 8192, "attachments": [{"id": 0}]}),
            json!({"embeds": [{"title": "t", "description": "d", "color": 0xff0000,
                               "fields": [{"name": "n", "value": "v", "inline": true}],
                               "footer": {"text": "f"}, "author": {"name": "a"}}],
                   "allowed_mentions": {"parse": [], "replied_user": false},
                   "message_reference": {"message_id": "1", "fail_if_not_exists": false}}),
        ] {
            assert!(check(&body, true).is_ok(), "{body}");
        }
        // On edit, flags are not the create set.
        assert!(check(&json!({"flags": 2}), false).is_ok());
    }
}
