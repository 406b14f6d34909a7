//! Surviving restarts: the restart-failure counter and safe mode, the
//! `!restart` notify marker, and the last processed message per channel.
//!
//! - `runtime.json` holds the count of consecutive start-ups that never
//!   completed a turn, the bot's user id (a resumed session gets no READY,
//!   so it must be remembered to ignore our own messages) and the last
//!   processed message id per channel (a resume may replay messages that
//!   were already answered; written, and waited for, as each message is
//!   done).
//! - The counter goes up at every start-up and back to zero after the first
//!   successful turn, or on a clean stop (a stop signal, and the drain left
//!   nothing unfinished: a reboot is not a failure, but work abandoned at a
//!   stop may be what keeps failing). Past `safe_mode_after_failures`, the
//!   bridge starts in safe mode: it answers only the owner, until the
//!   first successful turn lifts it.
//! - `restart.json` is written when the owner sends `!restart`: who asked,
//!   where. After the next READY (or RESUMED) the bridge says it is back
//!   there and removes the marker.

use crate::bridge::report::reporter::Reporter;
use crate::recorder::FailureKind;
use serde::{Deserialize, Serialize};
use smolcord::offload::{self, Fallback};
use smolcord::protocol::Snowflake;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The runtime state file.
pub const RUNTIME_FILE: &str = "runtime.json";
/// The restart notify marker.
pub const RESTART_FILE: &str = "restart.json";
/// Channels remembered in the processed map besides the answered users'
/// DM channels (the stalest dropped first).
pub const PROCESSED_CHANNELS: usize = 512;
/// The owner's command.
pub const RESTART_COMMAND: &str = "!restart";

/// What `runtime.json` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeState {
    /// Start-ups since the last successful turn (or clean stop).
    #[serde(default)]
    pub failed_starts: u32,
    /// The bot's own user id.
    #[serde(default)]
    pub bot_user_id: Option<Snowflake>,
    /// Last processed message id per channel.
    #[serde(default)]
    pub processed: BTreeMap<Snowflake, Snowflake>,
    /// The answered users' (owner's, allowed users') DM channels, user →
    /// channel: learnt once (from a DM, or by opening it), kept for good,
    /// so no read-back opens them again. Their processed marks are never
    /// evicted: a crowd of strangers cannot make the bridge forget what it
    /// answered the people it serves (bounded by the access list; pruned
    /// to it at each read-back).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dm_channels: BTreeMap<Snowflake, Snowflake>,
    /// A fresh session began and its read-back of the DM history has not
    /// finished: the next session start (a resume too) reads back again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub readback_due: bool,
    /// Threads the bot started for a conversation (thread mode): thread id
    /// → its channel. The newest [`THREADS_KEPT`]; an older thread's
    /// conversation needs a mention again.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub threads: BTreeMap<Snowflake, Snowflake>,
    /// The owner's commands (interactions) handled, the newest
    /// [`INTERACTIONS_KEPT`]: a replayed INTERACTION_CREATE (a resume, a
    /// restart) is not acted on twice (docs/commands.md).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub interactions: BTreeSet<Snowflake>,
    /// The latest fresh sessions of shard 0 (which carries the DMs): when
    /// each began and when it was last known live (or resumable), the
    /// newest [`LIVE_SPANS`]. A message sent inside a span was dispatched
    /// to that session (a resume replays what it missed); one sent between
    /// two spans was sent in a gap. A read-back counts its per-chat bound
    /// per gap, and what a session received not at all
    /// (docs/exactly-once.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub live: Vec<LiveSpan>,
}

/// Fresh sessions remembered in `runtime.json` (~40 bytes each): gaps
/// further back are counted as one.
pub const LIVE_SPANS: usize = 8;

/// When one session was live, host clock (unix ms).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveSpan {
    /// Its READY.
    pub from: u64,
    /// The last moment it was known live: a message it dispatched, its
    /// RESUMED, a write of `runtime.json` while it was up.
    pub to: u64,
}

/// The owner's commands remembered as handled in `runtime.json` (an id
/// each): forgetting one still replayable would take 256 more within its
/// token's 15 minutes (strangers' refused uses are not recorded).
pub const INTERACTIONS_KEPT: usize = 256;

/// Threads remembered in `runtime.json` (a few dozen bytes each).
pub const THREADS_KEPT: usize = 256;

impl RuntimeState {
    /// Whether `message` in `channel` was processed already.
    pub fn is_processed(&self, channel: Snowflake, message: Snowflake) -> bool {
        self.processed
            .get(&channel)
            .is_some_and(|&last| message <= last)
    }

