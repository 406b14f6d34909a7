//! A fixed-size latency histogram (1-2-5 buckets from 10 µs to 50 s), so the
//! account never grows however long the process runs. It serialises its
//! non-empty buckets too, so `smolcord status` can draw the distribution.

use serde::{Serialize, Serializer};
use std::time::Duration;

/// Upper bounds of the buckets in microseconds; a last bucket holds the rest.
pub const BOUNDS_US: [u64; 22] = [
    10,
    20,
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    u64::MAX,
];

/// Counts durations into fixed buckets and answers percentiles as the upper
/// bound of the bucket they fall in (a "no worse than" figure).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    counts: [u64; BOUNDS_US.len()],
    total: u64,
    max_us: u64,
}

impl Histogram {
    /// Adds one sample.
    pub fn record(&mut self, value: Duration) {
        let us = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        let bucket = BOUNDS_US.partition_point(|&bound| bound < us);
        self.counts[bucket.min(BOUNDS_US.len() - 1)] += 1;
        self.total += 1;
        self.max_us = self.max_us.max(us);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest sample.
    pub fn max(&self) -> Duration {
        Duration::from_micros(self.max_us)
    }

    /// Every bucket, in order: its upper bound (`None` for the last,
    /// unbounded one) and how many samples fell in it.
    pub fn buckets(&self) -> impl Iterator<Item = (Option<Duration>, u64)> + '_ {
        BOUNDS_US.iter().zip(self.counts).map(|(&bound, count)| {
            let upper = (bound != u64::MAX).then(|| Duration::from_micros(bound));
            (upper, count)
        })
    }

    /// The bucket upper bound at or below which `q` (0..=1) of the samples
    /// lie, capped by the maximum seen; `None` with no samples.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (count, bound) in self.counts.iter().zip(BOUNDS_US) {
            seen += count;
            if seen >= rank {
                return Some(Duration::from_micros(bound.min(self.max_us)));
            }
        }
        Some(self.max())
    }
}

impl Serialize for Histogram {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
        let buckets: Vec<BucketEntry> = self
            .buckets()
            .filter(|&(_, count)| count > 0)
            .map(|(upper, count)| BucketEntry {
                le_us: upper.map(|d| d.as_micros() as u64),
                count,
            })
            .collect();
        let mut s = serializer.serialize_struct("Histogram", 5)?;
        s.serialize_field("count", &self.total)?;
        s.serialize_field("p50_ms", &ms(self.quantile(0.5)))?;
        s.serialize_field("p99_ms", &ms(self.quantile(0.99)))?;
        s.serialize_field("max_ms", &ms((self.total > 0).then(|| self.max())))?;
        s.serialize_field("buckets", &buckets)?;
        s.end()
    }
}

/// One non-empty bucket as serialised: samples `<= le_us` (and above the
/// previous bound); `le_us` is `null` for the last, unbounded bucket.
#[derive(Serialize)]
struct BucketEntry {
    le_us: Option<u64>,
    count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_bucket_bounds_capped_by_max() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), None);
        for _ in 0..98 {
            h.record(Duration::from_micros(150));
        }
        h.record(Duration::from_millis(3));
        h.record(Duration::from_millis(700));
        assert_eq!(h.quantile(0.5), Some(Duration::from_micros(200)));
        assert_eq!(h.quantile(0.99), Some(Duration::from_millis(5)));
        assert_eq!(h.quantile(1.0), Some(Duration::from_millis(700)));
        assert_eq!(h.max(), Duration::from_millis(700));
    }

    #[test]
    fn serialises_the_non_empty_buckets() {
        let mut h = Histogram::default();
        h.record(Duration::from_micros(150));
        h.record(Duration::from_micros(160));
        h.record(Duration::from_secs(100));
        let json = serde_json::to_value(&h).unwrap();
        assert_eq!(
            json["buckets"],
            serde_json::json!([{"le_us": 200, "count": 2}, {"le_us": null, "count": 1}])
        );
        assert_eq!(h.buckets().count(), BOUNDS_US.len());
    }

    #[test]
    fn stays_fixed_size_and_handles_huge_values() {
        let mut h = Histogram::default();
        h.record(Duration::from_secs(10_000_000));
        h.record(Duration::ZERO);
        assert_eq!(h.count(), 2);
        assert_eq!(std::mem::size_of::<Histogram>(), (22 + 2) * 8);
    }
}
