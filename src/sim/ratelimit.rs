//! Discord's REST rate limits, enforced when
//! [`SimConfig::rest_rate_limit`](super::SimConfig::rest_rate_limit) is set:
//! per route and channel, `per_route` requests per `window` (fixed windows:
//! a Discord bucket refills all at once at its reset), and `global_per_second`
//! requests per second over all routes. Every answer carries the
//! `X-RateLimit-*` headers a client learns its limits from; a request over a
//! limit gets 429 with `retry_after`, as Discord answers it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Buckets kept before expired ones are dropped (one per route and channel).
const PRUNE_ABOVE: usize = 1024;

/// The limits the simulator enforces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RestRateLimit {
    /// Requests per `window` for one route in one channel.
    pub per_route: u32,
    /// The window of `per_route`.
    pub window: Duration,
    /// Requests per second over all routes (the bot's global limit).
    pub global_per_second: u32,
}

impl RestRateLimit {
    /// What Discord applies to a bot posting messages: 5 per 5 s in a
    /// channel, 50 requests a second overall.
    pub const DISCORD: RestRateLimit = RestRateLimit {
        per_route: 5,
        window: Duration::from_secs(5),
        global_per_second: 50,
    };
}

#[derive(Debug)]
struct Window {
    started: Instant,
    used: u32,
}

impl Window {
    /// Takes one request if `limit` allows it in the window of `length`
    /// (starting a new window when the last one is over).
    fn take(&mut self, limit: u32, length: Duration, now: Instant) -> bool {
        if now.duration_since(self.started) >= length {
            *self = Window {
                started: now,
                used: 0,
            };
        }
        if self.used >= limit {
            return false;
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
    /// 429.
    Limited { retry_after: Duration, global: bool },
}

/// The windows seen so far.
#[derive(Debug, Default)]
pub(crate) struct RateBook {
    buckets: HashMap<(String, String), Window>,
    global: Option<Window>,
}

impl RateBook {
    /// Counts a request to `bucket` (a route) in `major` (a channel).
    pub fn check(
        &mut self,
        limits: &RestRateLimit,
        bucket: &str,
        major: &str,
        now: Instant,
    ) -> Decision {
        let second = Duration::from_secs(1);
        let global = self.global.get_or_insert(Window {
            started: now,
            used: 0,
        });
        if !global.take(limits.global_per_second, second, now) {
            return Decision::Limited {
                retry_after: global.reset_after(second, now),
                global: true,
            };
        }
        if self.buckets.len() > PRUNE_ABOVE {
            self.buckets
                .retain(|_, w| now.duration_since(w.started) < limits.window);
        }
        let window = self
            .buckets
            .entry((bucket.to_owned(), major.to_owned()))
            .or_insert(Window {
                started: now,
                used: 0,
            });
        if !window.take(limits.per_route, limits.window, now) {
            // Over a route's limit: this request did not count globally.
            if let Some(global) = &mut self.global {
                global.used -= 1;
            }
            return Decision::Limited {
                retry_after: window.reset_after(limits.window, now),
                global: false,
            };
        }
        Decision::Allow {
            limit: limits.per_route,
            remaining: limits.per_route - window.used,
            reset_after: window.reset_after(limits.window, now),
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
            book.check(&limits, "post", "1", t0),
            Decision::Allow { remaining: 1, .. }
        ));
        assert!(matches!(
            book.check(&limits, "post", "1", t0),
            Decision::Allow { remaining: 0, .. }
        ));
        assert_eq!(
            book.check(&limits, "post", "1", t0),
            Decision::Limited {
                retry_after: Duration::from_secs(5),
                global: false
            }
        );
        // Another channel has its own bucket, but the global limit is 3/s.
        assert!(matches!(
            book.check(&limits, "post", "2", t0),
            Decision::Allow { .. }
        ));
        assert!(matches!(
            book.check(&limits, "post", "2", t0),
            Decision::Limited { global: true, .. }
        ));
        let t1 = t0 + Duration::from_secs(1);
        assert!(matches!(
            book.check(&limits, "post", "2", t1),
            Decision::Allow { remaining: 0, .. }
        ));
        assert!(matches!(
            book.check(&limits, "post", "1", t0 + Duration::from_secs(5)),
            Decision::Allow { remaining: 1, .. }
        ));
    }
}
