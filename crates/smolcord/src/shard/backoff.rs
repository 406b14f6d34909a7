//! Reconnect backoff: exponential with full jitter, capped, reset once a
//! connection has stayed healthy for a while.

use std::time::{Duration, Instant};

/// Exponential backoff with full jitter: the n-th retry waits a random time
/// in `[0, min(cap, base * 2^n))`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    healthy_after: Duration,
    attempt: u32,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(60),
            Duration::from_secs(60),
        )
    }
}

impl Backoff {
    /// `base` for the first retry, doubling up to `cap`; a connection up for
    /// `healthy_after` resets it.
    pub fn new(base: Duration, cap: Duration, healthy_after: Duration) -> Backoff {
        Backoff {
            base,
            cap,
            healthy_after,
            attempt: 0,
        }
    }

    /// The same backoff with no attempts counted (for another kind of
    /// failure that should not inherit this one's count).
    pub fn restarted(&self) -> Backoff {
        Backoff {
            attempt: 0,
            ..self.clone()
        }
    }

    /// The upper bound of the next delay (before jitter).
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The delay before the next attempt, with full jitter; counts the attempt.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.ceiling().mul_f64(fastrand::f64());
        self.attempt = self.attempt.saturating_add(1);
        delay
    }

    /// The delay before the next attempt, between half the ceiling and all
    /// of it (many clients still spread out, none retries much sooner than
    /// the step); counts the attempt.
    pub fn next_delay_at_least_half(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        ceiling / 2 + ceiling.mul_f64(fastrand::f64()) / 2
    }

    /// Called when a connection ends: one that was healthy (session live
    /// since `healthy_since` for at least `healthy_after`) resets the count.
    pub fn connection_ended(&mut self, healthy_since: Option<Instant>, now: Instant) {
        if healthy_since
            .is_some_and(|since| now.saturating_duration_since(since) >= self.healthy_after)
        {
            self.attempt = 0;
        }
    }

    /// Number of consecutive failed attempts counted so far.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_exponentially_within_bounds_and_caps() {
        let mut backoff = Backoff::new(
            Duration::from_millis(100),
            Duration::from_secs(2),
            Duration::from_secs(60),
        );
        let ceilings: Vec<u128> = (0..8)
            .map(|_| {
                let ceiling = backoff.ceiling();
                let delay = backoff.next_delay();
                assert!(delay <= ceiling, "{delay:?} > {ceiling:?}");
                ceiling.as_millis()
            })
            .collect();
        assert_eq!(ceilings, [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        for _ in 0..100 {
            assert!(backoff.next_delay() <= Duration::from_secs(2));
        }
    }

    #[test]
    fn jitter_spreads_delays() {
        let mut backoff = Backoff::new(
            Duration::from_secs(8),
            Duration::from_secs(8),
            Duration::ZERO,
        );
        let delays: Vec<Duration> = (0..50).map(|_| backoff.next_delay()).collect();
        let min = delays.iter().min().unwrap();
        let max = delays.iter().max().unwrap();
        assert!(*max - *min > Duration::from_secs(2), "{min:?}..{max:?}");
    }

    #[test]
    fn resets_only_after_a_healthy_connection() {
        let now = Instant::now();
        let mut backoff = Backoff::new(
            Duration::from_secs(1),
            Duration::from_secs(60),
            Duration::from_secs(30),
        );
        backoff.next_delay();
        backoff.next_delay();
        backoff.connection_ended(Some(now - Duration::from_secs(5)), now);
        assert_eq!(backoff.attempts(), 2);
        backoff.connection_ended(None, now);
        assert_eq!(backoff.attempts(), 2);
        backoff.connection_ended(Some(now - Duration::from_secs(31)), now);
        assert_eq!(backoff.attempts(), 0);
        assert!(backoff.ceiling() == Duration::from_secs(1));
    }

    #[test]
    fn huge_attempt_counts_do_not_overflow() {
        let mut backoff = Backoff::default();
        for _ in 0..1000 {
            assert!(backoff.next_delay() <= Duration::from_secs(60));
        }
    }
}
