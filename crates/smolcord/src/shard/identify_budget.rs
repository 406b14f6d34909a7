//! The identify budget guard.
//!
//! Discord allows a bot `session_start_limit.total` fresh sessions a day
//! (1000 for most bots; `max(2000, guilds / 1000 × 5)` for large ones) and
//! resets its token when they run out; a reconnect storm can burn them in
//! an afternoon. This guard counts fresh identifies in a rolling 24 h
//! window (persisted with the session state, so a crash loop is counted
//! too), takes the gateway's own `total`, `remaining` and `reset_after`
//! (`GET /gateway/bot`) into account when known — 1000 a day when not —
//! and slows down, loudly, as the budget runs low instead of spending it.
//! (Spacing identifies by Discord's 5 s concurrency window is the identify
//! queue's job: [`super::identify_queue`].)

use crate::protocol::SessionStartLimit;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Discord's window for the identify limit.
pub use super::counts::WINDOW;
/// Discord's identify limit per window for ordinary bots: the budget
/// assumed while `GET /gateway/bot` has not given the real one.
pub const DAILY_LIMIT: u32 = 1000;
/// Identifies remembered: as many as the largest daily budget believed
/// (the guard keeps the count below the budget, so this is a bound for a
/// history it never sees in practice).
const REMEMBERED: usize = super::counts::MAX_SESSION_STARTS as usize;
/// Identifies allowed per `max_concurrency` bucket per this long.
pub const CONCURRENCY_WINDOW: Duration = Duration::from_secs(5);

/// How urgent the budget situation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pressure {
    /// Plenty left.
    Normal,
    /// Running low: identifies are slowed down.
    Low,
    /// Nearly gone: identifies wait for the budget to refill.
    Critical,
}

/// The decision before a fresh identify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdentifyPlan {
    /// Wait this long first.
    pub wait: Duration,
    /// Identifies left by the stricter of our count and the gateway's.
    pub remaining: u32,
    /// The day's budget: the gateway's `total`, or [`DAILY_LIMIT`] while
    /// it has not said.
    pub total: u32,
    /// How urgent it is.
    pub pressure: Pressure,
}

/// Fresh identifies in the last 24 h (unix milliseconds), oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IdentifyBudget {
    history: Vec<u64>,
}

impl IdentifyBudget {
    fn expire(&mut self, now_ms: u64) {
        let window = WINDOW.as_millis() as u64;
        self.history
            .retain(|&at| now_ms.saturating_sub(at) < window);
        // A clock that jumped back would keep entries "from the future"
        // forever; clamp them to now instead.
        for at in &mut self.history {
            *at = (*at).min(now_ms);
        }
    }

    /// Identifies counted in the window ending at `now_ms`.
    pub fn used(&mut self, now_ms: u64) -> u32 {
        self.expire(now_ms);
        u32::try_from(self.history.len()).unwrap_or(u32::MAX)
    }

    /// When the last fresh identify was sent (unix ms).
    pub fn last(&self) -> Option<u64> {
        self.history.last().copied()
    }

    /// Adds the identifies of `other` (another shard's persisted history).
    pub fn merge(&mut self, other: &IdentifyBudget) {
        self.history.extend_from_slice(&other.history);
        self.history.sort_unstable();
        self.history.dedup();
        let excess = self.history.len().saturating_sub(REMEMBERED);
        self.history.drain(..excess);
    }

    /// Records a fresh identify sent at `now_ms`.
    pub fn record(&mut self, now_ms: u64) {
        self.expire(now_ms);
        self.history.push(now_ms);
        // Bounded: more than the largest daily budget is never useful to
        // remember.
        if self.history.len() > REMEMBERED {
            self.history.remove(0);
        }
    }

