//! In-flight accounting: a fixed number of slots, taken synchronously by
//! `record()` and given back by the writer only when its blocking work has
//! finished (the [`Slot`] guard's drop).
//!
//! A plain mutex-guarded counter, not a semaphore: admission must never
//! wait, and shutdown needs "close the door, then wait until the room is
//! empty", which is a flag plus an [`Event`] fired when the count reaches zero.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_io::Timer;
use event_listener::Event;
use futures_lite::future;

/// Why a record was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// All slots are taken.
    Full,
    /// Shutdown has begun.
    Closed,
}

#[derive(Default)]
struct Counts {
    in_flight: usize,
    closed: bool,
}

/// The slots of one recorder.
pub(crate) struct Slots {
    capacity: usize,
    counts: Mutex<Counts>,
    /// Fired whenever the last slot is given back.
    idle: Event,
}

/// One taken slot; dropping it gives it back.
pub(crate) struct Slot {
    slots: Arc<Slots>,
}

impl Slots {
    pub(crate) fn new(capacity: usize) -> Arc<Slots> {
        Arc::new(Slots {
            capacity,
            counts: Mutex::new(Counts::default()),
            idle: Event::new(),
        })
    }

    // Held only to read or bump the counters: never across an await or I/O,
    // so a poisoned lock still holds consistent numbers.
    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a slot at once, or says why not.
    pub(crate) fn try_take(self: &Arc<Self>) -> Result<Slot, Refusal> {
        let mut counts = self.counts();
        if counts.closed {
            return Err(Refusal::Closed);
        }
        if counts.in_flight >= self.capacity {
            return Err(Refusal::Full);
        }
        counts.in_flight += 1;
        Ok(Slot {
            slots: Arc::clone(self),
        })
    }

    /// Refuses every later `try_take`.
    pub(crate) fn close(&self) {
        self.counts().closed = true;
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.counts().in_flight
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Waits until no slot is taken, for at most `bound`; returns how many
    /// are still taken (0 when it became idle).
    pub(crate) async fn wait_idle(&self, bound: Duration) -> usize {
        let give_up = Instant::now() + bound;
        loop {
            // Listen before looking, so a release in between is not missed.
            let listener = self.idle.listen();
            let in_flight = self.in_flight();
            if in_flight == 0 {
                return 0;
            }
            let woke = future::or(
                async {
                    listener.await;
                    true
                },
                async {
                    Timer::at(give_up).await;
                    false
                },
            )
            .await;
            if !woke {
                return self.in_flight();
            }
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let now_idle = {
            let mut counts = self.slots.counts();
            counts.in_flight = counts.in_flight.saturating_sub(1);
            counts.in_flight == 0
        };
        if now_idle {
            self.slots.idle.notify(usize::MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_bounded_given_back_on_drop_and_refused_after_close() {
        let slots = Slots::new(2);
        let a = slots.try_take().unwrap();
        let _b = slots.try_take().unwrap();
        assert_eq!(slots.try_take().err(), Some(Refusal::Full));
        drop(a);
        assert_eq!(slots.in_flight(), 1);
        let _c = slots.try_take().unwrap();
        slots.close();
        assert_eq!(slots.try_take().err(), Some(Refusal::Closed));
    }

    #[test]
    fn wait_idle_returns_when_the_last_slot_goes_or_at_the_bound() {
        let slots = Slots::new(4);
        let slot = slots.try_take().unwrap();
        smol::block_on(async {
            let started = Instant::now();
            assert_eq!(slots.wait_idle(Duration::from_millis(50)).await, 1);
            assert!(started.elapsed() >= Duration::from_millis(50));

            let release = async {
                Timer::after(Duration::from_millis(20)).await;
                drop(slot);
            };
            let (left, ()) = future::zip(slots.wait_idle(Duration::from_secs(5)), release).await;
            assert_eq!(left, 0);
            assert!(started.elapsed() < Duration::from_secs(4));
        });
    }
}
