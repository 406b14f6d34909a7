//! What survives a reconnect (and, saved to disk, a restart): the session to
//! resume, and the sequence tracking that makes every dispatch arrive exactly
//! once.

use super::history::SessionHistory;
use super::identify_budget::IdentifyBudget;
use serde::{Deserialize, Serialize};

/// A resumable gateway session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// From READY.
    pub session_id: String,
    /// The last dispatch sequence number delivered.
    pub seq: u64,
    /// From READY: where to reconnect to resume.
    pub resume_gateway_url: String,
}

/// The shard's persistent state: the session, the identify budget and the
/// session history.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    /// The session to resume, if any.
    #[serde(default)]
    pub session: Option<Session>,
    /// Fresh identifies in the last 24 h.
    #[serde(default)]
    pub identifies: IdentifyBudget,
    /// The last gateway sessions and how each ended.
    #[serde(default)]
    pub history: SessionHistory,
}

/// What to do with a dispatch's sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SeqCheck {
    /// New: deliver it.
    Deliver,
    /// Already delivered (a replay after a resume): drop it.
    Duplicate,
    /// New, but events between were never seen: deliver and say so.
    Gap {
        /// The last sequence number delivered before this one.
        after: u64,
    },
}

/// Longest `resume_gateway_url` believed (Discord's are about 40 bytes).
const MAX_RESUME_URL_BYTES: usize = 512;

/// Checks READY's `resume_gateway_url` before it is stored and tried:
/// `wss://` with a host, or `ws://` only when the session itself began on
/// `ws://` (a `ws://` resume URL after a `wss://` session would send the
/// token in clear text), of sane length, with nothing but printable ASCII.
/// `connected` is the URL the session began on. The error says why.
pub fn checked_resume_url(candidate: &str, connected: &str) -> Result<String, String> {
    if candidate.len() > MAX_RESUME_URL_BYTES {
        return Err(format!(
            "{} bytes long, more than {MAX_RESUME_URL_BYTES}",
            candidate.len()
        ));
    }
    if !candidate.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("it holds spaces, control or non-ASCII characters".into());
    }
    let rest = if let Some(rest) = candidate.strip_prefix("wss://") {
        rest
    } else if let Some(rest) = candidate.strip_prefix("ws://") {
        if !connected.starts_with("ws://") {
            return Err(
                "`ws://` after a session that began on `wss://` would send the token in clear text"
                    .into(),
            );
        }
        rest
    } else {
        return Err(format!("`{}` is not a `wss://` URL", excerpt(candidate)));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return Err(format!("`{}` names no host", excerpt(candidate)));
    }
    Ok(candidate.to_owned())
}

fn excerpt(text: &str) -> &str {
    &text[..text.len().min(64)]
}

/// Checks a dispatch's `s` against the last one delivered.
pub fn check_seq(last: Option<u64>, seq: u64) -> SeqCheck {
    match last {
        Some(last) if seq <= last => SeqCheck::Duplicate,
        Some(last) if seq > last + 1 => SeqCheck::Gap { after: last },
        _ => SeqCheck::Deliver,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_checks() {
        assert_eq!(check_seq(None, 1), SeqCheck::Deliver);
        assert_eq!(check_seq(Some(4), 5), SeqCheck::Deliver);
        assert_eq!(check_seq(Some(5), 5), SeqCheck::Duplicate);
        assert_eq!(check_seq(Some(5), 3), SeqCheck::Duplicate);
        assert_eq!(check_seq(Some(5), 8), SeqCheck::Gap { after: 5 });
    }

    #[test]
    fn resume_urls_are_checked() {
        let tls = "wss://gateway.discord.gg";
        let plain = "ws://127.0.0.1:9000";
        assert!(checked_resume_url("wss://gateway-us-east1-c.discord.gg", tls).is_ok());
        assert!(checked_resume_url("ws://127.0.0.1:9000/resume", plain).is_ok());
        assert!(checked_resume_url("wss://127.0.0.1:9000/resume", plain).is_ok());
        let refused = [
            ("ws://gateway.discord.gg", tls, "clear text"),
            ("http://gateway.discord.gg", tls, "not a `wss://`"),
            ("file:///etc/passwd", tls, "not a `wss://`"),
            ("wss://", tls, "no host"),
            ("wss:///path", tls, "no host"),
            ("wss://user@evil", tls, "no host"),
            ("wss://a b", tls, "spaces"),
        ];
        for (url, connected, why) in refused {
            let err = checked_resume_url(url, connected).unwrap_err();
            assert!(err.contains(why), "{url}: {err}");
        }
        let long = format!("wss://{}", "a".repeat(10_000));
        assert!(checked_resume_url(&long, tls)
            .unwrap_err()
            .contains("10006 bytes"));
    }

    #[test]
    fn state_round_trips_and_tolerates_missing_fields() {
        let state = SessionState {
            session: Some(Session {
                session_id: "abc".into(),
                seq: 42,
                resume_gateway_url: "ws://127.0.0.1:1/resume".into(),
            }),
            identifies: IdentifyBudget::default(),
            history: SessionHistory::default(),
        };
        let text = serde_json::to_string(&state).unwrap();
        assert_eq!(serde_json::from_str::<SessionState>(&text).unwrap(), state);
        assert_eq!(
            serde_json::from_str::<SessionState>("{}").unwrap(),
            SessionState::default()
        );
    }
}
