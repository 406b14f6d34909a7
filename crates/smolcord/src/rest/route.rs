//! The REST vocabulary: every route smolcord speaks, as one table that the
//! client sends by and the simulator serves by (`smolcord-sim` parses each
//! request with [`Route::parse`]), so the two cannot drift apart.
//!
//! A route knows its method, its path template (what errors and rate-limit
//! buckets are named by), its major parameter (Discord's "top-level
//! resource": a channel's or guild's id, which splits a bucket per
//! resource) and whether sending it twice acts once (a request that timed
//! out may have taken effect; only such routes are sent again).
//!
//! ```
//! use smolcord::protocol::Snowflake;
//! use smolcord::rest::{Method, Route};
//! let channel = Snowflake::new(41);
//! let route = Route::CreateMessage { channel_id: channel };
//! assert_eq!(route.path(), "/channels/41/messages");
//! assert_eq!(route.to_string(), "POST /channels/{channel_id}/messages");
//! assert_eq!(Route::parse(Method::Post, "/channels/41/messages"), Ok(route));
//! ```

use super::emoji::Emoji;
use crate::protocol::{InteractionToken, Snowflake};
use std::fmt;

/// An HTTP method of a [`Route`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `PATCH`.
    Patch,
    /// `PUT`.
    Put,
    /// `DELETE`.
    Delete,
}

impl Method {
    /// The method as it goes on the request line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Patch => "PATCH",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }

    /// The method of a request line (case-sensitive, as HTTP says), if it
    /// is one a route uses.
    pub fn parse(text: &str) -> Option<Method> {
        Some(match text {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PATCH" => Method::Patch,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            _ => return None,
        })
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One Discord REST route with its ids. Paths are relative to the API base
/// (`https://discord.com/api/v10`); a query string is not part of a route.
/// Not `Copy`: the interaction routes carry their token (whose `Debug` is
/// redacted; [`Route::path`] is the one place it is written out).
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// `GET /gateway`: the gateway URL (no token needed).
    Gateway,
    /// `GET /gateway/bot`: gateway URL, shard count, identify budget.
    GatewayBot,
    /// `GET /users/@me`: the bot's own user.
    CurrentUser,
    /// `GET /oauth2/applications/@me`: the bot's application.
    CurrentApplication,
    /// `POST /users/@me/channels`: opens (or returns) a DM channel.
    CreateDm,
    /// `GET /channels/{channel_id}`.
    GetChannel {
        /// The channel.
        channel_id: Snowflake,
    },
    /// `POST /channels/{channel_id}/typing`.
    TriggerTyping {
        /// The channel.
        channel_id: Snowflake,
    },
    /// `GET /channels/{channel_id}/messages` (before/after/around/limit in
    /// the query).
    GetMessages {
        /// The channel.
        channel_id: Snowflake,
    },
    /// `POST /channels/{channel_id}/messages`.
    CreateMessage {
        /// The channel.
        channel_id: Snowflake,
    },
    /// `GET /channels/{channel_id}/messages/{message_id}`.
    GetMessage {
        /// The channel.
        channel_id: Snowflake,
        /// The message.
        message_id: Snowflake,
    },
    /// `PATCH /channels/{channel_id}/messages/{message_id}`.
    EditMessage {
        /// The channel.
        channel_id: Snowflake,
        /// The message.
        message_id: Snowflake,
    },
    /// `PUT /channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me`:
    /// the bot reacts to a message.
    CreateReaction {
        /// The channel.
        channel_id: Snowflake,
        /// The message.
        message_id: Snowflake,
        /// The reaction.
        emoji: Emoji,
    },
    /// `POST /channels/{channel_id}/messages/{message_id}/threads`: a
    /// public thread started from a message (its id is the message's).
    StartThreadFromMessage {
        /// The channel.
        channel_id: Snowflake,
        /// The message the thread starts from.
        message_id: Snowflake,
    },
    /// `PUT /applications/{application_id}/commands`: replaces the
    /// application's global commands with the list sent (Discord's bulk
    /// overwrite: commands not listed are deleted, unchanged ones kept).
    SetGlobalCommands {
        /// The application.
        application_id: Snowflake,
    },
    /// `GET /applications/{application_id}/guilds/{guild_id}/commands`:
    /// the application's commands in one guild (not its global ones).
    GetGuildCommands {
        /// The application.
        application_id: Snowflake,
        /// The guild.
        guild_id: Snowflake,
    },
    /// `PUT /applications/{application_id}/guilds/{guild_id}/commands`:
    /// replaces the application's commands in one guild with the list sent
    /// (the bulk overwrite, as for the global ones).
    SetGuildCommands {
        /// The application.
        application_id: Snowflake,
        /// The guild.
        guild_id: Snowflake,
    },
    /// `POST /interactions/{interaction_id}/{interaction_token}/callback`:
    /// the one initial answer to an interaction, within 3 s of its use.
    CreateInteractionResponse {
        /// The interaction.
        interaction_id: Snowflake,
        /// Its token (authorises the request instead of the bot token).
        token: InteractionToken,
    },
    /// `PATCH /webhooks/{application_id}/{interaction_token}/messages/@original`:
    /// edits the answer (a deferred one's, or the initial message), for 15
    /// minutes after the interaction.
    EditOriginalResponse {
        /// The application (the interaction's webhook).
        application_id: Snowflake,
        /// The interaction's token.
        token: InteractionToken,
    },
}

/// Why [`Route::parse`] matched nothing.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unmatched {
    /// No route has this path (Discord: 404).
    NotFound,
    /// A route has this path, but not with this method (Discord: 405).
    MethodNotAllowed,
}

