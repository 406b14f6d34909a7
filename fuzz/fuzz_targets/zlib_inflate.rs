//! zlib-stream inflate, two ways:
//! - arbitrary bytes cut into frames: never a panic, memory within the cap;
//! - a real zlib-stream (the input's lines compressed with one context and
//!   a sync flush each, as Discord sends them, cut into frames at fuzzed
//!   points): every message comes back exactly, on its last frame.
#![no_main]

use flate2::{Compress, Compression, FlushCompress};
use libfuzzer_sys::fuzz_target;
use smolcord::transport::Inflater;

const SUFFIX: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    // 1..=128 bytes per frame.
    let frame_len = usize::from(mode >> 1) + 1;
    if mode & 1 == 0 {
        let mut inflater = Inflater::new();
        for frame in rest.chunks(frame_len) {
            if inflater.push(frame).is_err() {
                return;
            }
        }
    } else if let Ok(text) = std::str::from_utf8(rest) {
        round_trip(text, frame_len, u32::from(mode % 10));
    }
});

fn round_trip(text: &str, frame_len: usize, level: u32) {
    let mut compress = Compress::new(Compression::new(level), true);
    let mut inflater = Inflater::new();
    for message in text.split('\n').filter(|m| !m.is_empty()) {
        let stream = compress_message(&mut compress, message.as_bytes());
        let frames = cut(&stream, frame_len);
        let (last, early) = frames.split_last().expect("at least one frame");
        for frame in early {
            assert_eq!(inflater.push(frame).expect("valid input inflates"), None);
        }
        let got = inflater.push(last).expect("valid input inflates");
        assert_eq!(got.as_deref(), Some(message), "the message comes back");
    }
}

/// One message, ending in a sync flush (`00 00 ff ff`).
fn compress_message(compress: &mut Compress, message: &[u8]) -> Vec<u8> {
    let start = compress.total_in();
    let mut out = Vec::with_capacity(message.len() + 64);
    loop {
        let consumed = (compress.total_in() - start) as usize;
        compress
            .compress_vec(&message[consumed..], &mut out, FlushCompress::Sync)
            .expect("compress");
        let done = compress.total_in() - start == message.len() as u64;
        if done && out.ends_with(&SUFFIX) && out.len() < out.capacity() {
            return out;
        }
        out.reserve(out.capacity().max(64));
    }
}

/// Frames of `len` bytes, except that no frame but the last may end in the
/// sync marker: a client (any client) would take it for a message's end.
fn cut(stream: &[u8], len: usize) -> Vec<&[u8]> {
    let mut frames = Vec::new();
    let mut start = 0;
    let mut end = len;
    while end < stream.len() {
        if !stream[..end].ends_with(&SUFFIX) {
            frames.push(&stream[start..end]);
            start = end;
        }
        end += len;
    }
    frames.push(&stream[start..]);
    frames
}
