//! zstd-stream: one zstd decompression context for the whole connection.
//! Every binary WebSocket message is one whole gateway message, flushed by
//! the gateway but not ending the zstd frame (the frame never ends), so a
//! message is complete when its input is consumed, whatever
//! `ZSTD_decompressStream` returns. The inflated message is capped, so a
//! zstd bomb (a few bytes that decompress to gigabytes) is refused at the
//! cap instead of growing memory; the window the gateway may ask the
//! context to keep is capped too ([`MAX_WINDOW_LOG`]).

use super::DecompressError;
use zstd_safe::{DCtx, DParameter, InBuffer, OutBuffer};

/// The cap of [`ZstdInflater::new`], as for zlib-stream.
const DEFAULT_MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Largest zstd window accepted: 2^23 = 8 MiB of history the context keeps
/// for the whole connection. zstd's own decoder default would let a peer
/// make us hold 128 MiB. Levels 1-19 of the reference compressor use at
/// most 8 MiB (level 3, the default, 2 MiB on a stream of unknown size).
pub const MAX_WINDOW_LOG: u32 = 23;

/// Buffer capacity kept between messages; more is released after the
/// message that needed it.
const RETAINED_BYTES: usize = 64 * 1024;

/// Decompresses one connection's zstd-stream.
pub struct ZstdInflater {
    context: DCtx<'static>,
    /// Scratch space the message is decompressed into.
    output: Vec<u8>,
    max_message: usize,
}

impl std::fmt::Debug for ZstdInflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdInflater")
            .field("max_message", &self.max_message)
            .finish_non_exhaustive()
    }
}

/// The stream name in errors.
const STREAM: &str = "zstd-stream";

impl Default for ZstdInflater {
    fn default() -> Self {
        ZstdInflater::new()
    }
}

impl ZstdInflater {
    /// A fresh context (one per connection) with a 32 MiB cap.
    pub fn new() -> ZstdInflater {
        ZstdInflater::with_limit(DEFAULT_MAX_MESSAGE_BYTES)
    }

    /// A fresh context refusing messages over `max_message` bytes.
    pub fn with_limit(max_message: usize) -> ZstdInflater {
        let mut context = DCtx::create();
        // Only an out-of-range value can fail, and 23 is in range.
        let _ = context.set_parameter(DParameter::WindowLogMax(MAX_WINDOW_LOG));
        ZstdInflater {
            context,
            output: Vec::new(),
            max_message,
        }
    }

    /// Bytes the zstd context holds (its window and tables), for the budget.
    pub fn context_bytes(&self) -> usize {
        self.context.sizeof()
    }

    /// Decompresses one binary WebSocket message (one gateway message).
    pub fn push(&mut self, message: &[u8]) -> Result<String, DecompressError> {
        let max = self.max_message;
        if message.len() > max {
            return Err(DecompressError::TooLarge(
                STREAM,
                format!("compressed message exceeds {max} bytes"),
            ));
        }
        let decompressed = self.decompress(message);
        // Reused from message to message, but one huge message must not
        // pin its memory for the rest of the connection.
        if self.output.capacity() > RETAINED_BYTES {
            self.output = Vec::new();
        }
        decompressed
    }