    /// Remembers `thread`, started in `channel` (the oldest go past
    /// [`THREADS_KEPT`]; thread ids are the ids of the messages they
    /// started from, so the smallest is the oldest).
    pub fn remember_thread(&mut self, thread: Snowflake, channel: Snowflake) {
        self.threads.insert(thread, channel);
        while self.threads.len() > THREADS_KEPT {
            self.threads.pop_first();
        }
    }

    /// Whether the interaction was handled already.
    pub fn interaction_handled(&self, id: Snowflake) -> bool {
        self.interactions.contains(&id)
    }

    /// Records the interaction as handled (ids grow with time: the
    /// smallest is the oldest, forgotten past [`INTERACTIONS_KEPT`]).
    pub fn mark_interaction(&mut self, id: Snowflake) {
        self.interactions.insert(id);
        while self.interactions.len() > INTERACTIONS_KEPT {
            self.interactions.pop_first();
        }
    }

    /// Records `message` as processed (ids only grow per channel).
    pub fn mark_processed(&mut self, channel: Snowflake, message: Snowflake) {
        let entry = self.processed.entry(channel).or_insert(message);
        if *entry < message {
            *entry = message;
        }
        let kept = |channel: &Snowflake| self.dm_channels.values().any(|c| c == channel);
        let mut others = self.processed.keys().filter(|c| !kept(c)).count();
        while others > PROCESSED_CHANNELS {
            // Snowflakes grow with time: the smallest last id is the
            // stalest channel. The answered users' are not in the running.
            let Some(stalest) = self
                .processed
                .iter()
                .filter(|(channel, _)| !kept(channel))
                .min_by_key(|(_, &last)| last)
                .map(|(&channel, _)| channel)
            else {
                break;
            };
            self.processed.remove(&stalest);
            others -= 1;
        }
    }

    /// Remembers `channel` as answered user `user`'s DM channel; true if
    /// that is news (to be written).
    pub fn remember_dm(&mut self, user: Snowflake, channel: Snowflake) -> bool {
        self.dm_channels.insert(user, channel) != Some(channel)
    }

    /// A fresh session began (READY on shard 0) at `at`.
    pub fn session_began(&mut self, at: u64) {
        self.live.push(LiveSpan { from: at, to: at });
        if self.live.len() > LIVE_SPANS {
            self.live.remove(0);
        }
    }

    /// The newest session was live (or resumable) at `at`; true if that is
    /// news.
    pub fn session_seen(&mut self, at: u64) -> bool {
        match self.live.last_mut() {
            Some(span) if at > span.to => {
                span.to = at;
                true
            }
            _ => false,
        }
    }

    /// Forgets the DM channels of users no longer answered (their marks
    /// become evictable like anyone's); true if any went.
    pub fn keep_dms_of(&mut self, answered: &[Snowflake]) -> bool {
        let before = self.dm_channels.len();
        self.dm_channels.retain(|user, _| answered.contains(user));
        self.dm_channels.len() != before
    }
}

/// Whether a start-up whose counter (after the bump) is `failed_starts`
/// runs in safe mode: more than `threshold` consecutive start-ups without a
/// successful turn. A threshold of 0 turns safe mode off.
pub fn safe_mode(failed_starts: u32, threshold: u32) -> bool {
    threshold > 0 && failed_starts > threshold
}

/// The `!restart` notify marker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartMarker {
    /// Who asked.
    pub requested_by: Snowflake,
    /// Where to say "back".
    pub channel_id: Snowflake,
    /// The `!restart` message.
    pub message_id: Snowflake,
    /// When (unix ms).
    pub requested_unix_ms: u64,
}

/// Whether `content` is the restart command.
pub fn is_restart_command(content: &str) -> bool {
    content.trim().eq_ignore_ascii_case(RESTART_COMMAND)
}

/// `state_dir/runtime.json`.
pub fn runtime_path(state_dir: &Path) -> PathBuf {
    state_dir.join(RUNTIME_FILE)
}

/// `state_dir/restart.json`.
pub fn restart_path(state_dir: &Path) -> PathBuf {
    state_dir.join(RESTART_FILE)
}

/// Reads the runtime state; default (and a warning) if missing or bad.
pub async fn read_runtime(state_dir: &Path) -> RuntimeState {
    match offload::read_json(&runtime_path(state_dir), Fallback::Backup).await {
        Ok(Some(state)) => state,
        Ok(None) => RuntimeState::default(),
        Err(e) => {
            log::warn!("{e}; starting with no restart history");
            RuntimeState::default()
        }
    }
}

/// Writes the restart marker, awaited (the "back" notice needs it). A
/// failed write is logged and journalled: the restart goes on without it.
pub(crate) async fn write_marker(state_dir: &Path, reporter: &Reporter, marker: &RestartMarker) {
    if let Err(e) = offload::write_json_atomic(&restart_path(state_dir), marker).await {
        log::error!("writing the restart marker: {e}; restarting without it");
        reporter.fail(
            FailureKind::State,
            "restart.json",
            None,
            "marker write failed",
        );
    }
}

