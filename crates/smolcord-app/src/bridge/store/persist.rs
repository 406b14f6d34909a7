//! Background state writes, off the message path.
//!
//! [`Coalescing`] owns one JSON file: `set` stores the newest value and
//! wakes a background task, and returns at once; the task writes through
//! offload, optionally after a debounce, and skips a value already on disk.
//! A slow disk therefore makes writes coalesce, never makes a message wait.
//! `flush` is for shutdown (awaited, bounded by the caller). [`Deferred`]
//! is the same for a file too large to serialise per change (the channel
//! directory): a change only marks it, and the snapshot taken at write
//! time is serialised on the blocking pool.
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

use crate::bridge::report::reporter::Reporter;
use crate::recorder::FailureKind;
use crate::status::StatusSnapshot;
use serde::{Deserialize, Serialize};
use smol::channel::{self, Receiver, Sender};
use smolcord::offload::{self, Fallback};
use smolcord::rt::Timer;
use smolcord::shard::SessionState;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::RangeInclusive;
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

/// A background writer for one large file (the channel directory) whose
/// value changes with most events of a burst: the owner only marks it
/// changed ([`Deferred::mark`], O(1)); once the debounce is over the writer
/// takes a snapshot (cheap by design: the directory shares its parts with
/// it) and serialises and writes it on the blocking pool, in one trip. So
/// serialisation happens once per write, never per event, and never on the
/// event loop.
pub(crate) struct Deferred<T> {
    shared: Rc<DeferredShared<T>>,
    wake: Sender<()>,
}

struct DeferredShared<T> {
    path: PathBuf,
    snapshot: Box<dyn Fn() -> T>,
    /// Changed since the last snapshot was taken for a write.
    dirty: Cell<bool>,
    /// Held across each write, so `flush` waits for one in progress.
    turn: smol::lock::Mutex<()>,
    reporter: Reporter,
}

impl<T: Serialize + Send + 'static> Deferred<T> {
    /// The writer and its task (spawn it; it ends when the writer is
    /// dropped). `snapshot` is called on the loop, once per write.
    pub fn new(
        path: PathBuf,
        debounce: Duration,
        reporter: Reporter,
        snapshot: impl Fn() -> T + 'static,
    ) -> (Deferred<T>, impl Future<Output = ()>) {
        let (wake, woken) = channel::bounded(1);
        let shared = Rc::new(DeferredShared {
            path,
            snapshot: Box::new(snapshot),
            dirty: Cell::new(false),
            turn: smol::lock::Mutex::new(()),
            reporter,
        });
        let task = deferred_background(shared.clone(), woken, debounce);
        (Deferred { shared, wake }, task)
    }

    /// The value changed; never waits, costs nothing more while a write
    /// is already due.
    pub fn mark(&self) {
        self.shared.dirty.set(true);
        // Full means a wake-up is queued already: coalesced.
        let _ = self.wake.try_send(());
    }

    /// Writes the current value now if it changed, after any write in
    /// progress; true once it is on disk (false: the write failed, logged
    /// and journalled; it is retried with the next mark or flush).
    pub async fn flush(&self) -> bool {
        write_if_dirty(&self.shared).await
    }
}

async fn deferred_background<T: Serialize + Send + 'static>(
    shared: Rc<DeferredShared<T>>,
    woken: Receiver<()>,
    debounce: Duration,
) {
    while woken.recv().await.is_ok() {
        if !debounce.is_zero() {
            Timer::after(debounce).await;
        }
        let _ = write_if_dirty(&shared).await;
    }
}

