//! The bot token, wrapped so it cannot leak.
//!
//! `Token` has no `Display`, and its `Debug` prints `Token(<redacted>)`, so a
//! token inside a config struct, an error or a log line cannot print itself.
//! The raw value is reached only through [`Token::expose`], whose call sites
//! are the few places that must send it (Identify, Resume, the
//! `Authorization` header).

use std::fmt;

/// A Discord bot token (without the `Bot ` prefix).
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// Wraps a token, trimming surrounding white space (a token read from a
    /// file usually ends with a newline) and a `Bot ` prefix some users paste.
    pub fn new(raw: &str) -> Option<Token> {
        let trimmed = raw.trim();
        let trimmed = trimmed.strip_prefix("Bot ").unwrap_or(trimmed).trim();
        if trimmed.is_empty() {
            None
        } else {
            Some(Token(trimmed.to_owned()))
        }
    }

    /// The raw token, for the wire only. Never log or format the result.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Removes every occurrence of the token from `text` (for error messages
    /// that echo server or library text).
    pub fn redact(&self, text: &str) -> String {
        text.replace(&self.0, "<redacted>")
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_token() {
        let token = Token::new("  Bot abc.def.ghi\n").unwrap();
        assert_eq!(token.expose(), "abc.def.ghi");
        let debug = format!("{token:?} {:?}", Some(&token));
        assert!(!debug.contains("abc"), "{debug}");
    }

    #[test]
    fn empty_token_is_refused() {
        assert!(Token::new(" \n").is_none());
    }

    #[test]
    fn redact_removes_every_copy() {
        let token = Token::new("s3cr3t").unwrap();
        assert_eq!(
            token.redact("a s3cr3t b s3cr3t"),
            "a <redacted> b <redacted>"
        );
    }
}
