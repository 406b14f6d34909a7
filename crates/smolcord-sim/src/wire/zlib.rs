//! The deflate side of Discord's two compression modes.
//!
//! - `compress=zlib-stream` (transport): one zlib context for the whole
//!   connection; every message is flushed with Z_SYNC_FLUSH, so each binary
//!   frame ends with `00 00 ff ff` and can only be inflated by a context that
//!   saw every frame before it.
//! - Identify `compress: true` (payload): each frame is a complete,
//!   independent zlib stream (what serenity inflates per binary frame).

use flate2::{Compress, Compression, FlushCompress, Status};
use std::io::Write;

/// The Z_SYNC_FLUSH marker every zlib-stream message ends with.
pub const SYNC_FLUSH_SUFFIX: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// A connection's zlib-stream deflate context.
pub(crate) struct ZlibStream {
    compress: Compress,
}

impl ZlibStream {
    pub(crate) fn new() -> ZlibStream {
        ZlibStream {
            compress: Compress::new(Compression::default(), true),
        }
    }

    /// Deflates one message, continuing the connection's stream.
    pub(crate) fn compress(&mut self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len() / 2 + 64);
        let mut consumed = 0;
        loop {
            if out.len() == out.capacity() {
                out.reserve(out.capacity().max(1024));
            }
            let before_in = self.compress.total_in();
            let status =
                self.compress
                    .compress_vec(&input[consumed..], &mut out, FlushCompress::Sync);
            consumed += (self.compress.total_in() - before_in) as usize;
            match status {
                // Done once all input is in and the flush fit in the space
                // left (a full buffer may hide a pending flush).
                Ok(Status::Ok | Status::BufError)
                    if consumed == input.len() && out.len() < out.capacity() =>
                {
                    break
                }
                Ok(_) => {}
                Err(err) => {
                    // Cannot happen with in-memory buffers; an empty frame
                    // lets the client's inflate report the problem.
                    log::error!("sim: zlib-stream deflate failed: {err}");
                    break;
                }
            }
        }
        out
    }
}

/// Compresses one payload as a complete zlib stream.
pub(crate) fn compress_payload(input: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), Compression::default());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(input);
    encoder.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Decompress, FlushDecompress};

    fn inflate(ctx: &mut Decompress, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        let mut consumed = 0;
        loop {
            out.reserve(1024);
            let before = ctx.total_in();
            ctx.decompress_vec(&input[consumed..], &mut out, FlushDecompress::Sync)
                .unwrap();
            consumed += (ctx.total_in() - before) as usize;
            if consumed == input.len() && out.len() < out.capacity() {
                return out;
            }
        }
    }

    #[test]
    fn each_message_ends_with_sync_flush_and_needs_the_shared_context() {
        let mut stream = ZlibStream::new();
        let mut ctx = Decompress::new(true);
        let big = "y".repeat(200_000) + &fastrand::u64(..).to_string();
        for text in ["{\"op\":10}", big.as_str(), "{\"op\":11}"] {
            let frame = stream.compress(text.as_bytes());
            assert!(frame.ends_with(&SYNC_FLUSH_SUFFIX));
            assert_eq!(inflate(&mut ctx, &frame), text.as_bytes());
        }
        // A second message alone does not inflate in a fresh context.
        let second = stream.compress(b"{\"op\":1}");
        let mut fresh = Decompress::new(true);
        let mut out = Vec::with_capacity(64);
        assert!(fresh
            .decompress_vec(&second, &mut out, FlushDecompress::Sync)
            .is_err());
    }

    #[test]
    fn payload_compression_is_self_contained() {
        let text = b"{\"op\":0,\"t\":\"READY\"}";
        let packed = compress_payload(text);
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(&packed[..]), &mut out)
            .unwrap();
        assert_eq!(out, text);
    }
}
