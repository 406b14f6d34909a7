//! `enforce_nonce` on `POST /channels/{id}/messages`, the way Discord does
//! it: a message sent with `"enforce_nonce": true` and a `nonce` that the
//! same author used within the window is not created again; the answer is
//! the original message.
//!
//! Discord's Create Message reference, `enforce_nonce`
//! (<https://discord.com/developers/docs/resources/message#create-message>):
//! "If true and nonce is present, it will be checked for uniqueness in the
//! past few minutes. If another message was created by the same author
//! with the same nonce, that message will be returned and no new message
//! will be created." The Discord engineer who added it explained, in
//! discord/discord-api-docs#6647, that the intent is "to allow for a safe
//! retry for message sending" (and that a message deleted since is not
//! created again either). Discord publishes no exact window, so the
//! simulator's is configurable (`SimConfig::nonce_window`), by default a
//! conservative 2 minutes: a client must not count on more.
//! Every REST message comes from the one bot user here, so the author is
//! implied. A `nonce` is a string or an integer of at most 25 characters.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Nonces remembered at most (the oldest are forgotten first); far more
/// than a test sends within any window.
const NONCES_KEPT: usize = 10_000;

/// Longest nonce Discord takes.
pub(crate) const NONCE_MAX_CHARS: usize = 25;

/// Where the message first created with a nonce lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Original {
    pub(crate) channel_id: u64,
    pub(crate) message_id: u64,
}

/// The nonces seen within the window.
pub(crate) struct NonceBook {
    window: Duration,
    seen: HashMap<String, Original>,
    /// Arrival order, for expiry.
    order: VecDeque<(Instant, String)>,
}

impl NonceBook {
    pub(crate) fn new(window: Duration) -> NonceBook {
        NonceBook {
            window,
            seen: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// The message created with `nonce` within the window, if any.
    pub(crate) fn find(&mut self, nonce: &str, now: Instant) -> Option<Original> {
        self.expire(now);
        self.seen.get(nonce).copied()
    }

    /// Remembers that `nonce` created `original` at `now`.
    pub(crate) fn remember(&mut self, nonce: String, original: Original, now: Instant) {
        self.expire(now);
        if self.order.len() == NONCES_KEPT {
            if let Some((_, oldest)) = self.order.pop_front() {
                self.seen.remove(&oldest);
            }
        }
        self.seen.insert(nonce.clone(), original);
        self.order.push_back((now, nonce));
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) <= self.window {
                break;
            }
            if let Some((_, nonce)) = self.order.pop_front() {
                self.seen.remove(&nonce);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_remembered_for_the_window_only() {
        let t0 = Instant::now();
        let window = Duration::from_secs(120);
        let mut book = NonceBook::new(window);
        let first = Original {
            channel_id: 1,
            message_id: 10,
        };
        assert_eq!(book.find("n1", t0), None);
        book.remember("n1".into(), first, t0);
        assert_eq!(book.find("n1", t0 + window), Some(first));
        assert_eq!(book.find("n2", t0 + window), None);
        assert_eq!(
            book.find("n1", t0 + window + Duration::from_millis(1)),
            None
        );
    }

    #[test]
    fn the_book_is_bounded() {
        let t0 = Instant::now();
        let mut book = NonceBook::new(Duration::from_secs(3600));
        let original = Original {
            channel_id: 1,
            message_id: 1,
        };
        for n in 0..=NONCES_KEPT {
            book.remember(n.to_string(), original, t0);
        }
        assert_eq!(book.seen.len(), NONCES_KEPT);
        assert_eq!(book.find("0", t0), None, "the oldest is forgotten");
        assert!(book.find(&NONCES_KEPT.to_string(), t0).is_some());
    }
}
