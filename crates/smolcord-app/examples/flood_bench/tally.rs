//! The summary line a flood client prints once it has the events it was
//! told to expect, shared by smolcord's shard client and the twilight peer
//! (`scripts/compat/twilight-flood` includes this file), and read back by
//! the benchmark:
//!
//! ```text
//! flood-summary count=200000 first=2 last=200001 out_of_order=0 duplicates=0 elapsed_ms=812.4
//! ```
//!
//! Constant memory: in order and exactly once means every sequence number
//! is the previous one plus one. `out_of_order` counts events that are not
//! (a skip, a repeat or a step back); `duplicates` those at or below the
//! highest seen (a repeat, or a late one after a skip).
#![allow(dead_code)] // each side uses its half

use std::time::Instant;

#[derive(Default)]
pub struct Tally {
    pub count: u64,
    first: Option<u64>,
    last: u64,
    out_of_order: u64,
    duplicates: u64,
    started: Option<Instant>,
    latest: Option<Instant>,
}

impl Tally {
    pub fn record(&mut self, seq: u64) {
        let now = Instant::now();
        if self.first.is_none() {
            self.first = Some(seq);
            self.started = Some(now);
        } else {
            if seq != self.last + 1 {
                self.out_of_order += 1;
            }
            if seq <= self.last {
                self.duplicates += 1;
            }
        }
        self.count += 1;
        self.last = self.last.max(seq);
        self.latest = Some(now);
    }

    pub fn line(&self) -> String {
        let elapsed = match (self.started, self.latest) {
            (Some(a), Some(b)) => (b - a).as_secs_f64() * 1000.0,
            _ => 0.0,
        };
        format!(
            "flood-summary count={} first={} last={} out_of_order={} duplicates={} elapsed_ms={elapsed:.1}",
            self.count,
            self.first.unwrap_or(0),
            self.last,
            self.out_of_order,
            self.duplicates,
        )
    }
}

/// A summary line, read back.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub first: u64,
    pub last: u64,
    pub out_of_order: u64,
    pub duplicates: u64,
    pub elapsed_ms: f64,
}

impl Summary {
    pub fn parse(line: &str) -> Option<Summary> {
        let rest = line.trim().strip_prefix("flood-summary ")?;
        let mut summary = Summary::default();
        for field in rest.split_whitespace() {
            let (key, value) = field.split_once('=')?;
            match key {
                "count" => summary.count = value.parse().ok()?,
                "first" => summary.first = value.parse().ok()?,
                "last" => summary.last = value.parse().ok()?,
                "out_of_order" => summary.out_of_order = value.parse().ok()?,
                "duplicates" => summary.duplicates = value.parse().ok()?,
                "elapsed_ms" => summary.elapsed_ms = value.parse().ok()?,
                _ => {}
            }
        }
        Some(summary)
    }

    /// Whether events `first..=first + expected - 1` arrived once, in order.
    pub fn once_in_order(&self, first: u64, expected: u64) -> bool {
        self.count == expected
            && self.first == first
            && self.last == first + expected - 1
            && self.out_of_order == 0
            && self.duplicates == 0
    }
}
