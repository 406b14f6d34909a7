//! `decode FILE`: decompresses a zstd-stream made by `make-stream` and
//! prints messages, bytes out and CPU time (user + system, this process).
//! With `c`: one DCtx, each message decompressed in full as it arrives (what
//! smolcord does). With `rust` (ruzstd): the whole stream at once, with the
//! frame ended by an empty last block first, because ruzstd hands out the
//! last window's worth of output only once a frame has ended, so it cannot
//! return one gateway message as it arrives. Without either: only reads
//! the file (the baseline for the size).

use std::time::Instant;

fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn messages(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= data.len() {
        let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        out.push(&data[at + 4..at + 4 + len]);
        at += 4 + len;
    }
    out
}

#[cfg(feature = "c")]
fn decode(messages: &[&[u8]]) -> u64 {
    use zstd_safe::{DCtx, InBuffer, OutBuffer};
    let mut context = DCtx::create();
    let mut out: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut total = 0u64;
    for message in messages {
        out.clear();
        let mut input = InBuffer::around(message);
        loop {
            let pos = out.len();
            let mut output = OutBuffer::around_pos(&mut out, pos);
            context.decompress_stream(&mut output, &mut input).expect("decompress");
            if input.pos() == message.len() && out.len() < out.capacity() {
                break;
            }
            out.reserve(out.capacity());
        }
        total += out.len() as u64;
        std::hint::black_box(&out);
    }
    total
}

#[cfg(all(feature = "rust", not(feature = "c")))]
fn decode(messages: &[&[u8]]) -> u64 {
    use std::io::Read;
    let mut stream: Vec<u8> = messages.concat();
    stream.extend_from_slice(&[0x01, 0x00, 0x00]);
    let mut decoder = ruzstd::decoding::StreamingDecoder::new(&stream[..]).expect("frame header");
    let mut out = Vec::new();
    decoder.read_to_end(&mut out).expect("decompress");
    std::hint::black_box(&out);
    out.len() as u64
}

#[cfg(not(any(feature = "c", feature = "rust")))]
fn decode(messages: &[&[u8]]) -> u64 {
    messages.iter().map(|m| m.len() as u64).sum()
}

fn main() {
    let file = std::env::args().nth(1).expect("usage: decode FILE");
    let data = std::fs::read(&file).expect("FILE");
    let messages = messages(&data);
    let (cpu, wall) = (cpu_seconds(), Instant::now());
    let total = decode(&messages);
    let (cpu, wall) = (cpu_seconds() - cpu, wall.elapsed().as_secs_f64());
    println!(
        "{} messages, {total} bytes out, {:.3} s CPU ({:.2} µs/message), {:.3} s wall ({:.0} messages/s)",
        messages.len(),
        cpu,
        cpu * 1e6 / messages.len() as f64,
        wall,
        messages.len() as f64 / wall
    );
}