/// Reads the restart marker, if any.
pub async fn read_marker(state_dir: &Path) -> Option<RestartMarker> {
    match offload::read_json(&restart_path(state_dir), Fallback::None).await {
        Ok(marker) => marker,
        Err(e) => {
            log::warn!("{e}; ignoring the restart marker");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_sessions_spans_are_kept_and_only_grow() {
        let mut runtime = RuntimeState::default();
        // No session yet: nothing to grow.
        assert!(!runtime.session_seen(5));
        for n in 0..10 {
            runtime.session_began(n * 100);
        }
        assert_eq!(runtime.live.len(), LIVE_SPANS);
        assert_eq!(runtime.live[0].from, 200);
        assert!(runtime.session_seen(950));
        assert!(!runtime.session_seen(940), "a span never shrinks");
        assert_eq!(runtime.live.last(), Some(&LiveSpan { from: 900, to: 950 }));
        // Absent from a file written before: no spans (one gap).
        let old: RuntimeState = serde_json::from_str(r#"{"failed_starts":0}"#).unwrap();
        assert!(old.live.is_empty());
    }

    #[test]
    fn safe_mode_after_the_threshold() {
        // Threshold 3: three failed start-ups are tolerated, the fourth
        // start-up in a row (counter 4 after its bump) is safe.
        assert!(!safe_mode(1, 3));
        assert!(!safe_mode(3, 3));
        assert!(safe_mode(4, 3));
        assert!(!safe_mode(100, 0), "0 turns safe mode off");
    }

    #[test]
    fn processed_ids_per_channel() {
        let mut state = RuntimeState::default();
        let (a, b) = (Snowflake::new(1), Snowflake::new(2));
        state.mark_processed(a, Snowflake::new(100));
        state.mark_processed(a, Snowflake::new(90)); // never goes back
        assert!(state.is_processed(a, Snowflake::new(100)));
        assert!(state.is_processed(a, Snowflake::new(99)));
        assert!(!state.is_processed(a, Snowflake::new(101)));
        assert!(!state.is_processed(b, Snowflake::new(5)));
        for channel in 0..(PROCESSED_CHANNELS as u64 + 10) {
            state.mark_processed(
                Snowflake::new(1000 + channel),
                Snowflake::new(1000 + channel),
            );
        }
        assert_eq!(state.processed.len(), PROCESSED_CHANNELS);
        assert!(!state.processed.contains_key(&a), "stalest channel dropped");
    }

    #[test]
    fn strangers_cannot_evict_the_marks_of_the_answered_users_channels() {
        let mut state = RuntimeState::default();
        let (owner, owner_dm) = (Snowflake::new(7), Snowflake::new(70));
        assert!(state.remember_dm(owner, owner_dm));
        assert!(!state.remember_dm(owner, owner_dm), "not news twice");
        state.mark_processed(owner_dm, Snowflake::new(100));
        // 560 strangers, each newer than the owner's last message.
        for stranger in 0..560u64 {
            state.mark_processed(
                Snowflake::new(10_000 + stranger),
                Snowflake::new(200 + stranger),
            );
        }
        assert!(
            state.is_processed(owner_dm, Snowflake::new(100)),
            "owner's mark evicted"
        );
        assert_eq!(state.processed.len(), PROCESSED_CHANNELS + 1);
        // Kept in runtime.json.
        let json = serde_json::to_string(&state).unwrap();
        let back: RuntimeState = serde_json::from_str(&json).unwrap();
        assert_eq!(back.dm_channels.get(&owner), Some(&owner_dm));
        // No longer answered: evictable again.
        assert!(state.keep_dms_of(&[]));
        state.mark_processed(Snowflake::new(99_999), Snowflake::new(9_999));
        assert!(!state.processed.contains_key(&owner_dm));
    }

    #[test]
    fn restart_command() {
        assert!(is_restart_command(" !restart\n"));
        assert!(is_restart_command("!RESTART"));
        assert!(!is_restart_command("!restart now"));
    }

    #[test]
    fn runtime_state_tolerates_missing_fields_and_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        smol::block_on(async {
            assert_eq!(read_runtime(dir.path()).await, RuntimeState::default());
            offload::write_bytes_atomic(
                &runtime_path(dir.path()),
                b"{\"failed_starts\":2}".to_vec(),
            )
            .await
            .unwrap();
            assert_eq!(read_runtime(dir.path()).await.failed_starts, 2);
            offload::write_bytes_atomic(&runtime_path(dir.path()), b"{oops".to_vec())
                .await
                .unwrap();
            assert_eq!(read_runtime(dir.path()).await, RuntimeState::default());
        });
    }
}