async fn write_if_dirty<T: Serialize + Send + 'static>(shared: &DeferredShared<T>) -> bool {
    let _turn = shared.turn.lock().await;
    if !shared.dirty.replace(false) {
        return true;
    }
    let value = (shared.snapshot)();
    match offload::write_json_atomic_owned(&shared.path, value).await {
        Ok(()) => true,
        Err(e) => {
            log::error!("saving state: {e}");
            shared.reporter.fail(
                FailureKind::State,
                file_name(&shared.path),
                None,
                "state write failed",
            );
            shared.dirty.set(true);
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

/// Which seq may be saved for a resume (see the module doc), per shard:
/// each shard numbers its own dispatches.
#[derive(Debug, Default)]
pub(crate) struct SeqFloor {
    shards: BTreeMap<u32, ShardFloor>,
}

#[derive(Debug, Default)]
struct ShardFloor {
    generation: u64,
    consumed: Option<u64>,
    inflight: BTreeMap<u64, usize>,
}

/// A message being handled: hand it back to [`SeqFloor::end`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SeqTicket {
    shard: u32,
    generation: u64,
    seq: u64,
}

impl SeqFloor {
    /// A dispatch of `shard` was consumed.
    pub fn consumed(&mut self, shard: u32, seq: u64) {
        let floor = self.shards.entry(shard).or_default();
        floor.consumed = Some(floor.consumed.map_or(seq, |c| c.max(seq)));
    }

    /// READY on `shard`: a new session, sequence numbers start again.
    pub fn new_session(&mut self, shard: u32, ready_seq: u64) {
        let floor = self.shards.entry(shard).or_default();
        floor.generation += 1;
        floor.inflight.clear();
        floor.consumed = Some(ready_seq);
    }

    pub fn begin(&mut self, shard: u32, seq: u64) -> SeqTicket {
        let floor = self.shards.entry(shard).or_default();
        *floor.inflight.entry(seq).or_default() += 1;
        SeqTicket {
            shard,
            generation: floor.generation,
            seq,
        }
    }

    pub fn end(&mut self, ticket: SeqTicket) {
        let Some(floor) = self.shards.get_mut(&ticket.shard) else {
            return;
        };
        if ticket.generation != floor.generation {
            return;
        }
        if let Some(count) = floor.inflight.get_mut(&ticket.seq) {
            *count -= 1;
            if *count == 0 {
                floor.inflight.remove(&ticket.seq);
            }
        }
    }

    /// The highest seq of `shard` whose dispatch, and all before it, are
    /// done.
    pub fn safe_seq(&self, shard: u32) -> Option<u64> {
        let floor = self.shards.get(&shard)?;
        match floor.inflight.keys().next() {
            Some(&oldest) => Some(oldest.saturating_sub(1)),
            None => floor.consumed,
        }
    }

    /// `shard`'s state with its seq lowered to [`Self::safe_seq`].
    pub fn state_to_save(&self, shard: u32, mut state: SessionState) -> SessionState {
        if let (Some(session), Some(safe)) = (state.session.as_mut(), self.safe_seq(shard)) {
            session.seq = session.seq.min(safe);
        }
        state
    }
}

/// What `session.json` holds: one shard's state (the form every
/// single-shard process writes, as before shard sets), or, for a process
/// running a range of shards, each one's state by shard id with the shard
/// count they were made for.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SessionFile {
    /// Shards `first..=last` of `count`.
    Set {
        /// The bot's shard count when these sessions began.
        count: u32,
        /// Each shard's state.
        shards: BTreeMap<u32, SessionState>,
    },
    /// A single-shard process.
    One(SessionState),
}

impl<'de> Deserialize<'de> for SessionFile {
    /// The set form has `shards`; anything else is one shard's state.
    /// (Not serde's `untagged`: it cannot read the shard ids, JSON object
    /// keys, as numbers.)
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Set {
            count: u32,
            shards: BTreeMap<u32, SessionState>,
        }
        let value = serde_json::Value::deserialize(deserializer)?;
        let file = if value.get("shards").is_some() {
            serde_json::from_value::<Set>(value).map(|set| SessionFile::Set {
                count: set.count,
                shards: set.shards,
            })
        } else {
            serde_json::from_value(value).map(SessionFile::One)
        };
        file.map_err(serde::de::Error::custom)
    }
}

impl SessionFile {
    /// The file for `states` (one entry: the single-shard form).
    pub fn new(count: u32, states: BTreeMap<u32, SessionState>) -> SessionFile {
        if states.len() == 1 {
            if let Some(state) = states.into_values().next() {
                return SessionFile::One(state);
            }
            unreachable!("one entry");
        }
        SessionFile::Set {
            count,
            shards: states,
        }
    }

