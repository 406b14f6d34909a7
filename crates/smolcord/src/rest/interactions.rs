//! Application (slash) commands: registering them, and answering their
//! uses (an INTERACTION_CREATE, [`crate::protocol::Interaction`]).
//!
//! Discord's rules, which shape the calls: the first answer to an
//! interaction ([`RestClient::create_interaction_response`]) must come
//! within 3 s of its use, and only one is taken (a second is 400 40060
//! "already acknowledged"; a late one 404 10062 "Unknown interaction"); a
//! [`InteractionResponse::Deferred`] answer shows "thinking…" and buys 15
//! minutes, in which [`RestClient::edit_original_response`] sets the text.
//! Both are authorised by the interaction's token in the path, not the bot
//! token, and are outside the bot's global rate limit.
//!
//! ```no_run
//! # smol::block_on(async {
//! use smolcord::protocol::Snowflake;
//! use smolcord::rest::{ApplicationCommand, CommandOption, RestClient};
//! # let rest = RestClient::new("http://127.0.0.1:1/api/v10", smolcord::token::Token::new("t").unwrap());
//! let approve = ApplicationCommand::new("approve", "Approve a pairing code")
//!     .option(CommandOption::string("code", "The code the user was given", 32))
//!     .only_in_bot_dm();
//! rest.set_global_commands(Snowflake::new(1), &[approve]).await?;
//! # Ok::<(), smolcord::rest::RestError>(())
//! # });
//! ```

use super::client::RestClient;
use super::error::RestError;
use super::exchange::Body;
use super::route::Route;
use crate::protocol::{
    InteractionToken, Message, ReadyApplication, Snowflake, MESSAGE_FLAG_EPHEMERAL,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Context BOT_DM (1): the command can be used in a DM with the bot.
pub const CONTEXT_BOT_DM: u8 = 1;
/// Option type STRING.
pub const OPTION_STRING: u8 = 3;

/// A slash command to register (type 1, CHAT_INPUT).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ApplicationCommand {
    /// 1–32 lower-case characters (Discord's rule).
    pub name: String,
    /// 1–100 characters.
    pub description: String,
    /// Its options, required ones first (Discord's rule).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<CommandOption>,
    /// Where it can be used (0 guild, 1 the bot's DM, 2 private
    /// channels); `None` leaves Discord's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contexts: Option<Vec<u8>>,
}

impl ApplicationCommand {
    /// A command without options, usable where Discord's default allows.
    pub fn new(name: &str, description: &str) -> ApplicationCommand {
        ApplicationCommand {
            name: name.to_owned(),
            description: description.to_owned(),
            options: Vec::new(),
            contexts: None,
        }
    }

    /// The same, with one more option.
    pub fn option(mut self, option: CommandOption) -> ApplicationCommand {
        self.options.push(option);
        self
    }

    /// The same, usable only in a DM with the bot (`contexts: [1]`): not
    /// offered to anyone in a server.
    pub fn only_in_bot_dm(mut self) -> ApplicationCommand {
        self.contexts = Some(vec![CONTEXT_BOT_DM]);
        self
    }
}

/// An option of a [`ApplicationCommand`].
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommandOption {
    /// Option type ([`OPTION_STRING`], …).
    #[serde(rename = "type")]
    pub kind: u8,
    /// 1–32 lower-case characters.
    pub name: String,
    /// 1–100 characters.
    pub description: String,
    /// Whether the user must give it.
    pub required: bool,
    /// For a string: its longest value (Discord enforces it in the client).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u16>,
}

impl CommandOption {
    /// A required string option of at most `max_length` characters.
    pub fn string(name: &str, description: &str, max_length: u16) -> CommandOption {
        CommandOption {
            kind: OPTION_STRING,
            name: name.to_owned(),
            description: description.to_owned(),
            required: true,
            max_length: Some(max_length),
        }
    }
}

/// A command as Discord registered it.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct RegisteredCommand {
    /// Its id.
    pub id: Snowflake,
    /// Its name.
    pub name: String,
}

