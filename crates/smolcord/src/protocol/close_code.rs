//! Gateway close codes and what a client should do after each.

use std::fmt;

/// What to do after the gateway closed the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseAction {
    /// Reconnect and resume the session (to `resume_gateway_url`).
    Resume,
    /// Reconnect and identify afresh: the session is gone.
    Reidentify,
    /// Do not reconnect: a setting must change first.
    Fatal,
}

/// A WebSocket close code as received from (or sent to) the gateway.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CloseCode(pub u16);

impl CloseCode {
    /// 4000, Discord's "unknown error": the code the shard closes with to
    /// keep the session resumable (any code but 1000 and 1001 would do;
    /// twilight and discord.py use 4000 too).
    pub const RESUME: CloseCode = CloseCode(4000);
    /// 1000: normal closure; ends the session (bot shows offline).
    pub const NORMAL: CloseCode = CloseCode(1000);
    /// 1001: going away; ends the session like 1000.
    pub const GOING_AWAY: CloseCode = CloseCode(1001);
    /// 1006: the connection was lost without a close frame (never sent).
    pub const ABNORMAL: CloseCode = CloseCode(1006);
    /// 4000: unknown error (resume).
    pub const UNKNOWN_ERROR: CloseCode = CloseCode(4000);
    /// 4001: an invalid opcode or payload for an opcode (resume).
    pub const UNKNOWN_OPCODE: CloseCode = CloseCode(4001);
    /// 4002: a payload that does not decode (resume).
    pub const DECODE_ERROR: CloseCode = CloseCode(4002);
    /// 4003: a payload before Identify (resume).
    pub const NOT_AUTHENTICATED: CloseCode = CloseCode(4003);
    /// 4004: the token is wrong (fatal).
    pub const AUTHENTICATION_FAILED: CloseCode = CloseCode(4004);
    /// 4005: a second Identify (resume).
    pub const ALREADY_AUTHENTICATED: CloseCode = CloseCode(4005);
    /// 4007: a Resume with a seq the session never reached (identify afresh).
    pub const INVALID_SEQ: CloseCode = CloseCode(4007);
    /// 4008: payloads sent too fast (resume).
    pub const RATE_LIMITED: CloseCode = CloseCode(4008);
    /// 4009: the session timed out (identify afresh).
    pub const SESSION_TIMED_OUT: CloseCode = CloseCode(4009);
    /// 4010: an invalid shard in Identify (fatal).
    pub const INVALID_SHARD: CloseCode = CloseCode(4010);
    /// 4011: the bot must shard (fatal).
    pub const SHARDING_REQUIRED: CloseCode = CloseCode(4011);
    /// 4012: an invalid API version (fatal).
    pub const INVALID_API_VERSION: CloseCode = CloseCode(4012);
    /// 4013: invalid intents (fatal).
    pub const INVALID_INTENTS: CloseCode = CloseCode(4013);
    /// 4014: intents the bot is not approved or enabled for (fatal).
    pub const DISALLOWED_INTENTS: CloseCode = CloseCode(4014);

    /// Whether a client closing with this code ends its session: Discord
    /// invalidates the session on 1000 and 1001 (the bot shows offline at
    /// once, a resume fails); any other code keeps it resumable for a few
    /// minutes ([Discord: Resuming](https://discord.com/developers/docs/events/gateway#resuming)).
    pub fn ends_session(self) -> bool {
        matches!(self.0, 1000 | 1001)
    }

