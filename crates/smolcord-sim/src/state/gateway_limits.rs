//! The gateway's limits per bot (not per connection): the session start
//! budget, the last Identify of each `max_concurrency` bucket, the
//! identify queue's next turn per bucket, and when each guild's whole
//! member list was last asked for (op 8). Each rule takes `now`, so the
//! callers decide nothing about time themselves.

use super::pacing::IdentifyPacing;
use crate::model::config::SimConfig;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(crate) struct GatewayLimits {
    /// Identify pacing as it stands (the config's, or the control API's).
    pacing: IdentifyPacing,
    /// Identifies left in the session start budget.
    start_remaining: u32,
    /// The last identify of each `max_concurrency` bucket.
    last_identify: HashMap<u32, Instant>,
    /// The identify queue stand-in: when each bucket's next turn is.
    queue_next: HashMap<u32, Instant>,
    /// When each guild's member list was last asked for whole (op 8); one
    /// entry per known guild at most.
    all_member_requests: HashMap<u64, Instant>,
}

impl GatewayLimits {
    pub(crate) fn new(config: &SimConfig) -> GatewayLimits {
        GatewayLimits {
            pacing: IdentifyPacing::from_config(config),
            start_remaining: config.session_start_limit.remaining,
            last_identify: HashMap::new(),
            queue_next: HashMap::new(),
            all_member_requests: HashMap::new(),
        }
    }

    pub(crate) fn pacing(&self) -> IdentifyPacing {
        self.pacing
    }

    /// Paces identifies as `pacing` says from now on; a new
    /// `max_concurrency` starts every bucket afresh.
    pub(crate) fn set_pacing(&mut self, pacing: IdentifyPacing) {
        if pacing.max_concurrency != self.pacing.max_concurrency {
            self.last_identify.clear();
            self.queue_next.clear();
        }
        self.pacing = pacing;
    }

    /// Identifies left in the session start budget (`GET /gateway/bot`).
    pub(crate) fn start_remaining(&self) -> u32 {
        self.start_remaining
    }

    /// The `max_concurrency` bucket of shard `shard_id`.
    pub(crate) fn bucket_of(&self, shard_id: u32) -> u32 {
        shard_id % self.pacing.max_concurrency.max(1)
    }

    /// How long since `bucket`'s last session start, if it had one.
    pub(crate) fn since_last_identify(&self, bucket: u32, now: Instant) -> Option<Duration> {
        self.last_identify
            .get(&bucket)
            .map(|last| now.saturating_duration_since(*last))
    }

    /// Spends one session start for `bucket` at `now`; `false` (nothing
    /// spent) when the budget is gone.
    pub(crate) fn start_session(&mut self, bucket: u32, now: Instant) -> bool {
        if self.start_remaining == 0 {
            return false;
        }
        self.start_remaining -= 1;
        self.last_identify.insert(bucket, now);
        true
    }

    /// When shard `shard` may identify by the queue stand-in: its bucket's
    /// next turn (or `now`), the turn after it one `window` later.
    pub(crate) fn queue_turn(&mut self, shard: u32, now: Instant, window: Duration) -> Instant {
        let bucket = self.bucket_of(shard);
        let next = self.queue_next.entry(bucket).or_insert(now);
        let slot = (*next).max(now);
        *next = slot + window;
        slot
    }

    /// An all-members request for `guild` at `now`: `Err(wait)` when one
    /// came within `window` (the caller answers RATE_LIMITED), else it is
    /// recorded.
    pub(crate) fn ask_all_members(
        &mut self,
        guild: u64,
        now: Instant,
        window: Duration,
    ) -> Result<(), Duration> {
        let last = self.all_member_requests.get(&guild).copied();
        if let Some(wait) = last
            .map(|at| window.saturating_sub(now.saturating_duration_since(at)))
            .filter(|wait| !wait.is_zero())
        {
            return Err(wait);
        }
        self.all_member_requests.insert(guild, now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_budget_runs_out() {
        let config = SimConfig {
            session_start_limit: crate::model::config::SessionStartLimit {
                remaining: 1,
                ..Default::default()
            },
            ..SimConfig::default()
        };
        let mut limits = GatewayLimits::new(&config);
        let now = Instant::now();
        assert!(limits.start_session(0, now));
        assert!(!limits.start_session(0, now));
        assert_eq!(limits.start_remaining(), 0);
        assert_eq!(limits.since_last_identify(0, now), Some(Duration::ZERO));
    }

    #[test]
    fn queue_turns_are_a_window_apart_per_bucket() {
        let mut limits = GatewayLimits::new(&SimConfig::default());
        let now = Instant::now();
        let window = Duration::from_secs(5);
        assert_eq!(limits.queue_turn(0, now, window), now);
        assert_eq!(limits.queue_turn(0, now, window), now + window);
    }

    #[test]
    fn all_members_again_within_the_window_waits() {
        let mut limits = GatewayLimits::new(&SimConfig::default());
        let now = Instant::now();
        let window = Duration::from_secs(30);
        assert_eq!(limits.ask_all_members(7, now, window), Ok(()));
        let later = now + Duration::from_secs(10);
        assert_eq!(
            limits.ask_all_members(7, later, window),
            Err(Duration::from_secs(20))
        );
        assert_eq!(limits.ask_all_members(8, later, window), Ok(()));
        assert_eq!(limits.ask_all_members(7, now + window, window), Ok(()));
    }
}
