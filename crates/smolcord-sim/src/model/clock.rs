//! Saturating time arithmetic. Durations come from configuration and the
//! control API (`{"kind":"stall","ms":18446744073709551615}`); std's
//! `Instant + Duration` and `Duration::mul_f64` panic on overflow, and the
//! simulator must not.

use std::time::{Duration, Instant};

/// Far enough to mean "never" for a test or a demo run.
const FAR: Duration = Duration::from_secs(365 * 24 * 3600);

/// `from + by`, capped at a year ahead.
pub(crate) fn later(from: Instant, by: Duration) -> Instant {
    from.checked_add(by.min(FAR)).unwrap_or(from)
}

/// `d × factor` for a non-negative factor (NaN and negatives count as 0),
/// capped at a year.
pub(crate) fn scaled(d: Duration, factor: f64) -> Duration {
    let factor = if factor.is_nan() {
        0.0
    } else {
        factor.max(0.0)
    };
    Duration::try_from_secs_f64(d.as_secs_f64() * factor)
        .unwrap_or(FAR)
        .min(FAR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absurd_inputs_saturate() {
        let now = Instant::now();
        assert!(later(now, Duration::MAX) > now);
        assert_eq!(scaled(Duration::from_secs(2), 1.5), Duration::from_secs(3));
        assert_eq!(scaled(Duration::MAX, 1e300), FAR);
        assert_eq!(scaled(Duration::from_secs(1), f64::NAN), Duration::ZERO);
        assert_eq!(scaled(Duration::from_secs(1), -4.0), Duration::ZERO);
        assert_eq!(scaled(Duration::from_secs(1), f64::INFINITY), FAR);
    }
}
