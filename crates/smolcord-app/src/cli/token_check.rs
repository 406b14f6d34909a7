//! The start-up token check: one REST call that Discord answers 401 for a
//! bad token. The gateway's 4004 says the same, but only a gateway that
//! behaves like Discord's sends it; a proxy or another server that closes
//! with some other code would leave the bridge re-identifying forever.
//!
//! Only a 401 is a verdict. Anything else (Discord down, no network, a
//! 5xx, a timeout) says nothing about the token: it is logged and the bridge
//! carries on, because an outage must never stop a bot that a supervisor
//! will not restart (exit 78 means "do not retry").

use smolcord::rest::{RestClient, RestError};

/// Asks `GET /gateway/bot` once. `Some(message)` when the token was refused
/// (401): what to tell the operator, naming `DISCORD_TOKEN` (never the
/// token); `None` when it was accepted or the check could not tell.
pub async fn refused(rest: &RestClient) -> Option<String> {
    match rest.gateway_bot().await {
        Ok(_) => {
            log::debug!("token check: Discord's REST API accepts the token");
            None
        }
        // Worded like the gateway's 4004, which may win the race.
        Err(RestError::Http { status: 401, .. }) => Some(
            "Discord's REST API refused the token: authentication failed (HTTP 401 on \
             GET /gateway/bot): check DISCORD_TOKEN (or token_file): the token was rejected"
                .to_owned(),
        ),
        Err(e) => {
            log::warn!(
                "token check: could not ask Discord's REST API ({e}); carrying on, the gateway will tell"
            );
            None
        }
    }
}