    fn decompress(&mut self, message: &[u8]) -> Result<String, DecompressError> {
        let max = self.max_message;
        self.output.clear();
        let mut input = InBuffer::around(message);
        loop {
            if self.output.len() == self.output.capacity() {
                if self.output.len() >= max {
                    return Err(DecompressError::TooLarge(
                        STREAM,
                        format!("decompressed message exceeds {max} bytes"),
                    ));
                }
                let grow = self
                    .output
                    .capacity()
                    .max(4096)
                    .min(max - self.output.len());
                self.output.reserve_exact(grow);
            }
            let written = self.output.len();
            let read = input.pos();
            let mut output = OutBuffer::around_pos(&mut self.output, written);
            self.context
                .decompress_stream(&mut output, &mut input)
                .map_err(|code| {
                    DecompressError::Corrupt(STREAM, zstd_safe::get_error_name(code).to_owned())
                })?;
            let progressed = output.pos() > written || input.pos() > read;
            let output_full = self.output.len() == self.output.capacity();
            // Done when every byte is in and the context had room to spare
            // (a full buffer may hide output still held in the context).
            if input.pos() == message.len() && !output_full {
                break;
            }
            if !progressed && !output_full {
                return Err(DecompressError::Corrupt(STREAM, "stream stalled".into()));
            }
        }
        std::str::from_utf8(&self.output)
            .map(str::to_owned)
            .map_err(|_| {
                DecompressError::Corrupt(STREAM, "decompressed message is not UTF-8".into())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zstd_safe::zstd_sys::ZSTD_EndDirective;
    use zstd_safe::{CCtx, CParameter};

    /// A connection's stream: each message flushed, the frame never ended.
    fn compress_stream(messages: &[&str]) -> Vec<Vec<u8>> {
        let mut context = CCtx::create();
        context
            .set_parameter(CParameter::CompressionLevel(3))
            .unwrap();
        messages
            .iter()
            .map(|message| {
                let mut out = Vec::with_capacity(message.len() + 1024);
                let mut input = InBuffer::around(message.as_bytes());
                loop {
                    let pos = out.len();
                    out.reserve(1024);
                    let mut output = OutBuffer::around_pos(&mut out, pos);
                    let left = context
                        .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
                        .unwrap();
                    if left == 0 {
                        break;
                    }
                }
                out
            })
            .collect()
    }

    #[test]
    fn one_context_many_messages() {
        let big = format!("{{\"op\":0,\"d\":\"{}\"}}", "x".repeat(300_000));
        let messages = [
            "{\"op\":10,\"d\":{\"heartbeat_interval\":41250}}",
            &big,
            "{\"op\":11}",
            "{\"op\":11}",
        ];
        let frames = compress_stream(&messages);
        let mut inflater = ZstdInflater::new();
        for (frame, expected) in frames.iter().zip(messages) {
            assert_eq!(inflater.push(frame).unwrap(), expected);
        }
    }

    #[test]
    fn a_fresh_context_cannot_read_a_later_message() {
        let frames = compress_stream(&["{\"op\":11}", "{\"op\":11}"]);
        let mut fresh = ZstdInflater::new();
        // The second message has no frame header: not a zstd stream start.
        assert!(fresh.push(&frames[1]).is_err());
    }

    #[test]
    fn a_bomb_is_refused_at_the_cap() {
        let big = "x".repeat(2_000_000);
        let frames = compress_stream(&[&big]);
        assert!(
            frames[0].len() < 1_000,
            "compresses well: {}",
            frames[0].len()
        );
        let mut inflater = ZstdInflater::with_limit(100_000);
        assert!(matches!(
            inflater.push(&frames[0]),
            Err(DecompressError::TooLarge(..))
        ));
    }

    #[test]
    fn a_message_over_the_cap_is_refused_before_decompressing() {
        let mut inflater = ZstdInflater::with_limit(10_000);
        assert!(matches!(
            inflater.push(&[0u8; 10_001]),
            Err(DecompressError::TooLarge(..))
        ));
    }

    #[test]
    fn the_context_holds_the_window_the_stream_asks_for() {
        // Level 3 on a stream of unknown size: a 2 MiB window.
        let frames = compress_stream(&["{\"op\":11}"]);
        let mut inflater = ZstdInflater::new();
        inflater.push(&frames[0]).unwrap();
        let held = inflater.context_bytes();
        assert!(held > 2 << 20 && held < (2 << 20) + (768 << 10), "{held}");
        // The cap bounds what a stream can make it hold.
        let mut context = CCtx::create();
        context
            .set_parameter(CParameter::WindowLog(MAX_WINDOW_LOG))
            .unwrap();
        let mut out = Vec::with_capacity(4096);
        let mut input = InBuffer::around(b"{\"op\":11}");
        let mut output = OutBuffer::around(&mut out);
        context
            .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
            .unwrap();
        let mut inflater = ZstdInflater::new();
        inflater.push(&out).unwrap();
        let held = inflater.context_bytes();
        assert!(held < (8 << 20) + (768 << 10), "{held}");
    }

    #[test]
    fn a_window_over_the_cap_is_refused() {
        let mut context = CCtx::create();
        context
            .set_parameter(CParameter::WindowLog(MAX_WINDOW_LOG + 1))
            .unwrap();
        let mut out = Vec::with_capacity(4096);
        let mut input = InBuffer::around(b"{\"op\":11}");
        let mut output = OutBuffer::around(&mut out);
        context
            .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
            .unwrap();
        let mut inflater = ZstdInflater::new();
        assert!(matches!(
            inflater.push(&out),
            Err(DecompressError::Corrupt(..))
        ));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut inflater = ZstdInflater::new();
        assert!(inflater.push(&[1, 2, 3, 0, 0, 0xff, 0xff]).is_err());
        // An empty message is an empty text (then a JSON error upstream).
        assert_eq!(ZstdInflater::new().push(b"").unwrap(), "");
    }
}
