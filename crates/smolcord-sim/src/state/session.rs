//! Gateway sessions and their replay buffers.
//!
//! A session outlives its connection: after a disconnect (any close but
//! 1000/1001, or a TCP drop) it stays resumable for the resume window, and
//! dispatches sent to it meanwhile go into its replay buffer, so a Resume
//! gets exactly what it missed.

use serde_json::value::RawValue;
use smolcord::protocol::{Frame, Intents, OpCode};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// One identified session.
pub(crate) struct Session {
    pub(crate) id: String,
    /// The last sequence number assigned.
    pub(crate) seq: u64,
    /// `(seq, frame text)` of the most recent dispatches.
    buffer: VecDeque<(u64, String)>,
    capacity: usize,
    /// The connection currently serving the session.
    pub(crate) conn: Option<u64>,
    pub(crate) disconnected_at: Option<Instant>,
    pub(crate) intents: Intents,
    pub(crate) shard: [u32; 2],
    /// Identify asked for per-payload compression.
    pub(crate) payload_compress: bool,
}

/// Why a Resume cannot replay.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReplayError {
    /// The client claims a seq the session never reached (close 4007).
    Ahead,
    /// The dispatches after the client's seq left the buffer (op 9).
    TooOld,
}

impl Session {
    pub(crate) fn new(
        id: String,
        conn: u64,
        intents: Intents,
        shard: [u32; 2],
        capacity: usize,
    ) -> Session {
        Session {
            id,
            seq: 0,
            buffer: VecDeque::new(),
            capacity: capacity.max(1),
            conn: Some(conn),
            disconnected_at: None,
            intents,
            shard,
            payload_compress: false,
        }
    }

    /// Assigns the next sequence number to a dispatch, buffers it and
    /// returns `(seq, frame text)`.
    pub(crate) fn push(&mut self, event: &str, d: Box<RawValue>) -> (u64, String) {
        self.seq += 1;
        let frame = Frame::new(OpCode::Dispatch, Some(d), Some(self.seq), Some(event)).to_json();
        if self.buffer.len() == self.capacity {
            self.buffer.pop_front();
        }
        self.buffer.push_back((self.seq, frame.clone()));
        (self.seq, frame)
    }

    /// The frames of every dispatch after `seq`, in order.
    pub(crate) fn replay_after(&self, seq: u64) -> Result<Vec<String>, ReplayError> {
        if seq > self.seq {
            return Err(ReplayError::Ahead);
        }
        if seq == self.seq {
            return Ok(Vec::new());
        }
        match self.buffer.front() {
            Some((oldest, _)) if *oldest <= seq + 1 => Ok(self
                .buffer
                .iter()
                .filter(|(s, _)| *s > seq)
                .map(|(_, frame)| frame.clone())
                .collect()),
            _ => Err(ReplayError::TooOld),
        }
    }

    pub(crate) fn detach(&mut self, now: Instant) {
        self.conn = None;
        self.disconnected_at = Some(now);
    }

    fn expired(&self, now: Instant, window: Duration) -> bool {
        self.conn.is_none()
            && self
                .disconnected_at
                .is_some_and(|at| now.saturating_duration_since(at) > window)
    }
}

/// All live sessions, oldest first.
#[derive(Default)]
pub(crate) struct SessionStore {
    sessions: Vec<Session>,
}

impl SessionStore {
    /// Forgets sessions whose resume window has passed.
    pub(crate) fn expire(&mut self, now: Instant, window: Duration) {
        self.sessions.retain(|s| !s.expired(now, window));
    }

    /// Forgets every session no connection serves (as if their resume
    /// window had passed); returns how many.
    pub(crate) fn forget_detached(&mut self) -> usize {
        let before = self.sessions.len();
        self.sessions.retain(|s| s.conn.is_some());
        before - self.sessions.len()
    }

    pub(crate) fn insert(&mut self, session: Session) {
        self.sessions.push(session);
    }

    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.sessions.iter_mut().find(|s| s.id == id)
    }

    pub(crate) fn remove(&mut self, id: &str) {
        self.sessions.retain(|s| s.id != id);
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Session> {
        self.sessions.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn replays_exactly_what_came_after_seq() {
        let mut session = Session::new("s".into(), 1, Intents::empty(), [0, 1], 3);
        for n in 1..=5 {
            let (seq, _) = session.push("X", raw(&n.to_string()));
            assert_eq!(seq, n);
        }
        // Buffer holds 3, 4, 5.
        assert_eq!(session.replay_after(5).unwrap().len(), 0);
        let frames = session.replay_after(3).unwrap();
        assert_eq!(frames.len(), 2);
        assert!(frames[0].contains("\"s\":4"), "{}", frames[0]);
        assert_eq!(session.replay_after(2).unwrap().len(), 3);
        assert_eq!(session.replay_after(1), Err(ReplayError::TooOld));
        assert_eq!(session.replay_after(6), Err(ReplayError::Ahead));
    }

    #[test]
    fn expiry_needs_a_disconnect_and_the_window() {
        let now = Instant::now();
        let mut store = SessionStore::default();
        store.insert(Session::new("a".into(), 1, Intents::empty(), [0, 1], 8));
        store.insert(Session::new("b".into(), 2, Intents::empty(), [0, 1], 8));
        if let Some(b) = store.get_mut("b") {
            b.detach(now);
        }
        store.expire(now + Duration::from_secs(100), Duration::from_secs(90));
        assert!(store.get_mut("a").is_some());
        assert!(store.get_mut("b").is_none());
    }
}