    /// Each of shards `ids` (of `count`) gets its saved state. Sessions
    /// made for another shard count, or a single-shard file read by a
    /// process running several, are not resumed (they would bring back
    /// another shard's events); their identify history is kept for every
    /// shard (one daily budget per bot).
    pub fn states_for(self, ids: RangeInclusive<u32>, count: u32) -> BTreeMap<u32, SessionState> {
        let single = ids.start() == ids.end();
        let (mut kept, dropped): (BTreeMap<u32, SessionState>, Vec<SessionState>) = match self {
            SessionFile::One(state) if single => ([(*ids.start(), state)].into(), Vec::new()),
            SessionFile::One(state) => (BTreeMap::new(), vec![state]),
            SessionFile::Set { count: c, shards } if c == count => {
                let (kept, other) = shards.into_iter().partition(|(id, _)| ids.contains(id));
                (kept, other.into_values().collect())
            }
            SessionFile::Set { shards, .. } => (BTreeMap::new(), shards.into_values().collect()),
        };
        if dropped.iter().any(|state| state.session.is_some()) && kept.is_empty() {
            log::info!(
                "session.json holds sessions of another shard layout; shards {ids:?} of {count} start fresh sessions"
            );
        }
        for id in ids {
            let state = kept.entry(id).or_default();
            for other in &dropped {
                state.identifies.merge(&other.identifies);
            }
        }
        kept
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
    session_saved: RefCell<Option<SessionFile>>,
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
        session: SessionFile,
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
    fn session_due(&self, reason: SaveReason, session: &SessionFile, now: Instant) -> bool {
        let mut saved = self.session_saved.borrow_mut();
        let Some(last) = saved.as_ref() else {
            *saved = Some(session.clone());
            self.session_saved_at.set(Some(now));
            return true;
        };
        if last == session {
            return false;
        }
        let only_seq_moved = session.with_seqs_of(last) == *last;
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

impl SessionFile {
    /// A copy with each shard's seq taken from `other` (to tell a change of
    /// seq alone from a change of session).
    fn with_seqs_of(&self, other: &SessionFile) -> SessionFile {
        let mut copy = self.clone();
        for (id, state) in copy.states_mut() {
            let old_seq = other
                .state(id)
                .and_then(|old| old.session.as_ref())
                .map(|s| s.seq);
            if let (Some(session), Some(seq)) = (state.session.as_mut(), old_seq) {
                session.seq = seq;
            }
        }
        copy
    }

    fn state(&self, id: Option<u32>) -> Option<&SessionState> {
        match (self, id) {
            (SessionFile::One(state), None) => Some(state),
            (SessionFile::Set { shards, .. }, Some(id)) => shards.get(&id),
            _ => None,
        }
    }

    fn states_mut(&mut self) -> Vec<(Option<u32>, &mut SessionState)> {
        match self {
            SessionFile::One(state) => vec![(None, state)],
            SessionFile::Set { shards, .. } => {
                shards.iter_mut().map(|(id, s)| (Some(*id), s)).collect()
            }
        }
    }
}

/// `state_dir/session.json`.
pub fn session_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SESSION_FILE)
}

/// What a previous run saved in `session.json`; `None` when there is none
/// or it is unreadable (logged).
pub async fn load_session_file(state_dir: &Path) -> Option<SessionFile> {
    match offload::read_json(&session_path(state_dir), Fallback::None).await {
        Ok(file) => file,
        Err(e) => {
            log::warn!("{e}; starting without a session to resume (a fresh identify)");
            None
        }
    }
}

/// The saved state of each of shards `ids` of `count` (for
/// [`smolcord::shard::ShardSet::new`]).
pub async fn load_session_states(
    state_dir: &Path,
    ids: RangeInclusive<u32>,
    count: u32,
) -> BTreeMap<u32, SessionState> {
    load_session_file(state_dir)
        .await
        .map(|file| file.states_for(ids.clone(), count))
        .unwrap_or_else(|| ids.map(|id| (id, SessionState::default())).collect())
}

/// Session state saved by a single-shard run (for `ShardConfig.state`).
pub async fn load_session_state(state_dir: &Path) -> SessionState {
    match load_session_file(state_dir).await {
        Some(SessionFile::One(state)) => state,
        Some(file) => file.states_for(0..=0, 1).remove(&0).unwrap_or_default(),
        None => SessionState::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::report::counters::BridgeCounters;
    use crate::recorder::Recorder;
    use smolcord::shard::{IdentifyBudget, Session};

    #[test]
    fn seq_floor_stays_before_unfinished_messages() {
        let mut floor = SeqFloor::default();
        floor.new_session(0, 1);
        assert_eq!(floor.safe_seq(0), Some(1));
        floor.consumed(0, 2);
        let a = floor.begin(0, 3);
        floor.consumed(0, 3);
        let b = floor.begin(0, 4);
        floor.consumed(0, 4);
        floor.consumed(0, 5);
        assert_eq!(floor.safe_seq(0), Some(2));
        floor.end(b);
        assert_eq!(floor.safe_seq(0), Some(2));
        floor.end(a);
        assert_eq!(floor.safe_seq(0), Some(5));
        // A ticket from an old session does not touch the new one.
        let old = floor.begin(0, 6);
        floor.new_session(0, 1);
        let c = floor.begin(0, 2);
        floor.end(old);
        assert_eq!(floor.safe_seq(0), Some(1));
        floor.end(c);
        assert_eq!(floor.safe_seq(0), Some(1));

        let state = SessionState {
            session: Some(Session {
                session_id: "s".into(),
                seq: 9,
                resume_gateway_url: "ws://x".into(),
            }),
            ..SessionState::default()
        };
        let _held = floor.begin(0, 4);
        assert_eq!(
            floor.state_to_save(0, state.clone()).session.unwrap().seq,
            3
        );
        let fresh = SeqFloor::default();
        assert_eq!(fresh.state_to_save(0, state).session.unwrap().seq, 9);
    }

    #[test]
    fn each_shard_has_its_own_floor() {
        let mut floor = SeqFloor::default();
        floor.new_session(0, 1);
        floor.new_session(3, 1);
        let held = floor.begin(3, 5);
        floor.consumed(0, 9);
        floor.consumed(3, 7);
        assert_eq!(floor.safe_seq(0), Some(9));
        assert_eq!(floor.safe_seq(3), Some(4));
        floor.end(held);
        assert_eq!(floor.safe_seq(3), Some(7));
        assert_eq!(floor.safe_seq(1), None);
    }

    fn resumable(id: &str) -> SessionState {
        SessionState {
            session: Some(Session {
                session_id: id.into(),
                seq: 5,
                resume_gateway_url: "wss://x".into(),
            }),
            ..SessionState::default()
        }
    }

    #[test]
    fn a_single_shard_writes_the_single_shard_form() {
        let one = SessionFile::new(4, [(2, resumable("a"))].into());
        let json = serde_json::to_value(&one).unwrap();
        assert_eq!(json["session"]["session_id"], "a", "{json}");
        let back: SessionFile = serde_json::from_value(json).unwrap();
        assert_eq!(back.states_for(2..=2, 4)[&2], resumable("a"));
    }

    #[test]
    fn a_set_keeps_each_shards_session_for_the_same_layout_only() {
        let mut history = IdentifyBudget::default();
        history.record(1_000);
        let mut first = resumable("a");
        first.identifies = history.clone();
        // A session timeline too: serde's `untagged` could not read it back.
        first
            .history
            .started(smolcord::shard::history::StartKind::Identify, 1_000);
        first.history.established(1_100);
        let set = SessionFile::new(4, [(0, first), (1, resumable("b"))].into());
        let json = serde_json::to_string(&set).unwrap();
        let back: SessionFile = serde_json::from_str(&json).unwrap();
        let states = back.clone().states_for(0..=1, 4);
        assert_eq!(states[&1], resumable("b"));
        // Another shard count: no session resumed, the identify history kept.
        let states = back.clone().states_for(0..=3, 8);
        assert_eq!(states.len(), 4);
        assert!(states.values().all(|s| s.session.is_none()));
        assert!(states.values().all(|s| s.identifies == history));
        // A single-shard file read by a process running several shards.
        let states = SessionFile::One(resumable("c")).states_for(0..=1, 2);
        assert!(states.values().all(|s| s.session.is_none()));
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
        let due = |reason, s: &SessionState, after: Duration| {
            saves.session_due(reason, &SessionFile::One(s.clone()), t0 + after)
        };
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
    fn deferred_writer_takes_one_snapshot_per_write_not_per_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.json");
        let reporter = Reporter::new(Recorder::disabled(), BridgeCounters::default());
        let value = Rc::new(Cell::new(0u32));
        let snapshots = Rc::new(Cell::new(0u32));
        let ex = smol::LocalExecutor::new();
        smol::block_on(ex.run(async {
            let (writer, task) = {
                let (value, snapshots) = (value.clone(), snapshots.clone());
                Deferred::new(
                    path.clone(),
                    Duration::from_millis(20),
                    reporter,
                    move || {
                        snapshots.set(snapshots.get() + 1);
                        value.get()
                    },
                )
            };
            ex.spawn(task).detach();
            for n in 1..=10_000 {
                value.set(n);
                writer.mark();
            }
            assert_eq!(snapshots.get(), 0, "nothing taken while changes come");
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            loop {
                if let Ok(Some(10_000)) = offload::read_json::<u32>(&path, Fallback::None).await {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "never written");
                Timer::after(Duration::from_millis(10)).await;
            }
            assert_eq!(snapshots.get(), 1, "one write, one snapshot");
            // Nothing changed: a flush writes nothing.
            assert!(writer.flush().await);
            assert_eq!(snapshots.get(), 1);
            value.set(7);
            writer.mark();
            assert!(writer.flush().await);
            assert_eq!(
                offload::read_json::<u32>(&path, Fallback::None)
                    .await
                    .unwrap(),
                Some(7)
            );
            assert_eq!(snapshots.get(), 2);
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
