//! Discord's REST rate limits, counted for every request: per route and
//! major parameter (channel, guild or webhook), `per_route` requests per
//! `window` (fixed windows: a Discord bucket refills all at once at its
//! reset), and `global_per_second` requests per second over all routes.
//! Every answer carries the counts in its `X-RateLimit-*` headers (the
//! REST side's `ratelimit_headers.rs` writes them). With
//! [`SimConfig::rest_rate_limit`](crate::SimConfig::rest_rate_limit) set the
//! limits are enforced (429 beyond them, as Discord answers); without it the
//! counts are real but run against [`RestRateLimit::REPORTED`] and nothing
//! is refused.

use crate::model::config::RestRateLimit;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Buckets kept before expired ones are dropped (one per route and channel).
const PRUNE_ABOVE: usize = 1024;
/// Live buckets kept at most: a client posting to ever new channel ids
/// within one window cannot grow the book past this; beyond it the counts
/// start over (a simulator may forget, never grow).
const MAX_BUCKETS: usize = 8 * PRUNE_ABOVE;

#[derive(Debug)]
struct Window {
    started: Instant,
    used: u32,
}

impl Window {
    /// Takes one request if `limit` allows it in the window of `length`
    /// (starting a new window when the last one is over); with `enforce`
    /// false it is always taken, and only counted while the limit lasts.
    fn take(&mut self, limit: u32, length: Duration, now: Instant, enforce: bool) -> bool {
        if now.duration_since(self.started) >= length {
            *self = Window {
                started: now,
                used: 0,
            };
        }
        if self.used >= limit {
            return !enforce;
        }
        self.used += 1;
        true
    }

    fn reset_after(&self, length: Duration, now: Instant) -> Duration {
        (self.started + length).saturating_duration_since(now)
    }
}

/// What to answer.
#[derive(Debug, PartialEq)]
pub(crate) enum Decision {
    /// Serve it; these go into the headers.
    Allow {
        limit: u32,
        remaining: u32,
        reset_after: Duration,
    },
    /// 429 (only when enforcing); `limit` is the route's, for the headers.
    Limited {
        retry_after: Duration,
        global: bool,
        limit: u32,
    },
}

/// Where a bucket stands, without counting a request.
#[derive(Debug, PartialEq)]
pub(crate) struct Standing {
    pub limit: u32,
    pub remaining: u32,
    pub reset_after: Duration,
}

/// The windows seen so far.
#[derive(Debug, Default)]
pub(crate) struct RateBook {
    buckets: HashMap<(String, String), Window>,
    global: Option<Window>,
}

impl RateBook {
    /// Counts a request to `bucket` (a route) in `major` (a channel, guild
    /// or webhook); `enforce` refuses it beyond the limits.
    pub fn check(
        &mut self,
        limits: &RestRateLimit,
        bucket: &str,
        major: &str,
        now: Instant,
        enforce: bool,
    ) -> Decision {
        let second = Duration::from_secs(1);
        let global = self.global.get_or_insert(Window {
            started: now,
            used: 0,
        });
        if !global.take(limits.global_per_second, second, now, enforce) {
            return Decision::Limited {
                retry_after: global.reset_after(second, now),
                global: true,
                limit: limits.per_route,
            };
        }
        if self.buckets.len() > PRUNE_ABOVE {
            self.buckets
                .retain(|_, w| now.duration_since(w.started) < limits.window);
            if self.buckets.len() > MAX_BUCKETS {
                self.buckets.clear();
            }
        }
        let window = self
            .buckets
            .entry((bucket.to_owned(), major.to_owned()))
            .or_insert(Window {
                started: now,
                used: 0,
            });
        if !window.take(limits.per_route, limits.window, now, enforce) {
            // Over a route's limit: this request did not count globally.
            if let Some(global) = &mut self.global {
                global.used = global.used.saturating_sub(1);
            }
            return Decision::Limited {
                retry_after: window.reset_after(limits.window, now),
                global: false,
                limit: limits.per_route,
            };
        }
        Decision::Allow {
            limit: limits.per_route,
            remaining: limits.per_route.saturating_sub(window.used),
            reset_after: window.reset_after(limits.window, now),
        }
    }

    /// Where `bucket` in `major` stands now (a fresh bucket if unseen or
    /// past its reset), without counting a request.
    pub fn standing(
        &self,
        limits: &RestRateLimit,
        bucket: &str,
        major: &str,
        now: Instant,
    ) -> Standing {
        let live = self
            .buckets
            .get(&(bucket.to_owned(), major.to_owned()))
            .filter(|w| now.duration_since(w.started) < limits.window);
        match live {
            Some(window) => Standing {
                limit: limits.per_route,
                remaining: limits.per_route.saturating_sub(window.used),
                reset_after: window.reset_after(limits.window, now),
            },
            None => Standing {
                limit: limits.per_route,
                remaining: limits.per_route,
                reset_after: limits.window,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_route_per_channel_and_global() {
        let limits = RestRateLimit {
            per_route: 2,
            window: Duration::from_secs(5),
            global_per_second: 3,
        };
        let mut book = RateBook::default();
        let t0 = Instant::now();
        assert!(matches!(
            book.check(&limits, "post", "1", t0, true),
            Decision::Allow { remaining: 1, .. }
        ));
        assert!(matches!(
            book.check(&limits, "post", "1", t0, true),
            Decision::Allow { remaining: 0, .. }
        ));
        assert_eq!(
            book.check(&limits, "post", "1", t0, true),
            Decision::Limited {
                retry_after: Duration::from_secs(5),
                global: false,
                limit: 2,
            }
        );
        // Another channel has its own bucket, but the global limit is 3/s.
        assert!(matches!(
            book.check(&limits, "post", "2", t0, true),
            Decision::Allow { .. }
        ));
        assert!(matches!(
            book.check(&limits, "post", "2", t0, true),
            Decision::Limited { global: true, .. }
        ));
        let t1 = t0 + Duration::from_secs(1);
        assert!(matches!(
            book.check(&limits, "post", "2", t1, true),
            Decision::Allow { remaining: 0, .. }
        ));
        assert!(matches!(
            book.check(&limits, "post", "1", t0 + Duration::from_secs(5), true),
            Decision::Allow { remaining: 1, .. }
        ));
    }

    #[test]
    fn unenforced_counts_down_and_never_refuses() {
        let limits = RestRateLimit {
            per_route: 3,
            window: Duration::from_secs(1),
            global_per_second: 2,
        };
        let mut book = RateBook::default();
        let t0 = Instant::now();
        let remaining: Vec<u32> = (0..5)
            .map(|_| match book.check(&limits, "post", "1", t0, false) {
                Decision::Allow { remaining, .. } => remaining,
                other => panic!("refused while not enforcing: {other:?}"),
            })
            .collect();
        assert_eq!(remaining, [2, 1, 0, 0, 0]);
        assert_eq!(book.standing(&limits, "post", "1", t0).remaining, 0);
        assert_eq!(book.standing(&limits, "post", "9", t0).remaining, 3);
        let later = t0 + Duration::from_secs(1);
        assert_eq!(book.standing(&limits, "post", "1", later).remaining, 3);
    }
}