/// The first answer to an interaction.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InteractionResponse {
    /// Type 4 CHANNEL_MESSAGE_WITH_SOURCE: the answer itself.
    Message {
        /// Its text (at most 2 000 characters).
        content: String,
        /// Only the user who used the command sees it (flag 64).
        ephemeral: bool,
    },
    /// Type 5 DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE: "thinking…"; the text
    /// follows with [`RestClient::edit_original_response`].
    Deferred {
        /// The answer, when it comes, is seen only by the user.
        ephemeral: bool,
    },
}

impl InteractionResponse {
    fn body(&self) -> serde_json::Value {
        let flags = |ephemeral: bool| if ephemeral { MESSAGE_FLAG_EPHEMERAL } else { 0 };
        match self {
            // Nobody is pinged by what a command answers.
            InteractionResponse::Message { content, ephemeral } => json!({
                "type": 4,
                "data": {"content": content, "flags": flags(*ephemeral),
                         "allowed_mentions": {"parse": []}},
            }),
            InteractionResponse::Deferred { ephemeral } => json!({
                "type": 5,
                "data": {"flags": flags(*ephemeral)},
            }),
        }
    }
}

impl RestClient {
    /// `PUT /applications/{id}/commands`: makes `commands` the
    /// application's global commands (a bulk overwrite: one request, the
    /// same list twice changes nothing, and it does not count against the
    /// daily command-creation limit for commands that exist already).
    pub async fn set_global_commands(
        &self,
        application_id: Snowflake,
        commands: &[ApplicationCommand],
    ) -> Result<Vec<RegisteredCommand>, RestError> {
        let route = Route::SetGlobalCommands { application_id };
        let body = serde_json::to_value(commands).map_err(|e| RestError::InvalidInput {
            route: route.to_string(),
            detail: e.to_string(),
        })?;
        self.call(route, None, Some(body)).await
    }

    /// `GET /oauth2/applications/@me`: the bot's application (its id
    /// registers commands; READY names it too, a resume does not).
    pub async fn current_application(&self) -> Result<ReadyApplication, RestError> {
        self.call(Route::CurrentApplication, None, None).await
    }

    /// `POST /interactions/{id}/{token}/callback`: the interaction's one
    /// first answer. Not sent again after a timeout (a second answer is
    /// refused).
    pub async fn create_interaction_response(
        &self,
        interaction_id: Snowflake,
        token: &InteractionToken,
        response: &InteractionResponse,
    ) -> Result<(), RestError> {
        let route = Route::CreateInteractionResponse {
            interaction_id,
            token: token.clone(),
        };
        // Discord answers 204 No Content: nothing to decode.
        let body = Body::json(response.body().to_string().into_bytes());
        self.send(&route, None, Some(body)).await.map(drop)
    }

    /// `PATCH /webhooks/{application_id}/{token}/messages/@original`: sets
    /// the text of the interaction's answer (within 15 minutes of it).
    pub async fn edit_original_response(
        &self,
        application_id: Snowflake,
        token: &InteractionToken,
        content: &str,
    ) -> Result<Message, RestError> {
        let route = Route::EditOriginalResponse {
            application_id,
            token: token.clone(),
        };
        let body = json!({"content": content, "allowed_mentions": {"parse": []}});
        self.call(route, None, Some(body)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_serializes_as_discord_documents_it() {
        let spec = ApplicationCommand::new("approve", "Approve a code")
            .option(CommandOption::string("code", "The code", 32))
            .only_in_bot_dm();
        assert_eq!(
            serde_json::to_value([spec]).unwrap(),
            json!([{"name": "approve", "description": "Approve a code", "contexts": [1],
                    "options": [{"type": 3, "name": "code", "description": "The code",
                                 "required": true, "max_length": 32}]}])
        );
        assert_eq!(
            serde_json::to_value([ApplicationCommand::new("status", "Status")]).unwrap(),
            json!([{"name": "status", "description": "Status"}])
        );
    }

    #[test]
    fn answers_are_ephemeral_by_flag_64() {
        let deferred = InteractionResponse::Deferred { ephemeral: true }.body();
        assert_eq!(deferred, json!({"type": 5, "data": {"flags": 64}}));
        let message = InteractionResponse::Message {
            content: "hi".into(),
            ephemeral: true,
        }
        .body();
        assert_eq!(message["type"], 4);
        assert_eq!(message["data"]["flags"], 64);
    }
}
