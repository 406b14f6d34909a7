//! Why a transport-compressed stream (zlib-stream, zstd-stream) could not
//! be decompressed: one error for both decoders, so the connection tells a
//! message over the cap from a broken stream the same way for each.

use std::fmt;

/// The stream could not be decompressed. The first field names the stream
/// (`"zlib-stream"`, `"zstd-stream"`), the second says what went wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum DecompressError {
    /// Corrupt or unreadable input.
    Corrupt(&'static str, String),
    /// A message (compressed or decompressed) over the cap.
    TooLarge(&'static str, String),
}

impl fmt::Display for DecompressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecompressError::Corrupt(stream, detail)
            | DecompressError::TooLarge(stream, detail) => write!(f, "{stream}: {detail}"),
        }
    }
}

impl std::error::Error for DecompressError {}
