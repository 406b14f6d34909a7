//! The configuration error: one readable sentence naming the file, the key
//! and what is wrong, because it is shown once, at start-up, to a person.

use std::fmt;

/// A configuration that cannot be used. The message names the file and the
/// key; it never contains the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    message: String,
}

impl ConfigError {
    pub(crate) fn new(message: impl Into<String>) -> ConfigError {
        ConfigError {
            message: message.into(),
        }
    }

    /// The message (same as `Display`).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}
