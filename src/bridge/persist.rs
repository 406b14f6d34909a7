//! Background state writes, off the message path.
//!
//! [`Coalescing`] owns one JSON file: `set` stores the newest value and
//! wakes a background task, and returns at once; the task writes through
//! offload, optionally after a debounce, and skips a value already on disk.
//! A slow disk therefore makes writes coalesce, never makes a message wait.
//! `flush` is for shutdown (awaited, bounded by the caller).
//!
//! [`SeqFloor`] decides which gateway `seq` goes into `session.json`: not
//! the last one the shard received but the last one the bridge consumed,
//! lowered to just before the oldest message still being handled. A restart
//! then resumes early enough that Discord replays what was not finished;
//! the processed-ids map drops what was.
//!
//! [`SessionAndStatus`] decides *when* `session.json` and `status.json` are
//! written: when their content changes in a way that matters, not per
//! heartbeat, so an idle bridge writes nothing (see [`SESSION_SEQ_MAX_AGE`]).

use super::report::Reporter;
use crate::offload::{self, Fallback};
use crate::recorder::FailureKind;
use crate::rt::Timer;
use crate::shard::SessionState;
use crate::status::StatusSnapshot;
use serde::Serialize;
use smol::channel::{self, Receiver, Sender};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The session file inside the state dir.
pub const SESSION_FILE: &str = "session.json";

struct Shared {
    path: PathBuf,
    pending: RefCell<Option<Vec<u8>>>,
    written: RefCell<Option<Vec<u8>>>,
    /// Held across each write, so `flush` waits for one in progress.
    turn: smol::lock::Mutex<()>,
    reporter: Reporter,
}

/// A coalescing background writer for one file.
#[derive(Clone)]
pub(crate) struct Coalescing {
    shared: Rc<Shared>,
    wake: Sender<()>,
}

impl Coalescing {
    /// The writer and its task (spawn it; it ends when every handle is dropped).
    pub fn new(
        path: PathBuf,
        debounce: Duration,
        reporter: Reporter,
    ) -> (Coalescing, impl Future<Output = ()>) {
        let (wake, woken) = channel::bounded(1);
        let shared = Rc::new(Shared {
            path,
            pending: RefCell::new(None),
            written: RefCell::new(None),
            turn: smol::lock::Mutex::new(()),
            reporter,
        });
        let task = background(shared.clone(), woken, debounce);
        (Coalescing { shared, wake }, task)
    }

    /// Stores `value` as the newest; never waits.
    pub fn set<T: Serialize + ?Sized>(&self, value: &T) {
        match serde_json::to_vec_pretty(value) {
            Ok(mut bytes) => {
                bytes.push(b'\n');
                *self.shared.pending.borrow_mut() = Some(bytes);
                // Full means a wake-up is queued already: coalesced.
                let _ = self.wake.try_send(());
            }
            Err(e) => log::error!("cannot serialise {}: {e}", self.shared.path.display()),
        }
    }

    /// Writes the pending value now, after any write in progress; true
    /// once every value set before the call is on disk (false: the write
    /// failed, logged and journalled; it is retried with the next one).
    pub async fn flush(&self) -> bool {
        write_pending(&self.shared).await
    }
}

async fn background(shared: Rc<Shared>, woken: Receiver<()>, debounce: Duration) {
    while woken.recv().await.is_ok() {
        if !debounce.is_zero() {
            Timer::after(debounce).await;
        }
        let _ = write_pending(&shared).await;
    }
}

