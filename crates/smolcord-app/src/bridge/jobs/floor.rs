//! The sequence floor: one owner of "what is done". It holds the gateway
//! seq the session may be saved at ([`SeqFloor`]: the last dispatch
//! consumed, lowered to just before the oldest message still being
//! handled) and the jobs in flight ([`Inflight`]: what a shutdown waits
//! for, and names if it has to leave them). A message takes both when it
//! is queued; other jobs take only a place in flight. No borrow leaves a
//! method.

use crate::bridge::jobs::inflight::{Inflight, JobGuard};
use crate::bridge::store::persist::{SeqFloor, SeqTicket};
use smolcord::shard::SessionState;
use std::cell::RefCell;
use std::time::Instant;

/// The seq floor and the jobs in flight.
pub(crate) struct SequenceFloor {
    seqs: RefCell<SeqFloor>,
    inflight: Inflight,
}

impl SequenceFloor {
    pub fn new() -> SequenceFloor {
        SequenceFloor {
            seqs: RefCell::new(SeqFloor::default()),
            inflight: Inflight::new(),
        }
    }

    /// A dispatch of `shard` was consumed.
    pub fn consumed(&self, shard: u32, seq: u64) {
        self.seqs.borrow_mut().consumed(shard, seq);
    }

    /// READY on `shard`: a new session, sequence numbers start again.
    pub fn new_session(&self, shard: u32, ready_seq: u64) {
        self.seqs.borrow_mut().new_session(shard, ready_seq);
    }

    /// A message (dispatch `seq` of `shard`) is taken: its ticket holds
    /// the saved seq below it until [`SequenceFloor::end`], its guard keeps
    /// it in flight (described by `what`) until dropped.
    pub fn begin_message(&self, shard: u32, seq: u64, what: String) -> (SeqTicket, JobGuard) {
        let ticket = self.seqs.borrow_mut().begin(shard, seq);
        (ticket, self.inflight.begin(what))
    }

    /// The message of `ticket` is done (or dropped): the floor may pass it.
    pub fn end(&self, ticket: SeqTicket) {
        self.seqs.borrow_mut().end(ticket);
    }

    /// A job other than a gateway message (a delivery, a notice, a
    /// read-back gate) is in flight until the guard is dropped.
    pub fn begin_job(&self, what: String) -> JobGuard {
        self.inflight.begin(what)
    }

    /// `shard`'s state with its seq lowered to the floor.
    pub fn state_to_save(&self, shard: u32, state: SessionState) -> SessionState {
        self.seqs.borrow().state_to_save(shard, state)
    }

    /// Waits until nothing is in flight or `deadline`; returns what is left.
    pub async fn drain(&self, deadline: Instant) -> Vec<String> {
        self.inflight.drain(deadline).await
    }
}
