//! zlib-stream: one inflate context for the whole connection; a gateway
//! message is complete when the buffered input ends with `00 00 ff ff`.
//! Both the buffered input and the inflated message are capped, so neither
//! a message that never ends nor a zip bomb can grow memory past the limit.

use super::DecompressError;
use flate2::{Decompress, FlushDecompress, Status};

const SYNC_FLUSH_SUFFIX: [u8; 4] = [0x00, 0x00, 0xff, 0xff];
/// The cap of [`Inflater::new`] (a zip bomb, or a guild far bigger than a
/// small host should hold).
const DEFAULT_MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Inflates one connection's zlib-stream.
pub struct Inflater {
    decompress: Decompress,
    /// Compressed frames of the message being received.
    input: Vec<u8>,
    /// Scratch space the message is inflated into.
    output: Vec<u8>,
    max_message: usize,
}

impl std::fmt::Debug for Inflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inflater")
            .field("max_message", &self.max_message)
            .finish_non_exhaustive()
    }
}

/// Buffer capacity kept between messages; more is released after the
/// message that needed it.
const RETAINED_BYTES: usize = 64 * 1024;

/// The stream name in errors.
const STREAM: &str = "zlib-stream";

impl Default for Inflater {
    fn default() -> Self {
        Inflater::new()
    }
}

impl Inflater {
    /// A fresh context (one per connection) with a 32 MiB cap.
    pub fn new() -> Inflater {
        Inflater::with_limit(DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// A fresh context refusing messages over `max_message` bytes.
    pub fn with_limit(max_message: usize) -> Inflater {
        Inflater {
            decompress: Decompress::new(true),
            input: Vec::new(),
            output: Vec::new(),
            max_message,
        }
    }

    /// Adds one binary frame; returns the message once it is complete.
    pub fn push(&mut self, frame: &[u8]) -> Result<Option<String>, DecompressError> {
        let max = self.max_message;
        if self.input.len() + frame.len() > max {
            self.input = Vec::new();
            return Err(DecompressError::TooLarge(
                STREAM,
                format!("compressed message exceeds {max} bytes"),
            ));
        }
        self.input.extend_from_slice(frame);
        if !self.input.ends_with(&SYNC_FLUSH_SUFFIX) {
            return Ok(None);
        }
        let inflated = self.inflate_input();
        self.input.clear();
        // The buffers are reused from message to message (no allocation
        // per event in a burst), but one huge message must not pin its
        // memory for the rest of the connection.
        if self.input.capacity() > RETAINED_BYTES {
            self.input = Vec::new();
        }
        if self.output.capacity() > RETAINED_BYTES {
            self.output = Vec::new();
        }
        inflated.map(Some)
    }

    /// Inflates the buffered input (ending with a sync flush) into a string.
    fn inflate_input(&mut self) -> Result<String, DecompressError> {
        let max = self.max_message;
        self.output.clear();
        let start_in = self.decompress.total_in();
        loop {
            if self.output.len() == self.output.capacity() {
                if self.output.len() >= max {
                    return Err(DecompressError::TooLarge(
                        STREAM,
                        format!("inflated message exceeds {max} bytes"),
                    ));
                }
                let grow = self
                    .output
                    .capacity()
                    .max(4096)
                    .min(max - self.output.len());
                self.output.reserve_exact(grow);
            }
            let consumed = (self.decompress.total_in() - start_in) as usize;
            let status = self
                .decompress
                .decompress_vec(
                    &self.input[consumed..],
                    &mut self.output,
                    FlushDecompress::Sync,
                )
                .map_err(|err| DecompressError::Corrupt(STREAM, err.to_string()))?;
            let consumed = (self.decompress.total_in() - start_in) as usize;
            let output_full = self.output.len() == self.output.capacity();
            if status == Status::StreamEnd || (consumed == self.input.len() && !output_full) {
                break;
            }
            if !output_full && status == Status::BufError {
                return Err(DecompressError::Corrupt(
                    STREAM,
                    "stream stalled before its end".into(),
                ));
            }
        }
        std::str::from_utf8(&self.output)
            .map(str::to_owned)
            .map_err(|_| DecompressError::Corrupt(STREAM, "inflated message is not UTF-8".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compress, Compression, FlushCompress};

    fn compress_stream(messages: &[&str]) -> Vec<Vec<u8>> {
        let mut compress = Compress::new(Compression::default(), true);
        messages
            .iter()
            .map(|message| {
                let mut out = Vec::with_capacity(message.len() + 1024);
                compress
                    .compress_vec(message.as_bytes(), &mut out, FlushCompress::Sync)
                    .unwrap();
                assert!(out.ends_with(&SYNC_FLUSH_SUFFIX));
                out
            })
            .collect()
    }

    #[test]
    fn one_context_many_messages_split_frames() {
        let big = format!("{{\"op\":0,\"d\":\"{}\"}}", "x".repeat(100_000));
        let messages = [
            "{\"op\":10,\"d\":{\"heartbeat_interval\":41250}}",
            &big,
            "{\"op\":11}",
        ];
        let frames = compress_stream(&messages);
        let mut inflater = Inflater::new();
        for (frame, expected) in frames.iter().zip(messages) {
            // Deliver each message in two WebSocket frames.
            let (a, b) = frame.split_at(frame.len() / 2);
            assert_eq!(inflater.push(a).unwrap(), None);
            assert_eq!(inflater.push(b).unwrap().as_deref(), Some(expected));
        }
    }

    #[test]
    fn a_fresh_context_cannot_read_a_later_message() {
        let frames = compress_stream(&["{\"op\":11}", "{\"op\":11}"]);
        let mut fresh = Inflater::new();
        assert!(fresh.push(&frames[1]).is_err());
    }

    #[test]
    fn a_bomb_is_refused_at_the_cap() {
        let big = "x".repeat(200_000);
        let frames = compress_stream(&[&big]);
        assert!(frames[0].len() < 10_000, "compresses well");
        let mut inflater = Inflater::with_limit(100_000);
        assert!(matches!(
            inflater.push(&frames[0]),
            Err(DecompressError::TooLarge(..))
        ));
    }

    #[test]
    fn an_endless_message_is_refused_at_the_cap() {
        let mut inflater = Inflater::with_limit(10_000);
        assert!(inflater.push(&[0u8; 6_000]).unwrap().is_none());
        assert!(matches!(
            inflater.push(&[0u8; 6_000]),
            Err(DecompressError::TooLarge(..))
        ));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut inflater = Inflater::new();
        assert!(inflater.push(&[1, 2, 3, 0, 0, 0xff, 0xff]).is_err());
    }
}
