//! [`Emoji`]: a reaction's emoji as a [`super::Route`] carries it in its
//! path — a Unicode emoji (`👀`) or a server's custom one (`name:id`) —
//! inline and `Copy`, like the route's ids, and percent-encoded on the
//! way out as Discord wants it.
//!
//! ```
//! use smolcord::rest::Emoji;
//! let eyes = Emoji::new("👀").unwrap();
//! assert_eq!(eyes.as_str(), "👀");
//! assert!(Emoji::new("party:1234").is_ok());
//! assert!(Emoji::new("no/slash").is_err());
//! ```

use std::fmt;

/// The most bytes an emoji takes: a custom one is `name:id` (a name of 2
/// to 32 characters, an id of at most 20 digits); the longest Unicode
/// emoji (ZWJ sequences) are under 40 bytes.
pub const EMOJI_MAX_BYTES: usize = 64;

/// A reaction emoji (see the module doc).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Emoji {
    bytes: [u8; EMOJI_MAX_BYTES],
    len: u8,
}

impl Emoji {
    /// `text` as an emoji: not empty, at most [`EMOJI_MAX_BYTES`], no
    /// white space, control character or `/ ? # %`; a custom one as
    /// `name:id` with a numeric id. The error says what is wrong.
    pub fn new(text: &str) -> Result<Emoji, String> {
        if text.is_empty() || text.len() > EMOJI_MAX_BYTES {
            return Err(format!(
                "an emoji takes 1 to {EMOJI_MAX_BYTES} bytes ({} given)",
                text.len()
            ));
        }
        if text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "/?#%".contains(c))
        {
            return Err(format!("{text:?} is not an emoji"));
        }
        if let Some((name, id)) = text.split_once(':') {
            let digits = !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit());
            if name.is_empty() || !digits {
                return Err(format!(
                    "{text:?}: a custom emoji is `name:id` (the id in digits)"
                ));
            }
        }
        let mut bytes = [0; EMOJI_MAX_BYTES];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Ok(Emoji {
            bytes,
            len: text.len() as u8,
        })
    }

    /// The emoji as given.
    pub fn as_str(&self) -> &str {
        // Built from a `&str` of this length: always UTF-8.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }

    /// The path segment: every byte but ASCII letters, digits, `-._~:`
    /// percent-encoded.
    pub(crate) fn path_segment(&self) -> String {
        let mut out = String::with_capacity(usize::from(self.len) * 3);
        for &b in &self.bytes[..usize::from(self.len)] {
            if b.is_ascii_alphanumeric() || b"-._~:".contains(&b) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// The emoji a path segment names (percent-decoded), if valid.
    pub(crate) fn from_segment(segment: &str) -> Option<Emoji> {
        let raw = segment.as_bytes();
        let mut bytes = Vec::with_capacity(raw.len());
        let mut i = 0;
        while i < raw.len() {
            if raw[i] == b'%' {
                let hex = std::str::from_utf8(raw.get(i + 1..i + 3)?).ok()?;
                bytes.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                bytes.push(raw[i]);
                i += 1;
            }
        }
        Emoji::new(&String::from_utf8(bytes).ok()?).ok()
    }
}

impl fmt::Debug for Emoji {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Emoji({:?})", self.as_str())
    }
}

impl fmt::Display for Emoji {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emoji_round_trip_through_the_path() {
        for text in ["👀", "✅", "👩‍👩‍👧‍👦", "party:1234", "a"] {
            let emoji = Emoji::new(text).unwrap();
            let segment = emoji.path_segment();
            assert!(segment.is_ascii(), "{segment}");
            assert_eq!(Emoji::from_segment(&segment), Some(emoji), "{text}");
        }
        assert_eq!(Emoji::new("👀").unwrap().path_segment(), "%F0%9F%91%80");
    }

    #[test]
    fn bad_emoji_are_refused_with_a_reason() {
        assert!(Emoji::new("").is_err());
        assert!(Emoji::new("a b").is_err());
        assert!(Emoji::new("x:").unwrap_err().contains("name:id"));
        assert!(Emoji::new(&"x".repeat(65)).unwrap_err().contains("1 to 64"));
        assert_eq!(Emoji::from_segment("%ZZ"), None);
        assert_eq!(Emoji::from_segment("%F0%9F"), None, "cut UTF-8");
    }
}
