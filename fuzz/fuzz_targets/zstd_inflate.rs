//! zstd-stream decompression, two ways:
//! - arbitrary bytes cut into messages: never a panic, never a hang, memory
//!   within the cap (a small one, so bombs reach it quickly);
//! - a real zstd-stream (the input's lines compressed with one context and
//!   flushed each, the frame never ended, as Discord sends them): every
//!   message comes back exactly, from its own WebSocket message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smolcord::transport::ZstdInflater;
use zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer};

/// Small, so that a bomb hits it within one input.
const CAP: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode & 1 == 0 {
        // 1..=128 bytes per message.
        let message_len = usize::from(mode >> 1) + 1;
        let mut inflater = ZstdInflater::with_limit(CAP);
        for message in rest.chunks(message_len) {
            match inflater.push(message) {
                Ok(text) => assert!(text.len() <= CAP),
                Err(_) => return,
            }
        }
    } else if let Ok(text) = std::str::from_utf8(rest) {
        // Levels -3..=9: the fast negative levels make other block types.
        round_trip(text, i32::from(mode >> 1) % 13 - 3);
    }
});

fn round_trip(text: &str, level: i32) {
    let mut context = CCtx::create();
    context
        .set_parameter(CParameter::CompressionLevel(level))
        .expect("level");
    let mut inflater = ZstdInflater::with_limit(CAP);
    for message in text.split('\n').filter(|m| !m.is_empty()) {
        let compressed = compress_message(&mut context, message.as_bytes());
        let got = inflater.push(&compressed).expect("valid input decompresses");
        assert_eq!(got, message, "the message comes back");
    }
}

/// One message, flushed (ZSTD_e_flush), the frame left open.
fn compress_message(context: &mut CCtx<'_>, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 64);
    let mut input = InBuffer::around(message);
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.capacity().max(64));
        }
        let pos = out.len();
        let mut output = OutBuffer::around_pos(&mut out, pos);
        let left = context
            .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
            .expect("compress");
        if left == 0 {
            return out;
        }
    }
}
