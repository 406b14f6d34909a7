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

use crate::protocol::SessionStartLimit;
use std::fmt;
use std::time::Duration;

/// The largest shard count (`num_shards`) believed.
pub const MAX_SHARD_COUNT: u32 = 65_536;
/// The most shards one process runs.
pub const MAX_SHARDS_PER_PROCESS: u32 = 1024;
/// The largest `max_concurrency` believed.
pub const MAX_CONCURRENCY: u32 = 1024;
/// The largest `session_start_limit.total` believed.
pub const MAX_SESSION_STARTS: u32 = MAX_SHARD_COUNT * 2500 / 1000 * 5;
/// Discord's session-start window: `session_start_limit.total` starts per
/// 24 h (the identify budget keeps its account over it).
pub const WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// The longest `session_start_limit.reset_after` believed: Discord's window.
pub const MAX_RESET_AFTER: Duration = WINDOW;

/// A shard count, shard range or session-start figure past what is believed
/// or possible. Its `Display` says what is wrong; the caller names where the
/// figure came from.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CountError {
    /// A shard count of 0.
    NoShards,
    /// A shard count past [`MAX_SHARD_COUNT`].
    TooManyShards {
        /// The count given.
        count: u32,
    },
    /// A range whose last shard comes before its first.
    Backwards {
        /// The first shard id.
        first: u32,
        /// The last shard id.
        last: u32,
    },
    /// A shard id past the count.
    NoSuchShard {
        /// The id given.
        id: u32,
        /// The shard count.
        count: u32,
    },
    /// A range of more than [`MAX_SHARDS_PER_PROCESS`] shards.
    TooManyForOneProcess {
        /// The first shard id.
        first: u32,
        /// The last shard id.
        last: u32,
    },
    /// An empty range of ids.
    EmptyRange {
        /// The first shard id.
        first: u32,
        /// The last shard id.
        last: u32,
    },
    /// Text that is not `auto` or `FIRST-LAST/COUNT`.
    Unparsable {
        /// The text (trimmed).
        text: String,
    },
    /// `max_concurrency` outside `1..=`[`MAX_CONCURRENCY`].
    Concurrency {
        /// The figure given.
        max_concurrency: u32,
    },
    /// `total` past [`MAX_SESSION_STARTS`].
    SessionStarts {
        /// The figure given.
        total: u32,
    },
    /// `remaining` past `total`.
    RemainingPastTotal {
        /// `remaining`.
        remaining: u32,
        /// `total`.
        total: u32,
    },
    /// `reset_after` past [`MAX_RESET_AFTER`].
    ResetAfter {
        /// The figure given, in milliseconds.
        reset_after_ms: u64,
    },
    /// `GET /gateway/bot` recommended a count that is refused.
    Recommended {
        /// The recommendation.
        recommended: u32,
        /// Why it is refused.
        why: Box<CountError>,
    },
}

impl fmt::Display for CountError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CountError::NoShards => f.write_str("the shard count must be at least 1"),
            CountError::TooManyShards { count } => write!(
                f,
                "a shard count of {count} is more than {MAX_SHARD_COUNT} (at Discord's ~1 000 guilds per shard, 65 million guilds)"
            ),
            CountError::Backwards { first, last } => {
                write!(f, "the last shard {last} comes before the first {first}")
            }
            CountError::NoSuchShard { id, count } => write!(
                f,
                "shard {id} does not exist when there are {count} (ids are 0..={})",
                count.saturating_sub(1)
            ),
            CountError::TooManyForOneProcess { first, last } => {
                let shards = u64::from(*last) - u64::from(*first) + 1;
                write!(
                    f,
                    "shards {first}-{last} are {shards} shards for one process, which runs at most {MAX_SHARDS_PER_PROCESS}: give each process a range of them (`shards` [first, last, count] or SMOLCORD_SHARDS FIRST-LAST/COUNT) and one identify queue (`identify_queue_url`)"
                )
            }
            CountError::EmptyRange { first, last } => {
                write!(f, "the shard range {first}..={last} is empty")
            }
            CountError::Unparsable { text } => write!(
                f,
                "`{text}` is not `auto` or FIRST-LAST/COUNT (e.g. 0-7/16)"
            ),
            CountError::Concurrency { max_concurrency } => write!(
                f,
                "max_concurrency {max_concurrency} is not in 1..={MAX_CONCURRENCY} (Discord gives 1, and 16, 32, 64 ... to large bots)"
            ),
            CountError::SessionStarts { total } => write!(
                f,
                "total {total} is more than {MAX_SESSION_STARTS} session starts a day (Discord: 1000, large bots max(2000, guilds / 1000 × 5))"
            ),
            CountError::RemainingPastTotal { remaining, total } => {
                write!(f, "remaining {remaining} is more than total {total}")
            }
            CountError::ResetAfter { reset_after_ms } => write!(
                f,
                "reset_after {reset_after_ms} ms is longer than Discord's 24 h window"
            ),
            CountError::Recommended { recommended, why } => write!(
                f,
                "shards \"auto\": GET /gateway/bot recommends {recommended} shards: {why}"
            ),
        }
    }
}

impl std::error::Error for CountError {}

/// Checks a shard count.
pub fn check_shard_count(count: u32) -> Result<(), CountError> {
    if count == 0 {
        return Err(CountError::NoShards);
    }
    if count > MAX_SHARD_COUNT {
        return Err(CountError::TooManyShards { count });
    }
    Ok(())
}

/// Checks how many shards one process is to run.
pub fn check_shards_per_process(first: u32, last: u32) -> Result<(), CountError> {
    let shards = u64::from(last) - u64::from(first) + 1;
    if shards > u64::from(MAX_SHARDS_PER_PROCESS) {
        return Err(CountError::TooManyForOneProcess { first, last });
    }
    Ok(())
}

/// Checks `GET /gateway/bot`'s `session_start_limit`.
pub fn check_session_start_limit(limit: &SessionStartLimit) -> Result<(), CountError> {
    let SessionStartLimit {
        total,
        remaining,
        reset_after,
        max_concurrency,
    } = *limit;
    if !(1..=MAX_CONCURRENCY).contains(&max_concurrency) {
        return Err(CountError::Concurrency { max_concurrency });
    }
    if total > MAX_SESSION_STARTS {
        return Err(CountError::SessionStarts { total });
    }
    if remaining > total {
        return Err(CountError::RemainingPastTotal { remaining, total });
    }
    if u128::from(reset_after) > MAX_RESET_AFTER.as_millis() {
        return Err(CountError::ResetAfter {
            reset_after_ms: reset_after,
        });
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
            assert!(err.to_string().contains(why), "{bad:?}: {err}");
        }
        assert!(check_shard_count(MAX_SHARD_COUNT).is_ok());
        assert!(check_shard_count(MAX_SHARD_COUNT + 1)
            .unwrap_err()
            .to_string()
            .contains("65537 is more than 65536"));
        assert!(check_shards_per_process(0, 1023).is_ok());
        assert!(check_shards_per_process(0, u32::MAX - 1)
            .unwrap_err()
            .to_string()
            .contains("4294967295 shards for one process"));
    }
}
