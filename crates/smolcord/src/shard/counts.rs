//! How many shards, identify buckets and session starts are believed, from
//! a config, the environment or `GET /gateway/bot`, before anything is sized
//! by them. Each cap comes from what Discord documents
//! (<https://discord.com/developers/docs/events/gateway#sharding>), with
//! room to spare; a figure past one is refused with an error naming it.
//!
//! - A shard holds at most 2 500 guilds, and `GET /gateway/bot` recommends
//!   about one shard per 1 000. [`MAX_SHARD_COUNT`] shards (65 536) carry
//!   65 million guilds at that rate, 164 million at the maximum: more than
//!   any bot is in. A count is only a routing figure (`num_shards`), but a
//!   count past it is a typo or a broken answer.
//! - [`MAX_SHARDS_PER_PROCESS`] (1 024): the shards one process runs on its
//!   one thread. Each connected shard holds its socket buffers (~100 KiB)
//!   and state; 1 024 of them are ~100 MiB, already past a small host. A
//!   bigger bot runs several processes, each a range of the shards, sharing
//!   an identify queue (`identify_queue_url`).
//! - [`MAX_CONCURRENCY`] (1 024): Discord gives `max_concurrency` 1 to most
//!   bots and more (16 in its docs' example; 16, 32, 64 seen) to large bots;
//!   the identify queue keeps one slot per bucket.
//! - [`MAX_SESSION_STARTS`]: a day's session starts are 1 000, and for
//!   large bots `max(2000, guilds / 1000 × 5)`: at the most guilds
//!   [`MAX_SHARD_COUNT`] shards hold, 819 200.

use super::identify_budget::SessionStartLimit;
use std::time::Duration;

/// The largest shard count (`num_shards`) believed.
pub const MAX_SHARD_COUNT: u32 = 65_536;
/// The most shards one process runs.
pub const MAX_SHARDS_PER_PROCESS: u32 = 1024;
/// The largest `max_concurrency` believed.
pub const MAX_CONCURRENCY: u32 = 1024;
/// The largest `session_start_limit.total` believed.
pub const MAX_SESSION_STARTS: u32 = MAX_SHARD_COUNT * 2500 / 1000 * 5;
/// The longest `session_start_limit.reset_after` believed: Discord's window.
pub const MAX_RESET_AFTER: Duration = super::identify_budget::WINDOW;

/// Checks a shard count; the error says what is wrong (the caller names
/// where it came from).
pub fn check_shard_count(count: u32) -> Result<(), String> {
    if count == 0 {
        return Err("the shard count must be at least 1".into());
    }
    if count > MAX_SHARD_COUNT {
        return Err(format!(
            "a shard count of {count} is more than {MAX_SHARD_COUNT} (at Discord's ~1 000 guilds per shard, 65 million guilds)"
        ));
    }
    Ok(())
}

/// Checks how many shards one process is to run.
pub fn check_shards_per_process(first: u32, last: u32) -> Result<(), String> {
    let shards = u64::from(last) - u64::from(first) + 1;
    if shards > u64::from(MAX_SHARDS_PER_PROCESS) {
        return Err(format!(
            "shards {first}-{last} are {shards} shards for one process, which runs at most {MAX_SHARDS_PER_PROCESS}: give each process a range of them (`shards` [first, last, count] or SMOLCORD_SHARDS FIRST-LAST/COUNT) and one identify queue (`identify_queue_url`)"
        ));
    }
    Ok(())
}

/// Checks `GET /gateway/bot`'s `session_start_limit`.
pub fn check_session_start_limit(limit: &SessionStartLimit) -> Result<(), String> {
    let SessionStartLimit {
        total,
        remaining,
        reset_after,
        max_concurrency,
    } = *limit;
    if !(1..=MAX_CONCURRENCY).contains(&max_concurrency) {
        return Err(format!(
            "max_concurrency {max_concurrency} is not in 1..={MAX_CONCURRENCY} (Discord gives 1, and 16, 32, 64 ... to large bots)"
        ));
    }
    if total > MAX_SESSION_STARTS {
        return Err(format!(
            "total {total} is more than {MAX_SESSION_STARTS} session starts a day (Discord: 1000, large bots max(2000, guilds / 1000 × 5))"
        ));
    }
    if remaining > total {
        return Err(format!("remaining {remaining} is more than total {total}"));
    }
    if u128::from(reset_after) > MAX_RESET_AFTER.as_millis() {
        return Err(format!(
            "reset_after {reset_after} ms is longer than Discord's 24 h window"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(
        total: u32,
        remaining: u32,
        reset_after: u64,
        max_concurrency: u32,
    ) -> SessionStartLimit {
        SessionStartLimit {
            total,
            remaining,
            reset_after,
            max_concurrency,
        }
    }

    #[test]
    fn discords_figures_pass_and_absurd_ones_are_named() {
        assert_eq!(MAX_SESSION_STARTS, 819_200);
        for ok in [
            limit(1000, 999, 14_400_000, 1),
            limit(2000, 0, 86_400_000, 16),
            limit(MAX_SESSION_STARTS, 5, 0, MAX_CONCURRENCY),
        ] {
            check_session_start_limit(&ok).unwrap();
        }
        for (bad, why) in [
            (limit(1000, 1000, 0, u32::MAX), "max_concurrency 4294967295"),
            (limit(1000, 1000, 0, 0), "max_concurrency 0"),
            (limit(u32::MAX, 1, 0, 1), "total 4294967295"),
            (
                limit(1000, 1001, 0, 1),
                "remaining 1001 is more than total 1000",
            ),
            (limit(1000, 1, u64::MAX, 1), "reset_after"),
        ] {
            let err = check_session_start_limit(&bad).unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
        assert!(check_shard_count(MAX_SHARD_COUNT).is_ok());
        assert!(check_shard_count(MAX_SHARD_COUNT + 1)
            .unwrap_err()
            .contains("65537 is more than 65536"));
        assert!(check_shards_per_process(0, 1023).is_ok());
        assert!(check_shards_per_process(0, u32::MAX - 1)
            .unwrap_err()
            .contains("4294967295 shards for one process"));
    }
}