impl fmt::Display for Unmatched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unmatched::NotFound => "no such route",
            Unmatched::MethodNotAllowed => "the route does not take this method",
        })
    }
}

impl std::error::Error for Unmatched {}

impl Route {
    /// The HTTP method.
    pub const fn method(&self) -> Method {
        match self {
            Route::Gateway
            | Route::GatewayBot
            | Route::CurrentUser
            | Route::CurrentApplication
            | Route::GetChannel { .. }
            | Route::GetMessages { .. }
            | Route::GetMessage { .. }
            | Route::GetGuildCommands { .. } => Method::Get,
            Route::CreateDm
            | Route::TriggerTyping { .. }
            | Route::CreateMessage { .. }
            | Route::StartThreadFromMessage { .. }
            | Route::CreateInteractionResponse { .. } => Method::Post,
            Route::EditMessage { .. } | Route::EditOriginalResponse { .. } => Method::Patch,
            Route::CreateReaction { .. }
            | Route::SetGlobalCommands { .. }
            | Route::SetGuildCommands { .. } => Method::Put,
        }
    }

    /// The path template, ids named: what errors, logs and rate-limit
    /// buckets call the route.
    pub const fn template(&self) -> &'static str {
        match self {
            Route::Gateway => "/gateway",
            Route::GatewayBot => "/gateway/bot",
            Route::CurrentUser => "/users/@me",
            Route::CurrentApplication => "/oauth2/applications/@me",
            Route::CreateDm => "/users/@me/channels",
            Route::GetChannel { .. } => "/channels/{channel_id}",
            Route::TriggerTyping { .. } => "/channels/{channel_id}/typing",
            Route::GetMessages { .. } | Route::CreateMessage { .. } => {
                "/channels/{channel_id}/messages"
            }
            Route::GetMessage { .. } | Route::EditMessage { .. } => {
                "/channels/{channel_id}/messages/{message_id}"
            }
            Route::StartThreadFromMessage { .. } => {
                "/channels/{channel_id}/messages/{message_id}/threads"
            }
            Route::CreateReaction { .. } => {
                "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"
            }
            Route::SetGlobalCommands { .. } => "/applications/{application_id}/commands",
            Route::GetGuildCommands { .. } | Route::SetGuildCommands { .. } => {
                "/applications/{application_id}/guilds/{guild_id}/commands"
            }
            Route::CreateInteractionResponse { .. } => {
                "/interactions/{interaction_id}/{interaction_token}/callback"
            }
            Route::EditOriginalResponse { .. } => {
                "/webhooks/{application_id}/{interaction_token}/messages/@original"
            }
        }
    }

    /// The concrete path, ids filled in.
    pub fn path(&self) -> String {
        match self {
            Route::Gateway
            | Route::GatewayBot
            | Route::CurrentUser
            | Route::CurrentApplication
            | Route::CreateDm => self.template().to_owned(),
            Route::GetChannel { channel_id } => format!("/channels/{channel_id}"),
            Route::TriggerTyping { channel_id } => format!("/channels/{channel_id}/typing"),
            Route::GetMessages { channel_id } | Route::CreateMessage { channel_id } => {
                format!("/channels/{channel_id}/messages")
            }
            Route::GetMessage {
                channel_id,
                message_id,
            }
            | Route::EditMessage {
                channel_id,
                message_id,
            } => format!("/channels/{channel_id}/messages/{message_id}"),
            Route::StartThreadFromMessage {
                channel_id,
                message_id,
            } => format!("/channels/{channel_id}/messages/{message_id}/threads"),
            Route::CreateReaction {
                channel_id,
                message_id,
                emoji,
            } => format!(
                "/channels/{channel_id}/messages/{message_id}/reactions/{}/@me",
                emoji.path_segment()
            ),
            Route::SetGlobalCommands { application_id } => {
                format!("/applications/{application_id}/commands")
            }
            Route::GetGuildCommands {
                application_id,
                guild_id,
            }
            | Route::SetGuildCommands {
                application_id,
                guild_id,
            } => format!("/applications/{application_id}/guilds/{guild_id}/commands"),
            Route::CreateInteractionResponse {
                interaction_id,
                token,
            } => format!("/interactions/{interaction_id}/{}/callback", token.expose()),
            Route::EditOriginalResponse {
                application_id,
                token,
            } => format!(
                "/webhooks/{application_id}/{}/messages/@original",
                token.expose()
            ),
        }
    }

    /// The interaction token a route is authorised by, in its path: such a
    /// request goes without the bot's `Authorization` header and outside
    /// the bot's global rate limit (Discord's rate-limit docs: interaction
    /// endpoints are not bound to it), and errors about it are scrubbed of
    /// the token.
    pub const fn interaction_token(&self) -> Option<&InteractionToken> {
        match self {
            Route::CreateInteractionResponse { token, .. }
            | Route::EditOriginalResponse { token, .. } => Some(token),
            _ => None,
        }
    }

    /// The major parameter: the top-level resource whose id splits the
    /// route's rate-limit bucket (a channel here), if the route has one.
    pub const fn major(&self) -> Option<Snowflake> {
        match self {
            Route::GetChannel { channel_id }
            | Route::TriggerTyping { channel_id }
            | Route::GetMessages { channel_id }
            | Route::CreateMessage { channel_id }
            | Route::GetMessage { channel_id, .. }
            | Route::EditMessage { channel_id, .. }
            | Route::StartThreadFromMessage { channel_id, .. }
            | Route::CreateReaction { channel_id, .. } => Some(*channel_id),
            // Discord's major parameters include the webhook (an
            // interaction's is the application's) and the interaction.
            Route::EditOriginalResponse { application_id, .. } => Some(*application_id),
            Route::CreateInteractionResponse { interaction_id, .. } => Some(*interaction_id),
            // And the guild.
            Route::GetGuildCommands { guild_id, .. } | Route::SetGuildCommands { guild_id, .. } => {
                Some(*guild_id)
            }
            Route::SetGlobalCommands { .. }
            | Route::Gateway
            | Route::GatewayBot
            | Route::CurrentUser
            | Route::CurrentApplication
            | Route::CreateDm => None,
        }
    }

    /// Whether sending it twice has the effect of sending it once, so a
    /// request that timed out (it may have reached Discord and acted) may
    /// be sent again.
    pub const fn idempotent(&self) -> bool {
        match self {
            // Reads.
            Route::Gateway
            | Route::GatewayBot
            | Route::CurrentUser
            | Route::CurrentApplication
            | Route::GetChannel { .. }
            | Route::GetMessages { .. }
            | Route::GetMessage { .. } => true,
            // Opening a DM that is open returns the same channel.
            Route::CreateDm => true,
            // A second "typing…" within the first one's 10 s shows nothing new.
            Route::TriggerTyping { .. } => true,
            // The client sends every new message with a nonce and
            // `enforce_nonce`: Discord answers a repeat with the message
            // the first one created.
            Route::CreateMessage { .. } => true,
            // An edit sets the content (and attachments): a repeat sets the same.
            Route::EditMessage { .. } => true,
            // One thread per message: a repeat is refused (160004), and
            // the thread's id is the message's anyway.
            Route::StartThreadFromMessage { .. } => false,
            // The bot's own reaction is there or not: a repeat adds nothing.
            Route::CreateReaction { .. } => true,
            // A bulk overwrite sets the list: a repeat sets the same.
            Route::SetGlobalCommands { .. } | Route::SetGuildCommands { .. } => true,
            Route::GetGuildCommands { .. } => true,
            // One answer per interaction: a repeat is refused (400 40060),
            // and after 3 s any answer is (404 10062).
            Route::CreateInteractionResponse { .. } => false,
            // An edit sets the content: a repeat sets the same.
            Route::EditOriginalResponse { .. } => true,
        }
    }

    /// The route a request for `path` (relative to the API base, without
    /// its query) names. Ids must be snowflakes (digits), as Discord's
    /// router wants them; anything else is [`Unmatched::NotFound`].
    pub fn parse(method: Method, path: &str) -> Result<Route, Unmatched> {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let id = |text: &str| -> Result<Snowflake, Unmatched> {
            if text.is_empty() || text.len() > 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Unmatched::NotFound);
            }
            text.parse().map_err(|_| Unmatched::NotFound)
        };
        // Every route this path could be, by method.
        let candidates: Vec<Route> = match segments.as_slice() {
            ["gateway"] => vec![Route::Gateway],
            ["gateway", "bot"] => vec![Route::GatewayBot],
            ["users", "@me"] => vec![Route::CurrentUser],
            ["oauth2", "applications", "@me"] => vec![Route::CurrentApplication],
            ["users", "@me", "channels"] => vec![Route::CreateDm],
            ["channels", channel] => vec![Route::GetChannel {
                channel_id: id(channel)?,
            }],
            ["channels", channel, "typing"] => vec![Route::TriggerTyping {
                channel_id: id(channel)?,
            }],
            ["channels", channel, "messages"] => {
                let channel_id = id(channel)?;
                vec![
                    Route::GetMessages { channel_id },
                    Route::CreateMessage { channel_id },
                ]
            }
            ["channels", channel, "messages", message] => {
                let (channel_id, message_id) = (id(channel)?, id(message)?);
                vec![
                    Route::GetMessage {
                        channel_id,
                        message_id,
                    },
                    Route::EditMessage {
                        channel_id,
                        message_id,
                    },
                ]
            }
            ["channels", channel, "messages", message, "reactions", emoji, "@me"] => {
                vec![Route::CreateReaction {
                    channel_id: id(channel)?,
                    message_id: id(message)?,
                    emoji: Emoji::from_segment(emoji).ok_or(Unmatched::NotFound)?,
                }]
            }
            ["applications", application, "commands"] => vec![Route::SetGlobalCommands {
                application_id: id(application)?,
            }],
            ["applications", application, "guilds", guild, "commands"] => {
                let (application_id, guild_id) = (id(application)?, id(guild)?);
                vec![
                    Route::GetGuildCommands {
                        application_id,
                        guild_id,
                    },
                    Route::SetGuildCommands {
                        application_id,
                        guild_id,
                    },
                ]
            }
            ["interactions", interaction, token, "callback"] => {
                vec![Route::CreateInteractionResponse {
                    interaction_id: id(interaction)?,
                    token: InteractionToken::new(token).ok_or(Unmatched::NotFound)?,
                }]
            }
            ["webhooks", application, token, "messages", "@original"] => {
                vec![Route::EditOriginalResponse {
                    application_id: id(application)?,
                    token: InteractionToken::new(token).ok_or(Unmatched::NotFound)?,
                }]
            }
            ["channels", channel, "messages", message, "threads"] => {
                vec![Route::StartThreadFromMessage {
                    channel_id: id(channel)?,
                    message_id: id(message)?,
                }]
            }
            _ => return Err(Unmatched::NotFound),
        };
        candidates
            .into_iter()
            .find(|route| route.method() == method)
            .ok_or(Unmatched::MethodNotAllowed)
    }
}