    /// What to do before the next fresh identify at `now_ms`, given the
    /// gateway's figures if we have them.
    pub fn plan(&mut self, now_ms: u64, remote: Option<SessionStartLimit>) -> IdentifyPlan {
        let used = self.used(now_ms);
        let total = remote.map_or(DAILY_LIMIT, |limit| limit.total);
        let local_remaining = total.saturating_sub(used);
        let remaining = remote.map_or(local_remaining, |limit| {
            limit.remaining.min(local_remaining)
        });
        let (pressure, budget_wait) = match remaining {
            101.. => (Pressure::Normal, Duration::ZERO),
            21..=100 => (Pressure::Low, Duration::from_secs(60)),
            6..=20 => (Pressure::Critical, Duration::from_secs(15 * 60)),
            _ => {
                // Wait for the window to free a slot: the gateway's reset if
                // known, else until our oldest identify ages out.
                let local_refill = self.history.first().map_or(0, |&oldest| {
                    (oldest + WINDOW.as_millis() as u64).saturating_sub(now_ms)
                });
                let refill = remote
                    .filter(|limit| limit.remaining == 0 || limit.remaining < local_remaining)
                    .map_or(local_refill, |limit| limit.reset_after);
                (
                    Pressure::Critical,
                    Duration::from_millis(refill).max(Duration::from_secs(15 * 60)),
                )
            }
        };
        IdentifyPlan {
            wait: budget_wait,
            remaining,
            total,
            pressure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;

    #[test]
    fn counts_a_rolling_window() {
        let mut budget = IdentifyBudget::default();
        budget.record(0);
        budget.record(HOUR);
        assert_eq!(budget.used(2 * HOUR), 2);
        assert_eq!(budget.used(24 * HOUR + 1), 1);
        assert_eq!(budget.used(25 * HOUR + 1), 0);
    }

    #[test]
    fn plenty_left_means_no_wait() {
        let mut budget = IdentifyBudget::default();
        assert_eq!(budget.plan(0, None).wait, Duration::ZERO);
        budget.record(10_000);
        let plan = budget.plan(12_000, None);
        assert_eq!(plan.wait, Duration::ZERO);
        assert_eq!(plan.pressure, Pressure::Normal);
        assert_eq!(plan.remaining, 999);
    }

    #[test]
    fn slows_down_as_the_budget_runs_low() {
        let mut budget = IdentifyBudget::default();
        for n in 0..950 {
            budget.record(n * 60_000);
        }
        let now = 950 * 60_000;
        let plan = budget.plan(now, None);
        assert_eq!(plan.remaining, 50);
        assert_eq!(plan.pressure, Pressure::Low);
        assert_eq!(plan.wait, Duration::from_secs(60));
    }

    #[test]
    fn the_gateways_figure_wins_when_stricter() {
        let mut budget = IdentifyBudget::default();
        let remote = SessionStartLimit {
            total: 1000,
            remaining: 3,
            reset_after: 5 * HOUR,
            max_concurrency: 1,
        };
        let plan = budget.plan(0, Some(remote));
        assert_eq!(plan.remaining, 3);
        assert_eq!(plan.pressure, Pressure::Critical);
        assert_eq!(plan.wait, Duration::from_millis(5 * HOUR));
    }

    #[test]
    fn a_large_bots_budget_is_the_gateways_total() {
        // 1200 identifies today: past an ordinary bot's 1000, well within
        // the 2000 Discord gives this one.
        let mut budget = IdentifyBudget::default();
        for n in 0..1200 {
            budget.record(n * 1000);
        }
        let remote = SessionStartLimit {
            total: 2000,
            remaining: 800,
            reset_after: HOUR,
            max_concurrency: 16,
        };
        let plan = budget.plan(1_200_000, Some(remote));
        assert_eq!(
            (plan.remaining, plan.total, plan.pressure),
            (800, 2000, Pressure::Normal)
        );
        // Our own count still wins when it is the stricter.
        let stale = SessionStartLimit {
            remaining: 2000,
            ..remote
        };
        assert_eq!(budget.plan(1_200_000, Some(stale)).remaining, 800);
        // Unknown: Discord's 1000 for most bots.
        let plan = budget.plan(1_200_000, None);
        assert_eq!((plan.remaining, plan.total), (0, DAILY_LIMIT));
    }

    #[test]
    fn exhausted_local_budget_waits_for_the_oldest_to_age_out() {
        let mut budget = IdentifyBudget::default();
        for n in 0..1000 {
            budget.record(n * 1000);
        }
        let now = 1000 * 1000;
        let plan = budget.plan(now, None);
        assert_eq!(plan.remaining, 0);
        assert_eq!(plan.wait, Duration::from_millis(24 * HOUR - now));
    }

    #[test]
    fn persists_as_a_plain_list() {
        let mut budget = IdentifyBudget::default();
        budget.record(5);
        assert_eq!(serde_json::to_string(&budget).unwrap(), "[5]");
        let back: IdentifyBudget = serde_json::from_str("[5]").unwrap();
        assert_eq!(back, budget);
    }
}
