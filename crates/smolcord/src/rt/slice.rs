//! A slice of work between two yields to the executor: a task that drains
//! a burst (frames from a socket, events from a queue) counts each item
//! and yields once it has handled `max_items` of them or spent `max_time`,
//! so other tasks (and the heartbeat's timer) run between slices, however
//! large each item is.
//!
//! ```
//! use smolcord::rt::Slice;
//! use std::time::Duration;
//!
//! smol::block_on(async {
//!     let mut slice = Slice::new(64, Duration::from_millis(2));
//!     for _ in 0..1000 {
//!         slice.yield_if_spent().await;
//!         // ... handle one item ...
//!         slice.count();
//!     }
//! });
//! ```

use futures_lite::future;
use std::time::{Duration, Instant};

/// Work done since the task last yielded.
#[derive(Debug)]
pub struct Slice {
    items: u32,
    started: Instant,
    max_items: u32,
    max_time: Duration,
}

impl Slice {
    /// A slice of at most `max_items` items or `max_time`, whichever ends
    /// first.
    pub fn new(max_items: u32, max_time: Duration) -> Slice {
        Slice {
            items: 0,
            started: Instant::now(),
            max_items,
            max_time,
        }
    }

    /// One item handled.
    pub fn count(&mut self) {
        if self.items == 0 {
            self.started = Instant::now();
        }
        self.items += 1;
    }

    /// Whether the slice is spent.
    pub fn spent(&self) -> bool {
        self.items >= self.max_items || (self.items > 0 && self.started.elapsed() >= self.max_time)
    }

    /// Yields to the executor once the slice is spent, and starts a new one.
    pub async fn yield_if_spent(&mut self) {
        if self.spent() {
            self.items = 0;
            future::yield_now().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_ends_at_its_count_or_its_time() {
        let mut slice = Slice::new(3, Duration::from_secs(3600));
        assert!(!slice.spent());
        slice.count();
        slice.count();
        assert!(!slice.spent());
        slice.count();
        assert!(slice.spent());
        let mut slice = Slice::new(1000, Duration::ZERO);
        assert!(!slice.spent(), "nothing done yet");
        slice.count();
        assert!(slice.spent());
    }
}