/// `METHOD /template`, e.g. `POST /channels/{channel_id}/messages`.
impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method(), self.template())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One of each route, with ids.
    fn every_route() -> Vec<Route> {
        let (channel_id, message_id) = (Snowflake::new(41), Snowflake::new(7));
        vec![
            Route::Gateway,
            Route::GatewayBot,
            Route::CurrentUser,
            Route::CurrentApplication,
            Route::CreateDm,
            Route::GetChannel { channel_id },
            Route::TriggerTyping { channel_id },
            Route::GetMessages { channel_id },
            Route::CreateMessage { channel_id },
            Route::GetMessage {
                channel_id,
                message_id,
            },
            Route::EditMessage {
                channel_id,
                message_id,
            },
            Route::StartThreadFromMessage {
                channel_id,
                message_id,
            },
            Route::CreateReaction {
                channel_id,
                message_id,
                emoji: Emoji::new("👀").unwrap(),
            },
            Route::SetGlobalCommands {
                application_id: message_id,
            },
            Route::GetGuildCommands {
                application_id: message_id,
                guild_id: channel_id,
            },
            Route::SetGuildCommands {
                application_id: message_id,
                guild_id: channel_id,
            },
            Route::CreateInteractionResponse {
                interaction_id: message_id,
                token: InteractionToken::new("tok3n").unwrap(),
            },
            Route::EditOriginalResponse {
                application_id: message_id,
                token: InteractionToken::new("tok3n").unwrap(),
            },
        ]
    }

    #[test]
    fn every_route_parses_back_from_its_method_and_path() {
        for route in every_route() {
            assert_eq!(
                Route::parse(route.method(), &route.path()),
                Ok(route.clone())
            );
        }
    }

    #[test]
    fn an_interaction_route_is_named_without_its_token_and_goes_without_the_bot_token() {
        let route = Route::CreateInteractionResponse {
            interaction_id: Snowflake::new(5),
            token: InteractionToken::new("s3cr3t").unwrap(),
        };
        assert_eq!(route.path(), "/interactions/5/s3cr3t/callback");
        for shown in [route.to_string(), format!("{route:?}")] {
            assert!(!shown.contains("s3cr3t"), "{shown}");
        }
        assert!(route.interaction_token().is_some());
        assert!(!route.idempotent());
        assert_eq!(
            Route::parse(Method::Post, "/interactions/5/a%2Fb/callback"),
            Err(Unmatched::NotFound)
        );
        assert!(Route::SetGlobalCommands {
            application_id: Snowflake::new(5)
        }
        .interaction_token()
        .is_none());
    }

    #[test]
    fn a_known_path_with_another_method_is_not_allowed_and_a_stranger_path_not_found() {
        assert_eq!(
            Route::parse(Method::Delete, "/channels/41/messages"),
            Err(Unmatched::MethodNotAllowed)
        );
        assert_eq!(
            Route::parse(Method::Get, "/channels/41/pins"),
            Err(Unmatched::NotFound)
        );
        assert_eq!(
            Route::parse(Method::Get, "/channels/../messages"),
            Err(Unmatched::NotFound)
        );
        assert_eq!(
            Route::parse(Method::Get, "/channels/99999999999999999999999/messages"),
            Err(Unmatched::NotFound)
        );
    }

    #[test]
    fn the_channel_is_the_major_parameter() {
        for route in every_route() {
            // Or the guild, or the webhook or interaction of a token.
            let has_channel = route.template().starts_with("/channels/")
                || route.template().contains("{guild_id}");
            // Starting a thread and answering an interaction are refused
            // the second time: the routes a timeout must not repeat.
            let once = matches!(
                route,
                Route::StartThreadFromMessage { .. } | Route::CreateInteractionResponse { .. }
            );
            assert_eq!(route.idempotent(), !once, "{route}");
            let token = route.interaction_token().is_some();
            assert_eq!(route.major().is_some(), has_channel || token, "{route}");
        }
    }
}