    /// What a client should do after the server closed with this code.
    ///
    /// A close from the server with 1000 or 1001 resumes. Discord documents
    /// only that a *client* closing with 1000 or 1001 ends its session
    /// (<https://discord.com/developers/docs/events/gateway#initiating-a-disconnect>);
    /// of a server sending them it says nothing, and its close code table
    /// lists neither. twilight and discord.py resume there, and so do we:
    /// a resume that comes too late costs one round trip (op 9 `false`,
    /// then Identify), while identifying afresh when the session lived on
    /// would spend a piece of the daily budget and lose the dispatches a
    /// resume replays.
    pub fn action(self) -> CloseAction {
        match self {
            CloseCode::AUTHENTICATION_FAILED
            | CloseCode::INVALID_SHARD
            | CloseCode::SHARDING_REQUIRED
            | CloseCode::INVALID_API_VERSION
            | CloseCode::INVALID_INTENTS
            | CloseCode::DISALLOWED_INTENTS => CloseAction::Fatal,
            // The session is gone: a bad seq or a timeout.
            CloseCode::INVALID_SEQ | CloseCode::SESSION_TIMED_OUT => CloseAction::Reidentify,
            // 1000/1001 (see above), 4000-4003, 4005, 4008, 1006 (no close
            // frame) and anything unknown: the session may live on, so try
            // to resume.
            _ => CloseAction::Resume,
        }
    }

    /// Discord's meaning of the code.
    pub fn description(self) -> &'static str {
        match self {
            CloseCode::NORMAL => "normal closure",
            CloseCode::GOING_AWAY => "going away",
            CloseCode::ABNORMAL => "connection lost without a close frame",
            CloseCode::UNKNOWN_ERROR => "unknown error",
            CloseCode::UNKNOWN_OPCODE => "unknown opcode",
            CloseCode::DECODE_ERROR => "decode error",
            CloseCode::NOT_AUTHENTICATED => "not authenticated",
            CloseCode::AUTHENTICATION_FAILED => "authentication failed",
            CloseCode::ALREADY_AUTHENTICATED => "already authenticated",
            CloseCode::INVALID_SEQ => "invalid seq",
            CloseCode::RATE_LIMITED => "rate limited",
            CloseCode::SESSION_TIMED_OUT => "session timed out",
            CloseCode::INVALID_SHARD => "invalid shard",
            CloseCode::SHARDING_REQUIRED => "sharding required",
            CloseCode::INVALID_API_VERSION => "invalid API version",
            CloseCode::INVALID_INTENTS => "invalid intents",
            CloseCode::DISALLOWED_INTENTS => "disallowed intents",
            _ => "unrecognised close code",
        }
    }

    /// For fatal codes: what must change before connecting again, in the
    /// protocol's terms (an application adds where its own settings are).
    pub fn advice(self) -> Option<&'static str> {
        Some(match self {
            CloseCode::AUTHENTICATION_FAILED => "the token was rejected: use the bot's current token (Developer Portal, Bot page)",
            CloseCode::INVALID_SHARD => "the shard id in Identify must be below the shard count",
            CloseCode::SHARDING_REQUIRED => "the bot is in too many guilds for this shard count: run more shards (GET /gateway/bot recommends a count)",
            CloseCode::INVALID_API_VERSION => "the gateway no longer accepts this API version",
            CloseCode::INVALID_INTENTS => "the intents bitmask has bits Discord does not know",
            CloseCode::DISALLOWED_INTENTS => "a privileged intent requested is not enabled for this application (Developer Portal, Bot page): enable it or stop requesting it",
            _ => return None,
        })
    }
}

impl fmt::Display for CloseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.description(), self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_discord() {
        for code in [4004, 4010, 4011, 4012, 4013, 4014] {
            assert_eq!(CloseCode(code).action(), CloseAction::Fatal, "{code}");
            assert!(CloseCode(code).advice().is_some(), "{code}");
        }
        for code in [4007, 4009] {
            assert_eq!(CloseCode(code).action(), CloseAction::Reidentify, "{code}");
        }
        // 1000/1001 from the server: resumed, as twilight and discord.py do.
        for code in [
            1000, 1001, 4000, 4001, 4002, 4003, 4005, 4008, 1006, 1011, 4999,
        ] {
            assert_eq!(CloseCode(code).action(), CloseAction::Resume, "{code}");
            assert!(CloseCode(code).advice().is_none(), "{code}");
        }
        assert_eq!(CloseCode::RESUME.action(), CloseAction::Resume);
    }

    #[test]
    fn display_names_code_and_meaning() {
        assert_eq!(CloseCode(4004).to_string(), "authentication failed (4004)");
    }
}
