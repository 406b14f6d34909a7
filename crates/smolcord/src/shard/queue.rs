//! The bounded queue between the shard's driver and its consumer.
//!
//! Dispatches are admitted while the queue holds fewer than `max_events`
//! and their text totals at most `max_bytes` (one dispatch always fits in
//! an empty queue, however large, so a big GUILD_CREATE cannot wedge it).
//! When a dispatch does not fit, the driver keeps it aside and stops reading
//! the socket until the consumer makes room: a slow consumer slows the
//! reader, it never grows memory. Heartbeat records, disconnect notices and
//! the final error bypass the budget (a handful per connection), so the
//! consumer still hears of them while it is behind, up to a small cap.
//!
//! The shards of a [`super::ShardSet`] share one queue (each item tagged
//! with its shard), so the budget holds for the whole set: more shards never
//! mean more memory waiting for the consumer.

use super::EventItem;
use event_listener::Event;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Non-dispatch events kept beyond the dispatch budget; older ones beyond
/// this are dropped (they are reports, not data) — except a shard's final
/// error, which is never dropped: it is the one notice a consumer must act
/// on, and each shard sends at most one, so they add at most one per shard.
const MAX_NOTICES: usize = 16;

/// How much the queue may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// Dispatches queued at most.
    pub max_events: usize,
    /// Total payload bytes of queued dispatches at most.
    pub max_bytes: usize,
}

impl Default for QueueLimits {
    /// 64 events or 256 KiB: enough to hand the consumer a batch per turn
    /// of the loop (the driver yields after 64 frames), small enough that a
    /// burst costs a few hundred KiB at most.
    fn default() -> QueueLimits {
        QueueLimits {
            max_events: 64,
            max_bytes: 256 * 1024,
        }
    }
}

struct Entry {
    shard: u32,
    item: EventItem,
    /// Payload bytes counted against `max_bytes` (0 for notices).
    bytes: usize,
    /// A dispatch (counted) or a notice.
    dispatch: bool,
}

struct State {
    entries: VecDeque<Entry>,
    dispatches: usize,
    bytes: usize,
    notices: usize,
    /// Producers alive; the queue closes when the last one goes.
    producers: usize,
}

struct Shared {
    limits: QueueLimits,
    state: Mutex<State>,
    /// Something was queued (or the queue closed).
    pushed: Event,
    /// Something was taken: room may have appeared.
    taken: Event,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the state consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fits(&self, state: &State, bytes: usize) -> bool {
        state.dispatches == 0
            || (state.dispatches < self.limits.max_events
                && state.bytes + bytes <= self.limits.max_bytes)
    }
}

/// A driver's side, tagging what it queues with its shard.
pub(crate) struct Producer {
    shared: Arc<Shared>,
    shard: u32,
}

/// The consumer's side (cloned into every [`super::ShardHandle`]).
#[derive(Clone)]
pub(crate) struct Consumer {
    shared: Arc<Shared>,
}

/// A queue and the producer for `shard` (more with [`Producer::for_shard`]).
pub(crate) fn queue(limits: QueueLimits, shard: u32) -> (Producer, Consumer) {
    let shared = Arc::new(Shared {
        limits: QueueLimits {
            max_events: limits.max_events.max(1),
            max_bytes: limits.max_bytes,
        },
        state: Mutex::new(State {
            entries: VecDeque::new(),
            dispatches: 0,
            bytes: 0,
            notices: 0,
            producers: 1,
        }),
        pushed: Event::new(),
        taken: Event::new(),
    });
    (
        Producer {
            shared: shared.clone(),
            shard,
        },
        Consumer { shared },
    )
}

impl Producer {
    /// Another producer on the same queue, for `shard`.
    pub(crate) fn for_shard(&self, shard: u32) -> Producer {
        self.shared.lock().producers += 1;
        Producer {
            shared: self.shared.clone(),
            shard,
        }
    }

    /// Queues a dispatch of `bytes` payload bytes if it fits; gives it back
    /// otherwise.
    pub(crate) fn try_push(&self, item: EventItem, bytes: usize) -> Result<(), EventItem> {
        let state = self.shared.lock();
        if !self.shared.fits(&state, bytes) {
            return Err(item);
        }
        self.push_locked(state, item, bytes);
        Ok(())
    }

    /// Queues a dispatch whether or not it fits: the one a driver held
    /// when it was told to stop, since a consumer that stopped reading
    /// never makes room and stopping must not wait on it. One per shard.
    pub(crate) fn push_over(&self, item: EventItem, bytes: usize) {
        self.push_locked(self.shared.lock(), item, bytes);
    }

    /// Appends a dispatch under the lock the caller checked room with.
    fn push_locked(&self, mut state: MutexGuard<'_, State>, item: EventItem, bytes: usize) {
        state.dispatches += 1;
        state.bytes += bytes;
        state.entries.push_back(Entry {
            shard: self.shard,
            item,
            bytes,
            dispatch: true,
        });
        drop(state);
        self.shared.pushed.notify(1);
    }

    /// Waits until a dispatch of `bytes` would fit.
    pub(crate) async fn room_for(&self, bytes: usize) {
        loop {
            let listener = self.shared.taken.listen();
            if self.shared.fits(&self.shared.lock(), bytes) {
                return;
            }
            listener.await;
        }
    }

