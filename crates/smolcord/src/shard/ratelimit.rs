//! The gateway's send limit: 120 commands per 60 s per connection. Room is
//! reserved for heartbeats so user commands can never starve them.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Commands allowed per window.
pub const PERMITS: usize = 120;
/// The window.
pub const PERIOD: Duration = Duration::from_secs(60);

/// A sliding-window log of what was sent on one connection.
#[derive(Debug)]
pub struct CommandLimiter {
    sent: VecDeque<Instant>,
    reserved: usize,
}

impl CommandLimiter {
    /// A limiter for a connection beating every `interval`: reserves enough
    /// permits for every heartbeat in a window plus a few server requests.
    pub fn new(interval: Duration) -> CommandLimiter {
        let per_window = PERIOD.as_secs_f64() / interval.as_secs_f64().max(0.001);
        // +2: a possible extra beat at the window edge and one op 1 answer.
        let reserved = (per_window.ceil() as usize + 2).min(PERMITS / 2);
        CommandLimiter {
            sent: VecDeque::with_capacity(PERMITS),
            reserved,
        }
    }

    fn expire(&mut self, now: Instant) {
        while self
            .sent
            .front()
            .is_some_and(|&at| now.saturating_duration_since(at) >= PERIOD)
        {
            self.sent.pop_front();
        }
    }

    /// Permits reserved for heartbeats.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Whether a user command may go now.
    pub fn may_send_command(&mut self, now: Instant) -> bool {
        self.expire(now);
        self.sent.len() + self.reserved < PERMITS
    }

    /// When a user command may go next (now if it may go now).
    pub fn next_command_slot(&mut self, now: Instant) -> Instant {
        self.expire(now);
        let room = PERMITS - self.reserved;
        if self.sent.len() < room {
            return now;
        }
        // The slot frees when the (len - room + 1)-th oldest entry expires.
        let index = self.sent.len() - room;
        self.sent.get(index).map_or(now, |&at| at + PERIOD)
    }

    /// Records anything sent (heartbeats included: they count too).
    pub fn record(&mut self, now: Instant) {
        self.expire(now);
        if self.sent.len() == PERMITS {
            // Only heartbeats can get here: the reserve ran out, which means
            // the interval is absurdly short. Keep the log bounded.
            self.sent.pop_front();
        }
        self.sent.push_back(now);
    }

    /// Sends counted in the current window.
    pub fn in_window(&mut self, now: Instant) -> usize {
        self.expire(now);
        self.sent.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserves_room_for_heartbeats() {
        let limiter = CommandLimiter::new(Duration::from_millis(41_250));
        assert_eq!(limiter.reserved(), 4);
        let fast = CommandLimiter::new(Duration::from_millis(1000));
        assert_eq!(fast.reserved(), 60);
        let absurd = CommandLimiter::new(Duration::from_millis(1));
        assert_eq!(absurd.reserved(), 60);
    }

    #[test]
    fn a_flood_of_commands_stops_short_and_resumes_as_the_window_slides() {
        let start = Instant::now();
        let mut limiter = CommandLimiter::new(Duration::from_millis(41_250));
        let mut sent = 0;
        while limiter.may_send_command(start) {
            limiter.record(start + Duration::from_millis(sent));
            sent += 1;
        }
        assert_eq!(sent, 116);
        // Heartbeats can still be recorded within the 120.
        for _ in 0..4 {
            limiter.record(start + Duration::from_secs(1));
        }
        assert_eq!(limiter.in_window(start + Duration::from_secs(1)), 120);
        let slot = limiter.next_command_slot(start + Duration::from_secs(1));
        assert!(
            slot >= start + PERIOD && slot <= start + PERIOD + Duration::from_secs(1),
            "{:?}",
            slot - start
        );
        assert!(limiter.may_send_command(start + PERIOD + Duration::from_secs(2)));
    }
}
