//! Discord's clock, from the `Date` header of its REST answers.
//!
//! Message ids carry Discord's time (snowflakes); the host's clock may be
//! far off it — a Raspberry Pi has no real-time clock and runs on a stale
//! one after a power cut until NTP syncs, which is exactly when a
//! read-back of the gap is due. Whoever compares message times with "now"
//! or with when a session began asks [`ServerClock::skew_ms`] and shifts
//! the host's time by it. `Date` has whole seconds: the estimate is within
//! about a second (plus the answer's time in flight), which is what the
//! comparisons need (the read-back's margins are of that order).
//!
//! ```
//! use smolcord::rest::parse_http_date;
//! assert_eq!(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
//! assert_eq!(parse_http_date("yesterday"), None);
//! ```

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// What `Date` can tell: whole seconds.
const RESOLUTION_MS: i64 = 1_000;
/// A skew past this is logged (once): a clock that far off loses or
/// mislabels messages where it is compared with Discord's.
const LOG_SKEW_MS: i64 = 2_000;

/// The skew between Discord's clock and the host's, as last measured.
#[derive(Debug, Default)]
pub(crate) struct ServerClock {
    /// Discord's time minus the host's, in ms (valid once `known`).
    skew_ms: AtomicI64,
    known: AtomicBool,
    logged: AtomicBool,
}

impl ServerClock {
    /// An answer said `date` (the `Date` header) when the host's clock said
    /// `received`.
    pub(crate) fn record(&self, date: &str, received: SystemTime) {
        let Some(secs) = parse_http_date(date) else {
            return;
        };
        let Ok(host) = received.duration_since(UNIX_EPOCH) else {
            return;
        };
        // The header truncates to the second: its middle is the best guess.
        let server_ms = i64::try_from(secs).unwrap_or(i64::MAX / 2) * 1000 + 500;
        let host_ms = i64::try_from(host.as_millis()).unwrap_or(i64::MAX / 2);
        let skew = server_ms - host_ms;
        self.skew_ms.store(skew, Ordering::Relaxed);
        self.known.store(true, Ordering::Relaxed);
        if skew.abs() > LOG_SKEW_MS && !self.logged.swap(true, Ordering::Relaxed) {
            log::warn!(
                "the host clock is {:.1} s {} Discord's (the Date of its answers); message times are compared on Discord's clock",
                skew.abs() as f64 / 1000.0,
                if skew > 0 { "behind" } else { "ahead of" }
            );
        }
    }

    /// Discord's time minus the host's (ms), once an answer said; 0 for a
    /// skew within the header's resolution (a second): that much is noise,
    /// and shifting by it would only blur the host's finer clock.
    pub(crate) fn skew_ms(&self) -> Option<i64> {
        self.known.load(Ordering::Relaxed).then(|| {
            let skew = self.skew_ms.load(Ordering::Relaxed);
            if skew.abs() <= RESOLUTION_MS {
                0
            } else {
                skew
            }
        })
    }
}

/// Parses an HTTP date in its one current form, IMF-fixdate (RFC 9110
/// §5.6.7: `Sun, 06 Nov 1994 08:49:37 GMT`), to Unix seconds; `None` for
/// anything else (the obsolete forms are not sent by Discord).
pub fn parse_http_date(text: &str) -> Option<u64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut parts = text.split_ascii_whitespace();
    let _weekday = parts.next().filter(|w| w.ends_with(','))?;
    let day: i64 = parts.next()?.parse().ok()?;
    let month_name = parts.next()?;
    let month = MONTHS.iter().position(|m| *m == month_name)?;
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|n| n.parse::<i64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if parts.next() != Some("GMT") || parts.next().is_some() || hms.next().is_some() {
        return None;
    }
    if !(1..=31).contains(&day)
        || !(0..24).contains(&h)
        || !(0..60).contains(&m)
        || !(0..=60).contains(&s)
    {
        return None;
    }
    let days = days_from_civil(year, month as i64 + 1, day);
    u64::try_from(days * 86_400 + h * 3600 + m * 60 + s).ok()
}

/// Howard Hinnant's days_from_civil: days since 1970-01-01.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_parse_and_nonsense_does_not() {
        assert_eq!(parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date("Thu, 03 Dec 2026 00:21:12 GMT"),
            Some(1_796_257_272)
        );
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2028 23:59:59 GMT"),
            Some(1_835_481_599)
        );
        for bad in [
            "",
            "Thu, 03 Dec 2026 00:21:12 UTC",
            "Thu, 03 Foo 2026 00:21:12 GMT",
            "Thu, 32 Dec 2026 00:21:12 GMT",
            "Thu, 03 Dec 2026 24:00:00 GMT",
            "Thu, 03 Dec 2026 00:21 GMT",
            "Thursday 03 Dec 2026 00:21:12 GMT",
            "Thu, 03 Dec 2026 00:21:12 GMT extra",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_skew_is_discords_time_minus_the_hosts() {
        let clock = ServerClock::default();
        assert_eq!(clock.skew_ms(), None);
        // The host says 120 s earlier than Discord's Date.
        let host = UNIX_EPOCH + Duration::from_secs(1_796_257_272 - 120);
        clock.record("Thu, 03 Dec 2026 00:21:12 GMT", host);
        assert_eq!(clock.skew_ms(), Some(120_500));
        clock.record("not a date", host);
        assert_eq!(clock.skew_ms(), Some(120_500), "kept");
        // Within the header's second: none.
        let host = UNIX_EPOCH + Duration::from_millis(1_796_257_272_900);
        clock.record("Thu, 03 Dec 2026 00:21:12 GMT", host);
        assert_eq!(clock.skew_ms(), Some(0));
    }
}