/// Writes what is pending; true if it is on disk (or nothing was: values
/// are taken only under `turn`, so one taken by another writer is written
/// by the time we get it, or put back if that write failed).
async fn write_pending(shared: &Shared) -> bool {
    let _turn = shared.turn.lock().await;
    let Some(bytes) = shared.pending.borrow_mut().take() else {
        return true;
    };
    if shared.written.borrow().as_deref() == Some(&bytes[..]) {
        return true;
    }
    match offload::write_bytes_atomic(&shared.path, bytes.clone()).await {
        Ok(()) => {
            *shared.written.borrow_mut() = Some(bytes);
            true
        }
        Err(e) => {
            log::error!("saving state: {e}");
            shared.reporter.fail(
                FailureKind::State,
                file_name(&shared.path),
                None,
                "state write failed",
            );
            // Retry with the next `set` or flush, unless a newer value came.
            shared.pending.borrow_mut().get_or_insert(bytes);
            false
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Which seq may be saved for a resume (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct SeqFloor {
    generation: u64,
    consumed: Option<u64>,
    inflight: BTreeMap<u64, usize>,
}

/// A message being handled: hand it back to [`SeqFloor::end`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SeqTicket {
    generation: u64,
    seq: u64,
}

impl SeqFloor {
    /// A dispatch was consumed.
    pub fn consumed(&mut self, seq: u64) {
        self.consumed = Some(self.consumed.map_or(seq, |c| c.max(seq)));
    }

    /// READY: a new session, sequence numbers start again.
    pub fn new_session(&mut self, ready_seq: u64) {
        self.generation += 1;
        self.inflight.clear();
        self.consumed = Some(ready_seq);
    }

    pub fn begin(&mut self, seq: u64) -> SeqTicket {
        *self.inflight.entry(seq).or_default() += 1;
        SeqTicket {
            generation: self.generation,
            seq,
        }
    }

    pub fn end(&mut self, ticket: SeqTicket) {
        if ticket.generation != self.generation {
            return;
        }
        if let Some(count) = self.inflight.get_mut(&ticket.seq) {
            *count -= 1;
            if *count == 0 {
                self.inflight.remove(&ticket.seq);
            }
        }
    }

    /// The highest seq whose dispatch, and all before it, are done.
    pub fn safe_seq(&self) -> Option<u64> {
        match self.inflight.keys().next() {
            Some(&oldest) => Some(oldest.saturating_sub(1)),
            None => self.consumed,
        }
    }

    /// The shard's state with its seq lowered to [`Self::safe_seq`].
    pub fn state_to_save(&self, mut state: SessionState) -> SessionState {
        if let (Some(session), Some(safe)) = (state.session.as_mut(), self.safe_seq()) {
            session.seq = session.seq.min(safe);
        }
        state
    }
}

/// How stale the seq in `session.json` may get while only the seq moves.
///
/// A stale seq is safe: a resume replays everything after the saved seq,
/// and the bridge drops replays of messages it already processed (the
/// processed-ids map), while [`SeqFloor`] keeps the saved seq below any
/// message still in flight — so an older seq costs replay volume, never a
/// lost or doubled reply. The seq is written with every change of the
/// session itself (READY, RESUMED), when the connection drops and at
/// shutdown; this bound only matters after a crash (no final save), where
/// it caps what Discord must replay at a few minutes of traffic. An idle
/// bot's seq does not move, so it writes nothing.
pub const SESSION_SEQ_MAX_AGE: Duration = Duration::from_secs(300);

/// Why a save of session and status is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SaveReason {
    /// A heartbeat ACK: the periodic chance to save a moved seq.
    Beat,
    /// READY or RESUMED: the session changed.
    SessionStarted,
    /// The connection dropped (the shard reconnects).
    Disconnected,
    /// The bridge is stopping.
    Shutdown,
}

/// The session and status writers, and when each is worth a write.
pub(crate) struct SessionAndStatus {
    session: Coalescing,
    status: Coalescing,
    /// Whether `status.sock` answers health checks; if not, `status.json`
    /// is their only source and is written every heartbeat as before.
    status_live: bool,
    /// What was last handed to the session writer, and when.
    session_saved: RefCell<Option<SessionState>>,
    session_saved_at: Cell<Option<Instant>>,
}

impl SessionAndStatus {
    pub fn new(session: Coalescing, status: Coalescing, status_live: bool) -> SessionAndStatus {
        SessionAndStatus {
            session,
            status,
            status_live,
            session_saved: RefCell::new(None),
            session_saved_at: Cell::new(None),
        }
    }

    /// Saves what changed enough to be worth a write for `reason`: the
    /// session when anything but its seq changed, or its seq after
    /// [`SESSION_SEQ_MAX_AGE`], or always outside heartbeats; the status
    /// outside heartbeats, or every heartbeat without the live socket.
    pub fn save(
        &self,
        reason: SaveReason,
        session: SessionState,
        status: impl FnOnce() -> StatusSnapshot,
    ) {
        if self.session_due(reason, &session, Instant::now()) {
            self.session.set(&session);
        }
        if reason != SaveReason::Beat || !self.status_live {
            self.status.set(&status());
        }
    }

    /// Whether `session` is worth writing now (and if so, remembers it as
    /// written).
    fn session_due(&self, reason: SaveReason, session: &SessionState, now: Instant) -> bool {
        let mut saved = self.session_saved.borrow_mut();
        let Some(last) = saved.as_ref() else {
            *saved = Some(session.clone());
            self.session_saved_at.set(Some(now));
            return true;
        };
        if last == session {
            return false;
        }
        let only_seq_moved = {
            let mut with_old_seq = session.clone();
            if let (Some(new), Some(old)) = (with_old_seq.session.as_mut(), last.session.as_ref()) {
                new.seq = old.seq;
            }
            &with_old_seq == last
        };
        let stale = self
            .session_saved_at
            .get()
            .is_none_or(|at| now.saturating_duration_since(at) >= SESSION_SEQ_MAX_AGE);
        let due = reason != SaveReason::Beat || !only_seq_moved || stale;
        if due {
            *saved = Some(session.clone());
            self.session_saved_at.set(Some(now));
        }
        due
    }

    /// Writes what is pending now (shutdown).
    pub async fn flush(&self) {
        self.session.flush().await;
        self.status.flush().await;
    }

    /// Writes the session handed to [`SessionAndStatus::save`] now and
    /// waits: true once it is on disk (a session start must not wait for a
    /// heartbeat to be resumable).
    pub async fn flush_session(&self) -> bool {
        self.session.flush().await
    }
}

/// `state_dir/session.json`.
pub fn session_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SESSION_FILE)
}

