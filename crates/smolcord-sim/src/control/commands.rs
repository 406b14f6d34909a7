//! A user's use of a registered command (INTERACTION_CREATE in their DM
//! with the bot), its replay, and what the bot answered: the calls behind
//! [`crate::Simulator::use_command`] and its kin.

use crate::model::objects;
use crate::model::sim_error::SimError;
use crate::state::interactions::{InteractionAnswer, Pending, UsedCommand, INTERACTIONS_KEPT};
use crate::state::shared::Shared;
use serde_json::{json, Value};
use smolcord::protocol::Snowflake;
use std::time::{Duration, Instant};

impl Shared {
    /// Dispatches the use of the registered command `name` by a user in
    /// their DM with the bot.
    pub(crate) fn use_command(
        &self,
        user_id: u64,
        user_name: &str,
        name: &str,
        options: &[(&str, &str)],
    ) -> Result<UsedCommand, SimError> {
        let mut state = self.lock();
        let state = &mut *state;
        let Some(command) = state.interactions.commands.get(name) else {
            return Err(SimError::UnknownCommand(name.to_owned()));
        };
        // Discord's client offers a command only where its contexts allow
        // (none given: the default, guilds and the bot's DM).
        let in_dm = command["contexts"]
            .as_array()
            .is_none_or(|list| list.iter().any(|c| c.as_u64() == Some(1)));
        if !in_dm {
            return Err(SimError::UnknownCommand(name.to_owned()));
        }
        let declared: Vec<&str> = command["options"]
            .as_array()
            .map(|list| list.iter().filter_map(|o| o["name"].as_str()).collect())
            .unwrap_or_default();
        if let Some((unknown, _)) = options.iter().find(|(n, _)| !declared.contains(n)) {
            return Err(SimError::UnknownCommand(format!("{name} {unknown}:")));
        }
        let command_id = command["id"].clone();
        let channel = state.dir.dm_channel(&mut state.ids, user_id, user_name);
        let id = state.ids.next();
        let token = format!(
            "aW50ZXJhY3Rpb246{id}.sim-{:x}",
            id.wrapping_mul(0x9e37_79b9)
        );
        let payload = json!({
            "id": id.to_string(),
            "application_id": self.config.bot_id.to_string(),
            "type": 2,
            "token": token,
            "version": 1,
            "channel_id": channel.to_string(),
            "channel": {"id": channel.to_string(), "type": 1},
            "user": objects::user(user_id, user_name),
            "context": 1,
            "locale": "en-US",
            "entitlements": [],
            "data": {
                "id": command_id, "name": name, "type": 1,
                "options": options.iter()
                    .map(|(n, v)| json!({"name": n, "type": 3, "value": v}))
                    .collect::<Vec<_>>(),
            },
        });
        let book = &mut state.interactions;
        if book.pending.len() == INTERACTIONS_KEPT {
            book.pending.pop_front();
        }
        book.pending.push_back(Pending {
            id,
            token,
            used: Instant::now(),
            payload: payload.clone(),
            answer: None,
            late: false,
        });
        state.dispatch(&self.config, "INTERACTION_CREATE", &payload);
        Ok(UsedCommand {
            interaction_id: Snowflake::new(id),
            channel_id: Snowflake::new(channel),
        })
    }

    /// Dispatches a known interaction's INTERACTION_CREATE again, as a
    /// resume replays what the session had not acknowledged.
    pub(crate) fn replay_interaction(&self, id: Snowflake) -> Result<Vec<u64>, SimError> {
        let mut state = self.lock();
        let payload = state
            .interactions
            .pending
            .iter()
            .find(|p| p.id == id.get())
            .map(|p| p.payload.clone())
            .ok_or(SimError::UnknownInteraction(id))?;
        Ok(state.dispatch(&self.config, "INTERACTION_CREATE", &payload))
    }

    pub(crate) fn interaction_answer(&self, id: Snowflake) -> Option<InteractionAnswer> {
        let state = self.lock();
        let pending = state
            .interactions
            .pending
            .iter()
            .find(|p| p.id == id.get())?;
        pending.answer.clone()
    }

    /// Whether the bot answered the interaction after its deadline.
    pub(crate) fn interaction_late(&self, id: Snowflake) -> bool {
        let state = self.lock();
        let pending = state.interactions.pending.iter().find(|p| p.id == id.get());
        pending.is_some_and(|p| p.late)
    }

    pub(crate) fn registered_commands(&self) -> (Vec<Value>, u64) {
        let state = self.lock();
        let book = &state.interactions.commands;
        (book.commands.clone(), book.overwrites)
    }

    pub(crate) fn set_interaction_deadlines(&self, answer: Duration, token: Duration) {
        let mut state = self.lock();
        state.interactions.deadline = answer;
        state.interactions.lifetime = token;
    }
}
