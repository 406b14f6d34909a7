//! Discord's HTTP rate limits, tracked from the response headers.
//!
//! Discord says never to hard-code limits, so everything here is learned:
//! each route (method + path template) maps to the bucket named by
//! `X-RateLimit-Bucket`, and a bucket is kept per *major parameter* (the
//! channel id), because two channels never share a limit. A request takes
//! one unit from its bucket before it goes out, so concurrent sends to one
//! channel cannot overrun it; when none is left, the caller waits until the
//! bucket resets. A global 429 stops every route until it expires.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Buckets kept before expired ones are pruned (one per active channel).
const PRUNE_ABOVE: usize = 256;

/// The rate-limit headers of one response.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct RateHeaders {
    pub limit: Option<u64>,
    pub remaining: Option<u64>,
    pub reset_after: Option<Duration>,
    pub bucket: Option<String>,
    pub global: bool,
    pub scope: Option<String>,
    pub retry_after: Option<Duration>,
}

impl RateHeaders {
    /// Reads the headers by (lower-case) name.
    pub fn parse(get: impl Fn(&str) -> Option<String>) -> RateHeaders {
        let number = |name: &str| get(name).and_then(|v| v.trim().parse::<u64>().ok());
        RateHeaders {
            limit: number("x-ratelimit-limit"),
            remaining: number("x-ratelimit-remaining"),
            reset_after: get("x-ratelimit-reset-after").and_then(|v| seconds(&v)),
            bucket: get("x-ratelimit-bucket").filter(|b| !b.is_empty()),
            global: get("x-ratelimit-global").is_some_and(|v| v.eq_ignore_ascii_case("true")),
            scope: get("x-ratelimit-scope"),
            retry_after: get("retry-after").and_then(|v| seconds(&v)),
        }
    }
}

/// Fractional seconds from a header or JSON body, refusing NaN, negative and
/// absurd values (a bad header must not panic or stall us for days).
pub(crate) fn seconds(text: &str) -> Option<Duration> {
    let value: f64 = text.trim().parse().ok()?;
    if !(0.0..=86_400.0).contains(&value) {
        return None;
    }
    Duration::try_from_secs_f64(value).ok()
}

/// Which bucket a request belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RouteKey {
    /// `METHOD /template`.
    pub route: String,
    /// The major parameter (channel id), or empty.
    pub major: String,
}

#[derive(Debug)]
struct Bucket {
    limit: Option<u64>,
    remaining: u64,
    reset_at: Instant,
    window: Duration,
}

/// Bucket and global state, shared by all clones of a client.
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    /// Route -> Discord's bucket hash.
    routes: HashMap<String, String>,
    /// (bucket hash or route) + major -> state.
    buckets: HashMap<String, Bucket>,
    global_until: Option<Instant>,
}

impl RateLimiter {
    fn bucket_key(&self, key: &RouteKey) -> String {
        let bucket = self.routes.get(&key.route).unwrap_or(&key.route);
        format!("{bucket}:{}", key.major)
    }

    /// Takes one request unit, or says how long to wait before asking again.
    #[cfg(test)]
    pub fn acquire(&mut self, key: &RouteKey, now: Instant) -> Option<Duration> {
        self.acquire_as(key, now, true)
    }

    /// Takes one request unit, or says how long to wait before asking
    /// again; `global: false` for a route outside the
    /// bot's global limit (the interaction endpoints: an owner's command
    /// is answered within its 3 s even while the bot is globally limited).
    pub fn acquire_as(&mut self, key: &RouteKey, now: Instant, global: bool) -> Option<Duration> {
        if let Some(until) = self.global_until.filter(|_| global) {
            if until > now {
                return Some(until - now);
            }
            self.global_until = None;
        }
        let bucket_key = self.bucket_key(key);
        let bucket = self.buckets.get_mut(&bucket_key)?;
        if bucket.reset_at <= now {
            match bucket.limit {
                // The window rolled over: assume it refilled until the next
                // response says otherwise.
                Some(limit) => {
                    bucket.remaining = limit;
                    bucket.reset_at = now + bucket.window;
                }
                None => {
                    self.buckets.remove(&bucket_key);
                    return None;
                }
            }
        }
        if bucket.remaining == 0 {
            return Some(bucket.reset_at - now);
        }
        bucket.remaining -= 1;
        None
    }