    /// Queues a notice (heartbeat record, disconnect, final error) outside
    /// the dispatch budget; beyond [`MAX_NOTICES`] the oldest report goes
    /// (a final error is never dropped).
    pub(crate) fn push_notice(&self, item: EventItem) {
        let mut state = self.shared.lock();
        if state.notices >= MAX_NOTICES {
            let report = state
                .entries
                .iter()
                .position(|e| !e.dispatch && e.item.is_ok());
            if let Some(at) = report {
                state.entries.remove(at);
                state.notices -= 1;
            }
        }
        state.notices += 1;
        state.entries.push_back(Entry {
            shard: self.shard,
            item,
            bytes: 0,
            dispatch: false,
        });
        drop(state);
        self.shared.pushed.notify(1);
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.shared.lock().producers -= 1;
        self.shared.pushed.notify(usize::MAX);
    }
}

impl Consumer {
    /// The next event and its shard; `None` once every driver is gone and
    /// the queue is empty.
    pub(crate) async fn recv(&self) -> Option<(u32, EventItem)> {
        loop {
            let listener = self.shared.pushed.listen();
            if let Some(item) = self.try_recv() {
                return Some(item);
            }
            if self.shared.lock().producers == 0 {
                return None;
            }
            listener.await;
        }
    }

    fn try_recv(&self) -> Option<(u32, EventItem)> {
        let mut state = self.shared.lock();
        let entry = state.entries.pop_front()?;
        if entry.dispatch {
            state.dispatches -= 1;
            state.bytes -= entry.bytes;
        } else {
            state.notices -= 1;
        }
        drop(state);
        self.shared.taken.notify(1);
        Some((entry.shard, entry.item))
    }

    /// Dispatches queued now.
    pub(crate) fn queued(&self) -> usize {
        self.shared.lock().dispatches
    }
}

#[cfg(test)]
mod tests {
    use super::super::{ShardError, ShardEvent};
    use super::*;
    use futures_lite::future;

    fn notice() -> EventItem {
        Ok(ShardEvent::Disconnected {
            reason: "test".into(),
        })
    }

    fn limits(max_events: usize, max_bytes: usize) -> QueueLimits {
        QueueLimits {
            max_events,
            max_bytes,
        }
    }

    #[test]
    fn dispatches_are_bounded_by_count_and_bytes() {
        let (tx, rx) = queue(limits(2, 100), 0);
        assert!(tx.try_push(notice(), 60).is_ok());
        assert!(tx.try_push(notice(), 60).is_err(), "over the byte budget");
        assert!(tx.try_push(notice(), 40).is_ok());
        assert!(tx.try_push(notice(), 0).is_err(), "over the count");
        assert_eq!(rx.queued(), 2);
        let _ = future::block_on(rx.recv()).unwrap();
        assert!(tx.try_push(notice(), 61).is_err(), "40 + 61 > 100");
        assert!(tx.try_push(notice(), 60).is_ok(), "the 60 taken made room");
    }

    #[test]
    fn one_big_dispatch_fits_an_empty_queue() {
        let (tx, _rx) = queue(limits(4, 10), 0);
        assert!(tx.try_push(notice(), 1_000_000).is_ok());
        assert!(tx.try_push(notice(), 1).is_err());
    }

    #[test]
    fn room_for_waits_until_the_consumer_takes() {
        let (tx, rx) = queue(limits(1, 100), 0);
        tx.try_push(notice(), 10).unwrap();
        assert!(future::block_on(future::poll_once(tx.room_for(10))).is_none());
        let _ = future::block_on(rx.recv()).unwrap();
        assert!(future::block_on(future::poll_once(tx.room_for(10))).is_some());
    }

    #[test]
    fn notices_bypass_the_budget_but_are_capped() {
        let (tx, rx) = queue(limits(1, 100), 0);
        tx.try_push(notice(), 10).unwrap();
        for _ in 0..MAX_NOTICES * 3 {
            tx.push_notice(notice());
        }
        assert_eq!(rx.shared.lock().entries.len(), 1 + MAX_NOTICES);
    }

    #[test]
    fn a_final_error_is_never_dropped_for_later_notices() {
        let (tx, rx) = queue(limits(1, 100), 0);
        let fatal = ShardError::Fatal {
            code: 4010,
            message: "invalid shard on shard 0 of 1".into(),
        };
        tx.push_notice(Err(fatal.clone()));
        for _ in 0..MAX_NOTICES * 3 {
            tx.push_notice(notice());
        }
        let mut errors = Vec::new();
        while let Some(Some((_, item))) = future::block_on(future::poll_once(rx.recv())) {
            errors.extend(item.err());
        }
        assert_eq!(errors, [fatal]);
        // Notices stay bounded: the error and the newest reports.
        for _ in 0..MAX_NOTICES * 3 {
            tx.push_notice(notice());
        }
        assert_eq!(rx.shared.lock().entries.len(), MAX_NOTICES);
    }

    #[test]
    fn the_stream_ends_after_the_last_producer_and_the_queue_drain() {
        let (tx0, rx) = queue(QueueLimits::default(), 0);
        let tx7 = tx0.for_shard(7);
        tx7.try_push(notice(), 1).unwrap();
        tx0.push_notice(Err(ShardError::Stopped));
        drop(tx7);
        drop(tx0);
        let (shard, item) = future::block_on(rx.recv()).unwrap();
        assert_eq!((shard, item.is_ok()), (7, true));
        assert_eq!(future::block_on(rx.recv()).unwrap().0, 0);
        assert!(future::block_on(rx.recv()).is_none());
    }

    #[test]
    fn shards_share_one_budget() {
        let (tx0, rx) = queue(limits(2, 1000), 0);
        let tx1 = tx0.for_shard(1);
        tx0.try_push(notice(), 1).unwrap();
        tx1.try_push(notice(), 1).unwrap();
        assert!(tx0.try_push(notice(), 1).is_err());
        assert!(tx1.try_push(notice(), 1).is_err());
        assert_eq!(rx.queued(), 2);
    }
}
