//! [`ParseError`]: text that is not how a protocol value is written (a
//! snowflake, an intent name), from a config file, the environment or a
//! peer. It names the text (at most 40 characters of it) and what was
//! expected; the caller names where the text came from.

use std::fmt;

/// Text that is not how a protocol value is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    text: String,
    expected: &'static str,
}

impl ParseError {
    pub(crate) fn new(text: &str, expected: &'static str) -> ParseError {
        ParseError {
            text: text.chars().take(40).collect(),
            expected,
        }
    }

    /// The text refused (at most its first 40 characters).
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not {}", self.text, self.expected)
    }
}

impl std::error::Error for ParseError {}