/// Session state saved by a previous run (for `ShardConfig.state`); the
/// default when there is none or it is unreadable (logged).
pub async fn load_session_state(state_dir: &Path) -> SessionState {
    match offload::read_json(&session_path(state_dir), Fallback::None).await {
        Ok(Some(state)) => state,
        Ok(None) => SessionState::default(),
        Err(e) => {
            log::warn!("{e}; starting without a session to resume (a fresh identify)");
            SessionState::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::counters::BridgeCounters;
    use crate::recorder::Recorder;
    use crate::shard::Session;

    #[test]
    fn seq_floor_stays_before_unfinished_messages() {
        let mut floor = SeqFloor::default();
        floor.new_session(1);
        assert_eq!(floor.safe_seq(), Some(1));
        floor.consumed(2);
        let a = floor.begin(3);
        floor.consumed(3);
        let b = floor.begin(4);
        floor.consumed(4);
        floor.consumed(5);
        assert_eq!(floor.safe_seq(), Some(2));
        floor.end(b);
        assert_eq!(floor.safe_seq(), Some(2));
        floor.end(a);
        assert_eq!(floor.safe_seq(), Some(5));
        // A ticket from an old session does not touch the new one.
        let old = floor.begin(6);
        floor.new_session(1);
        let c = floor.begin(2);
        floor.end(old);
        assert_eq!(floor.safe_seq(), Some(1));
        floor.end(c);
        assert_eq!(floor.safe_seq(), Some(1));

        let state = SessionState {
            session: Some(Session {
                session_id: "s".into(),
                seq: 9,
                resume_gateway_url: "ws://x".into(),
            }),
            ..SessionState::default()
        };
        let _held = floor.begin(4);
        assert_eq!(floor.state_to_save(state.clone()).session.unwrap().seq, 3);
        let fresh = SeqFloor::default();
        assert_eq!(fresh.state_to_save(state).session.unwrap().seq, 9);
    }

    #[test]
    fn session_is_saved_when_it_changes_and_its_seq_only_now_and_then() {
        let dir = tempfile::tempdir().unwrap();
        let reporter = Reporter::new(Recorder::disabled(), BridgeCounters::default());
        let (session, _) = Coalescing::new(dir.path().join("s"), Duration::ZERO, reporter.clone());
        let (status, _) = Coalescing::new(dir.path().join("t"), Duration::ZERO, reporter);
        let saves = SessionAndStatus::new(session, status, true);
        let state = |id: &str, seq| SessionState {
            session: Some(Session {
                session_id: id.into(),
                seq,
                resume_gateway_url: "ws://x".into(),
            }),
            ..SessionState::default()
        };
        let t0 = Instant::now();
        let due =
            |reason, s: &SessionState, after: Duration| saves.session_due(reason, s, t0 + after);
        assert!(due(
            SaveReason::SessionStarted,
            &state("a", 1),
            Duration::ZERO
        ));
        // Beats with nothing new, then with only the seq moved: no write...
        assert!(!due(
            SaveReason::Beat,
            &state("a", 1),
            Duration::from_secs(41)
        ));
        assert!(!due(
            SaveReason::Beat,
            &state("a", 9),
            Duration::from_secs(82)
        ));
        // ...until the saved one is SESSION_SEQ_MAX_AGE old.
        assert!(due(SaveReason::Beat, &state("a", 9), SESSION_SEQ_MAX_AGE));
        assert!(!due(
            SaveReason::Beat,
            &state("a", 12),
            SESSION_SEQ_MAX_AGE * 3 / 2
        ));
        // A moved seq is saved at once when the connection drops or at shutdown.
        assert!(due(
            SaveReason::Disconnected,
            &state("a", 12),
            SESSION_SEQ_MAX_AGE * 3 / 2
        ));
        assert!(!due(
            SaveReason::Shutdown,
            &state("a", 12),
            SESSION_SEQ_MAX_AGE * 2
        ));
        // A new session is saved at once, even on a beat.
        assert!(due(
            SaveReason::Beat,
            &state("b", 1),
            SESSION_SEQ_MAX_AGE * 2
        ));
    }

    #[test]
    fn coalescing_writer_writes_the_newest_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.json");
        let reporter = Reporter::new(Recorder::disabled(), BridgeCounters::default());
        let ex = smol::LocalExecutor::new();
        smol::block_on(ex.run(async {
            let (writer, task) = Coalescing::new(path.clone(), Duration::from_millis(20), reporter);
            ex.spawn(task).detach();
            for n in 0..100 {
                writer.set(&n);
            }
            // Bounded wait for the debounced write.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            loop {
                if let Ok(Some(99)) = offload::read_json::<u32>(&path, Fallback::None).await {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "never written");
                Timer::after(Duration::from_millis(10)).await;
            }
            writer.set(&100);
            writer.flush().await;
            assert_eq!(
                offload::read_json::<u32>(&path, Fallback::None)
                    .await
                    .unwrap(),
                Some(100)
            );
        }));
    }

    #[test]
    fn session_state_missing_or_corrupt_is_default() {
        let dir = tempfile::tempdir().unwrap();
        smol::block_on(async {
            assert_eq!(
                load_session_state(dir.path()).await,
                SessionState::default()
            );
            offload::write_bytes_atomic(&session_path(dir.path()), b"{".to_vec())
                .await
                .unwrap();
            assert_eq!(
                load_session_state(dir.path()).await,
                SessionState::default()
            );
        });
    }
}
