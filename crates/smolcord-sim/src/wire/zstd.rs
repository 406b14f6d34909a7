//! The compress side of `compress=zstd-stream`, as Discord serves it: one
//! zstd compression context for the whole connection, one zstd frame that
//! never ends, and each gateway message one binary WebSocket message,
//! flushed (`ZSTD_e_flush`: the client can decompress all of it at once)
//! but not ending the frame, so a message can only be read by a context
//! that read every message before it.

use zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer};

/// zstd's default level. Discord does not say which it uses.
const LEVEL: i32 = 3;

/// A connection's zstd-stream compression context.
pub(crate) struct ZstdStream {
    context: CCtx<'static>,
}

impl ZstdStream {
    pub(crate) fn new() -> ZstdStream {
        let mut context = CCtx::create();
        // Only an out-of-range level can fail.
        let _ = context.set_parameter(CParameter::CompressionLevel(LEVEL));
        ZstdStream { context }
    }

    /// Compresses one message, continuing the connection's frame.
    pub(crate) fn compress(&mut self, input: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(input.len() / 2 + 64);
        let mut input = InBuffer::around(input);
        loop {
            if out.len() == out.capacity() {
                out.reserve(out.capacity().max(1024));
            }
            let written = out.len();
            let mut output = OutBuffer::around_pos(&mut out, written);
            match self.context.compress_stream2(
                &mut output,
                &mut input,
                ZSTD_EndDirective::ZSTD_e_flush,
            ) {
                // 0: all input in and flushed.
                Ok(0) => break,
                Ok(_) => {}
                Err(code) => {
                    // Cannot happen with in-memory buffers; what was made
                    // lets the client's decoder report the problem.
                    log::error!(
                        "sim: zstd-stream compress failed: {}",
                        zstd_safe::get_error_name(code)
                    );
                    break;
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smolcord::transport::ZstdInflater;

    #[test]
    fn each_message_is_whole_and_needs_the_shared_context() {
        let mut stream = ZstdStream::new();
        let mut inflater = ZstdInflater::new();
        let big = "y".repeat(300_000) + &fastrand::u64(..).to_string();
        for text in ["{\"op\":10}", big.as_str(), "{\"op\":11}", "{\"op\":11}"] {
            let frame = stream.compress(text.as_bytes());
            assert_eq!(inflater.push(&frame).unwrap(), text);
        }
        // The frame has not ended: a later message alone is not a stream.
        let later = stream.compress(b"{\"op\":1}");
        assert!(ZstdInflater::new().push(&later).is_err());
        // And repeated text is cheap: the window spans messages.
        let again = stream.compress(big.as_bytes());
        assert!(again.len() < 100, "{} bytes", again.len());
    }
}