    /// Learns from a response's headers (received at `now`).
    pub fn update(&mut self, key: &RouteKey, headers: &RateHeaders, now: Instant) {
        if let Some(hash) = &headers.bucket {
            self.routes.insert(key.route.clone(), hash.clone());
        }
        let (Some(remaining), Some(reset_after)) = (headers.remaining, headers.reset_after) else {
            return;
        };
        if self.buckets.len() >= PRUNE_ABOVE {
            self.buckets.retain(|_, b| b.reset_at > now);
        }
        let bucket_key = self.bucket_key(key);
        self.buckets.insert(
            bucket_key,
            Bucket {
                limit: headers.limit,
                remaining,
                reset_at: now + reset_after,
                window: reset_after,
            },
        );
    }

    /// Records a 429: the global limit, or this route's bucket, is closed
    /// for `retry_after`.
    pub fn limited(&mut self, key: &RouteKey, retry_after: Duration, global: bool, now: Instant) {
        let until = now + retry_after;
        if global {
            self.global_until = Some(self.global_until.map_or(until, |t| t.max(until)));
            return;
        }
        let bucket_key = self.bucket_key(key);
        let bucket = self.buckets.entry(bucket_key).or_insert(Bucket {
            limit: None,
            remaining: 0,
            reset_at: until,
            window: retry_after,
        });
        bucket.remaining = 0;
        bucket.reset_at = bucket.reset_at.max(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(major: &str) -> RouteKey {
        RouteKey {
            route: "POST /channels/{channel_id}/messages".into(),
            major: major.into(),
        }
    }

    fn headers(remaining: u64, reset_ms: u64) -> RateHeaders {
        RateHeaders {
            limit: Some(5),
            remaining: Some(remaining),
            reset_after: Some(Duration::from_millis(reset_ms)),
            bucket: Some("abc".into()),
            ..RateHeaders::default()
        }
    }

    #[test]
    fn exhausted_bucket_waits_until_reset_then_refills() {
        let mut limiter = RateLimiter::default();
        let t0 = Instant::now();
        assert_eq!(limiter.acquire(&key("1"), t0), None);
        limiter.update(&key("1"), &headers(1, 500), t0);
        assert_eq!(limiter.acquire(&key("1"), t0), None, "one unit left");
        assert_eq!(
            limiter.acquire(&key("1"), t0),
            Some(Duration::from_millis(500))
        );
        let later = t0 + Duration::from_millis(600);
        assert_eq!(
            limiter.acquire(&key("1"), later),
            None,
            "refilled from the known limit"
        );
    }

    #[test]
    fn channels_do_not_share_a_bucket() {
        let mut limiter = RateLimiter::default();
        let t0 = Instant::now();
        limiter.update(&key("1"), &headers(0, 1000), t0);
        assert!(limiter.acquire(&key("1"), t0).is_some());
        assert_eq!(limiter.acquire(&key("2"), t0), None);
    }

    #[test]
    fn global_429_stops_every_route() {
        let mut limiter = RateLimiter::default();
        let t0 = Instant::now();
        limiter.limited(&key("1"), Duration::from_secs(2), true, t0);
        // …but an interaction's answer, which Discord keeps outside it.
        assert_eq!(limiter.acquire_as(&key("9"), t0, false), None);
        assert_eq!(limiter.acquire(&key("9"), t0), Some(Duration::from_secs(2)));
        assert_eq!(
            limiter.acquire(&key("9"), t0 + Duration::from_secs(3)),
            None
        );
    }

    #[test]
    fn bad_seconds_are_ignored() {
        assert_eq!(seconds("0.25"), Some(Duration::from_millis(250)));
        for bad in ["-1", "NaN", "inf", "1e300", "soon"] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
    }
}
