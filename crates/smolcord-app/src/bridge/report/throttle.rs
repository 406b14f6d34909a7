//! Throttling repeated reports, so a burst of the same failure (a crowd of
//! strangers, a thousand results refused for the same reason) cannot drown
//! the failure journal or the log: per key, the first `burst` reports of a
//! window pass, the rest are only counted, and the next report that passes
//! says how many were held back. Keys are few (a kind and a reason, never a
//! user), and the book is bounded anyway.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Keys tracked at most. Reports under further keys pass unthrottled (the
/// recorder's own capacity still bounds them).
const MAX_KEYS: usize = 64;

/// Whether a report goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Report it; `held_back` like it were counted and not reported since
    /// the last one that passed.
    Pass { held_back: u64 },
    /// Only count it.
    HoldBack,
}

#[derive(Debug)]
struct Slot {
    window_start: Instant,
    passed: u32,
    held_back: u64,
}

/// A per-key rate limit on reports. `Send + Sync`: the reporter it lives in
/// is shared by clones.
#[derive(Debug)]
pub(crate) struct Throttle<K> {
    window: Duration,
    burst: u32,
    book: Mutex<HashMap<K, Slot>>,
}

impl<K: Hash + Eq + Clone> Throttle<K> {
    pub fn new(burst: u32, window: Duration) -> Throttle<K> {
        Throttle {
            window,
            burst: burst.max(1),
            book: Mutex::default(),
        }
    }

    fn book(&self) -> MutexGuard<'_, HashMap<K, Slot>> {
        // Nothing in the map can be left half-updated by a panic.
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Decides one report under `key` at `now`.
    pub fn check(&self, key: &K, now: Instant) -> Verdict {
        let mut book = self.book();
        if let Some(slot) = book.get_mut(key) {
            if now.duration_since(slot.window_start) >= self.window {
                let held_back = std::mem::take(&mut slot.held_back);
                slot.window_start = now;
                slot.passed = 1;
                return Verdict::Pass { held_back };
            }
            if slot.passed < self.burst {
                slot.passed += 1;
                return Verdict::Pass { held_back: 0 };
            }
            slot.held_back += 1;
            return Verdict::HoldBack;
        }
        if book.len() >= MAX_KEYS {
            // Forget quiet keys whose window is over (nothing held back).
            let window = self.window;
            book.retain(|_, s| s.held_back > 0 || now.duration_since(s.window_start) < window);
        }
        if book.len() < MAX_KEYS {
            book.insert(
                key.clone(),
                Slot {
                    window_start: now,
                    passed: 1,
                    held_back: 0,
                },
            );
        }
        Verdict::Pass { held_back: 0 }
    }

    /// Takes every held-back count (at shutdown, so none is lost silently).
    pub fn take_held_back(&self) -> Vec<(K, u64)> {
        let mut book = self.book();
        book.iter_mut()
            .filter(|(_, s)| s.held_back > 0)
            .map(|(k, s)| (k.clone(), std::mem::take(&mut s.held_back)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_passes_then_counts_then_reports_the_count() {
        let throttle = Throttle::new(2, Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(throttle.check(&"a", t0), Verdict::Pass { held_back: 0 });
        assert_eq!(throttle.check(&"a", t0), Verdict::Pass { held_back: 0 });
        for _ in 0..5 {
            assert_eq!(throttle.check(&"a", t0), Verdict::HoldBack);
        }
        // Another key is not affected.
        assert_eq!(throttle.check(&"b", t0), Verdict::Pass { held_back: 0 });
        let later = t0 + Duration::from_secs(10);
        assert_eq!(throttle.check(&"a", later), Verdict::Pass { held_back: 5 });
        assert_eq!(throttle.check(&"a", later), Verdict::Pass { held_back: 0 });
        assert_eq!(throttle.check(&"a", later), Verdict::HoldBack);
        assert_eq!(throttle.take_held_back(), [("a", 1)]);
        assert!(throttle.take_held_back().is_empty());
    }

    #[test]
    fn the_book_stays_bounded() {
        let throttle = Throttle::new(1, Duration::from_secs(10));
        let t0 = Instant::now();
        for i in 0..MAX_KEYS * 4 {
            assert!(matches!(throttle.check(&i, t0), Verdict::Pass { .. }));
        }
        assert_eq!(throttle.book().len(), MAX_KEYS);
        // Once their windows are over, quiet keys make room.
        throttle.check(&usize::MAX, t0 + Duration::from_secs(11));
        assert!(throttle.book().contains_key(&usize::MAX));
        assert!(throttle.book().len() <= MAX_KEYS);
    }
}
