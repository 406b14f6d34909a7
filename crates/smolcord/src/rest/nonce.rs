//! [`Nonce`]: the identity of a message being created, so that sending it
//! again creates nothing new.
//!
//! Discord's Create Message takes a `nonce` (at most 25 characters) and,
//! with `enforce_nonce`, returns the message already created with the same
//! nonce by the same author "in the past few minutes" instead of creating
//! another. A random nonce makes the REST client's own retries safe; a
//! nonce derived from what the message answers (a message id and a part
//! number, say) makes a re-send after a crash and restart safe too, as long
//! as it comes within Discord's window.

use std::fmt;

/// The longest nonce Discord takes.
pub const NONCE_MAX_CHARS: usize = 25;

/// A message nonce: 1 to [`NONCE_MAX_CHARS`] ASCII letters, digits, `.`,
/// `-` or `_`.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Nonce(String);

impl Nonce {
    /// A nonce from `text`; `None` if it is empty, longer than
    /// [`NONCE_MAX_CHARS`] or has other characters than those above.
    pub fn new(text: impl Into<String>) -> Option<Nonce> {
        let text = text.into();
        let tame = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_');
        (!text.is_empty() && text.len() <= NONCE_MAX_CHARS && text.bytes().all(tame))
            .then_some(Nonce(text))
    }

    /// A fresh random nonce (retries of one call are safe; nothing more).
    pub fn random() -> Nonce {
        Nonce(fastrand::u64(..).to_string())
    }

    /// The nonce's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Nonce({})", self.0)
    }
}

impl fmt::Display for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_are_short_and_tame() {
        assert_eq!(
            Nonce::new("r18446744073709551615.2").unwrap().as_str(),
            "r18446744073709551615.2"
        );
        assert!(Nonce::new("x".repeat(NONCE_MAX_CHARS)).is_some());
        assert!(Nonce::new("x".repeat(NONCE_MAX_CHARS + 1)).is_none());
        assert!(Nonce::new("").is_none());
        assert!(Nonce::new("a b").is_none());
        assert!(Nonce::new("é").is_none());
        assert!(Nonce::random().as_str().len() <= NONCE_MAX_CHARS);
    }
}
