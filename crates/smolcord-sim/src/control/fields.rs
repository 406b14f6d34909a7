//! The control API's request bodies: a JSON object, and its fields read
//! with a 400 naming the field when one is missing or of the wrong type.

use crate::wire::http::{Request, Response};
use serde_json::{json, Value};

pub(crate) fn bad(message: impl Into<String>) -> Response {
    Response::json(400, &json!({"error": message.into()}))
}

pub(crate) fn body(request: &Request) -> Result<Value, Response> {
    if request.body.is_empty() {
        return Err(bad("a JSON body is required"));
    }
    let value: Value = serde_json::from_slice(&request.body)
        .map_err(|err| bad(format!("the body is not JSON: {err}")))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(bad("the body must be a JSON object"))
    }
}

pub(crate) fn id_field(body: &Value, name: &str) -> Result<u64, Response> {
    match body.get(name) {
        None => Err(bad(format!("missing field `{name}`"))),
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| bad(format!("field `{name}` must be a Discord id"))),
        Some(Value::String(s)) => s
            .parse()
            .map_err(|_| bad(format!("field `{name}` must be a Discord id"))),
        Some(_) => Err(bad(format!("field `{name}` must be a Discord id"))),
    }
}

pub(crate) fn str_field<'a>(
    body: &'a Value,
    name: &str,
    default: &'a str,
) -> Result<&'a str, Response> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(bad(format!("field `{name}` must be a string"))),
    }
}

pub(crate) fn bool_field(body: &Value, name: &str, default: bool) -> Result<bool, Response> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad(format!("field `{name}` must be true or false"))),
    }
}
