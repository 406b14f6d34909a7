//! Bot tokens shaped like Discord's: three dot-separated base64 parts,
//! the first the bot's user id in decimal (`MTEw…` is `110…`), the second a
//! timestamp, the third an HMAC. Libraries read the bot id from the first
//! part (discord.js's `REST` and several forks do, before READY), so the
//! simulator's token must decode to the id its READY announces.
//!
//! ```
//! use smolcord_sim::{bot_id_of_token, sim_token_for, SimConfig, DEFAULT_SIM_TOKEN};
//! let config = SimConfig::default();
//! assert_eq!(bot_id_of_token(DEFAULT_SIM_TOKEN), Some(config.bot_id));
//! let token = sim_token_for(smolcord::protocol::Snowflake::new(42));
//! assert!(token.starts_with("NDI."));
//! ```

use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine;
use smolcord::protocol::Snowflake;

/// The token the simulator accepts unless configured otherwise: the
/// default bot id (1100000000000000001) `.` a timestamp part (2026-01-01
/// in Discord's token epoch) `.` an HMAC-sized part that says what it is
/// (`smolcord-simulator-no-secret`).
pub const DEFAULT_SIM_TOKEN: &str =
    "MTEwMDAwMDAwMDAwMDAwMDAwMQ.HDdKgA.c21vbGNvcmQtc2ltdWxhdG9yLW5vLXNlY3JldA";

/// The last two parts of [`DEFAULT_SIM_TOKEN`], reused for other ids.
const TAIL: &str = "HDdKgA.c21vbGNvcmQtc2ltdWxhdG9yLW5vLXNlY3JldA";

/// A Discord-shaped token for a bot with this user id.
pub fn sim_token_for(bot_id: Snowflake) -> String {
    format!(
        "{}.{TAIL}",
        STANDARD_NO_PAD.encode(bot_id.get().to_string())
    )
}

/// The bot user id a Discord token's first part decodes to, or `None` for
/// a token that is not shaped like Discord's.
pub fn bot_id_of_token(token: &str) -> Option<Snowflake> {
    let token = token.strip_prefix("Bot ").unwrap_or(token);
    let mut parts = token.split('.');
    let first = parts.next()?.trim_end_matches('=');
    if parts.count() != 2 {
        return None;
    }
    let bytes = STANDARD_NO_PAD
        .decode(first)
        .or_else(|_| URL_SAFE_NO_PAD.decode(first))
        .ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<u64>()
        .ok()
        .filter(|&id| id > 0)
        .map(Snowflake::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_token_is_the_default_bot_id() {
        let id = Snowflake::new(1_100_000_000_000_000_001);
        assert_eq!(sim_token_for(id), DEFAULT_SIM_TOKEN);
        assert_eq!(bot_id_of_token(DEFAULT_SIM_TOKEN), Some(id));
        assert_eq!(
            bot_id_of_token(&format!("Bot {DEFAULT_SIM_TOKEN}")),
            Some(id)
        );
    }

    #[test]
    fn tokens_not_shaped_like_discords_have_no_id() {
        for token in [
            "smolcord-sim-token",
            "MTEw",
            "MTEw.a",
            "MTEw.a.b.c",
            "!!!.a.b",
            "YWJj.a.b", // "abc"
            ".a.b",
            "MA.a.b", // "0"
        ] {
            assert_eq!(bot_id_of_token(token), None, "{token}");
        }
        // Padding and the URL-safe alphabet are accepted.
        assert_eq!(bot_id_of_token("NDI=.a.b"), Some(Snowflake::new(42)));
    }
}
