//! The application's global commands: `PUT /applications/{id}/commands`
//! (Discord's bulk overwrite), checked as Discord documents them, and the
//! list a user's client offers ([`crate::Simulator::use_command`] uses
//! only what is registered, as Discord's client does).
//!
//! Checked, each a 400 50035 naming the field (`0.name`, `1.options.0.type`):
//! a JSON array of at most 100 commands; a name of 1–32 lower-case
//! letters, digits, `-` or `_`, unique; a description of 1–100
//! characters; at most 25 options, each with a name and description by
//! the same rules and a type 1–11; `contexts` within 0–2. A command
//! keeps its id across overwrites while its name stays (Discord's
//! "updated, not re-created"), and its `version` while it is unchanged.

use serde_json::{json, Value};

/// Global chat-input commands an application may have (Discord's cap).
pub(crate) const MAX_COMMANDS: usize = 100;
/// Options a command may have (Discord's cap).
const MAX_OPTIONS: usize = 25;

/// What is registered.
#[derive(Default)]
pub(crate) struct CommandBook {
    /// The commands as Discord returns them (with `id`, `application_id`).
    pub(crate) commands: Vec<Value>,
    /// Bulk overwrites taken.
    pub(crate) overwrites: u64,
}

impl CommandBook {
    /// The registered command `name`, if any.
    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        self.commands.iter().find(|c| c["name"] == name)
    }

    /// Replaces the list with `body` (ids from `next_id` for new names),
    /// or says which field Discord would refuse.
    pub(crate) fn overwrite(
        &mut self,
        application_id: u64,
        body: Option<&Value>,
        mut next_id: impl FnMut() -> u64,
    ) -> Result<Vec<Value>, (String, String)> {
        let Some(Value::Array(list)) = body else {
            return Err(("_errors".into(), "a JSON array of commands".into()));
        };
        if list.len() > MAX_COMMANDS {
            return Err(("_errors".into(), format!("at most {MAX_COMMANDS} commands")));
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut taken = Vec::with_capacity(list.len());
        for (i, command) in list.iter().enumerate() {
            check_command(command).map_err(|(field, why)| (format!("{i}.{field}"), why))?;
            let name = command["name"].as_str().unwrap_or_default().to_owned();
            if !seen.insert(name.clone()) {
                return Err((
                    format!("{i}.name"),
                    "Application command names must be unique".into(),
                ));
            }
            let mut stored = command.clone();
            stored["application_id"] = json!(application_id.to_string());
            stored["type"] = json!(command.get("type").cloned().unwrap_or(json!(1)));
            // Same name: same id; the version changes only with the command.
            let old = self.get(&name).cloned();
            let same = |old: &Value| {
                let mut old = old.clone();
                if let Some(map) = old.as_object_mut() {
                    map.remove("id");
                    map.remove("version");
                    // A guild's commands carry their guild (set after).
                    map.remove("guild_id");
                }
                old == stored
            };
            let (id, version) = match &old {
                Some(old) if same(old) => (old["id"].clone(), old["version"].clone()),
                Some(old) => (old["id"].clone(), json!(next_id().to_string())),
                None => (json!(next_id().to_string()), json!(next_id().to_string())),
            };
            stored["id"] = id;
            stored["version"] = version;
            taken.push(stored);
        }
        self.commands = taken.clone();
        self.overwrites += 1;
        Ok(taken)
    }
}

fn check_name(value: Option<&Value>) -> Result<(), String> {
    let name = value.and_then(Value::as_str).unwrap_or_default();
    let fine = (1..=32).contains(&name.chars().count())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if fine {
        Ok(())
    } else {
        Err("1 to 32 lower-case letters, digits, - or _".into())
    }
}

fn check_description(value: Option<&Value>) -> Result<(), String> {
    let text = value.and_then(Value::as_str).unwrap_or_default();
    if (1..=100).contains(&text.chars().count()) {
        Ok(())
    } else {
        Err("Must be between 1 and 100 in length.".into())
    }
}

fn check_command(command: &Value) -> Result<(), (String, String)> {
    let at = |field: &'static str| move |why: String| (field.to_owned(), why);
    check_name(command.get("name")).map_err(at("name"))?;
    check_description(command.get("description")).map_err(at("description"))?;
    if let Some(contexts) = command.get("contexts").filter(|c| !c.is_null()) {
        let fine = contexts
            .as_array()
            .is_some_and(|list| list.iter().all(|c| c.as_u64().is_some_and(|c| c <= 2)));
        if !fine {
            return Err(("contexts".into(), "a list of 0, 1 or 2".into()));
        }
    }
    let options = match command.get("options") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Array(options)) => options,
        Some(_) => return Err(("options".into(), "a list of options".into())),
    };
    if options.len() > MAX_OPTIONS {
        return Err(("options".into(), format!("at most {MAX_OPTIONS} options")));
    }
    for (i, option) in options.iter().enumerate() {
        let at = |field: &str| {
            let field = format!("options.{i}.{field}");
            move |why: String| (field, why)
        };
        check_name(option.get("name")).map_err(at("name"))?;
        check_description(option.get("description")).map_err(at("description"))?;
        if !option["type"]
            .as_u64()
            .is_some_and(|t| (1..=11).contains(&t))
        {
            return Err(at("type")("an option type 1 to 11".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> impl FnMut() -> u64 {
        let mut n = 100;
        move || {
            n += 1;
            n
        }
    }

    #[test]
    fn an_overwrite_replaces_the_list_and_keeps_ids_by_name() {
        let mut book = CommandBook::default();
        let mut next = ids();
        let first = book
            .overwrite(
                7,
                Some(&json!([{"name": "status", "description": "Status"}])),
                &mut next,
            )
            .unwrap();
        let again = book
            .overwrite(
                7,
                Some(&json!([{"name": "status", "description": "Status"},
                             {"name": "restart", "description": "Restart"}])),
                &mut next,
            )
            .unwrap();
        assert_eq!(first[0]["id"], again[0]["id"]);
        assert_eq!(first[0]["version"], again[0]["version"], "unchanged");
        assert_eq!(book.commands.len(), 2);
        assert!(book.get("restart").is_some());
    }

    #[test]
    fn what_discord_refuses_names_the_field() {
        let mut book = CommandBook::default();
        for (body, field) in [
            (json!({"name": "x"}), "_errors"),
            (json!([{"name": "Status", "description": "d"}]), "0.name"),
            (json!([{"name": "s", "description": ""}]), "0.description"),
            (
                json!([{"name": "s", "description": "d"}, {"name": "s", "description": "d"}]),
                "1.name",
            ),
            (
                json!([{"name": "s", "description": "d", "contexts": [7]}]),
                "0.contexts",
            ),
            (
                json!([{"name": "s", "description": "d",
                        "options": [{"name": "c", "description": "d", "type": 99}]}]),
                "0.options.0.type",
            ),
        ] {
            let refused = book.overwrite(7, Some(&body), ids()).unwrap_err();
            assert_eq!(refused.0, field, "{body}");
        }
        assert!(
            book.commands.is_empty(),
            "a refused overwrite changes nothing"
        );
    }
}
