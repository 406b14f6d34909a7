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
