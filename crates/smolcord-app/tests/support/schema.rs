//! The documented JSON schemas (`docs/*.schema.json`) and a validator for
//! them: a small hand-written subset of JSON Schema (the keywords the files
//! use); a keyword it does not know fails the test rather than being
//! skipped, so a schema never claims more than is checked.

use serde_json::Value;

/// `docs/NAME`, parsed.
pub fn load(name: &str) -> Value {
    let path = smolcord_testkit::repo_root().join("docs").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("docs/{name}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("docs/{name} is not JSON: {e}"))
}

/// The errors of `value` against `schema` (empty when it conforms).
pub fn validate(root: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(root, root, value, "$", &mut errors);
    errors
}

fn check(root: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        panic!("schema at {at} is not an object");
    };
    for (keyword, rule) in schema {
        match keyword.as_str() {
            "$schema" | "title" | "description" | "$defs" => {}
            "$ref" => {
                let name = rule
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .unwrap_or_else(|| panic!("unsupported $ref {rule} at {at}"));
                let target = &root["$defs"][name];
                assert!(!target.is_null(), "$ref to a missing definition {name}");
                check(root, target, value, at, errors);
            }
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::String(one) => vec![one.as_str()],
                    Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("bad type rule at {at}"),
                };
                if !types.iter().any(|t| is_type(value, t)) {
                    errors.push(format!("{at}: {value} is not of type {types:?}"));
                }
            }
            "enum" => {
                if !rule
                    .as_array()
                    .is_some_and(|options| options.contains(value))
                {
                    errors.push(format!("{at}: {value} is not one of {rule}"));
                }
            }
            "anyOf" => {
                let options = rule.as_array().expect("anyOf is a list");
                let fits = options.iter().any(|option| {
                    let mut sub = Vec::new();
                    check(root, option, value, at, &mut sub);
                    sub.is_empty()
                });
                if !fits {
                    errors.push(format!("{at}: {value} matches none of anyOf"));
                }
            }
            "required" => {
                if let Some(object) = value.as_object() {
                    for name in rule.as_array().expect("required is a list") {
                        let name = name.as_str().expect("required names are strings");
                        if !object.contains_key(name) {
                            errors.push(format!("{at}: missing required field `{name}`"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(object) = value.as_object() {
                    for (name, sub) in rule.as_object().expect("properties is an object") {
                        if let Some(field) = object.get(name) {
                            check(root, sub, field, &format!("{at}.{name}"), errors);
                        }
                    }
                }
            }
            "additionalProperties" => {
                let Some(object) = value.as_object() else {
                    continue;
                };
                let known = schema.get("properties").and_then(Value::as_object);
                for (name, field) in object {
                    if known.is_some_and(|k| k.contains_key(name)) {
                        continue;
                    }
                    match rule {
                        Value::Bool(false) => {
                            errors.push(format!("{at}: field `{name}` is not documented"))
                        }
                        Value::Bool(true) => {}
                        sub => check(root, sub, field, &format!("{at}.{name}"), errors),
                    }
                }
            }
            "items" => {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    check(root, rule, item, &format!("{at}[{i}]"), errors);
                }
            }
            "minItems" | "maxItems" => {
                if let Some(items) = value.as_array() {
                    let bound = rule.as_u64().expect("an item bound") as usize;
                    let ok = if keyword == "minItems" {
                        items.len() >= bound
                    } else {
                        items.len() <= bound
                    };
                    if !ok {
                        errors.push(format!(
                            "{at}: {} items breaks {keyword} {bound}",
                            items.len()
                        ));
                    }
                }
            }
            "minLength" => {
                if let Some(text) = value.as_str() {
                    let bound = rule.as_u64().expect("a length bound") as usize;
                    if text.chars().count() < bound {
                        errors.push(format!("{at}: {value} is shorter than {bound}"));
                    }
                }
            }
            "minimum" | "maximum" => {
                if let (Some(n), Some(bound)) = (value.as_f64(), rule.as_f64()) {
                    let ok = if keyword == "minimum" {
                        n >= bound
                    } else {
                        n <= bound
                    };
                    if !ok {
                        errors.push(format!("{at}: {n} breaks {keyword} {bound}"));
                    }
                }
            }
            other => panic!("the test's validator does not know the keyword `{other}` (at {at})"),
        }
    }
}

fn is_type(value: &Value, name: &str) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_u64() || value.is_i64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        other => panic!("unknown type {other}"),
    }
}
