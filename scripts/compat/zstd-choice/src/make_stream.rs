//! `make-stream FILE N LEVEL`: N MESSAGE_CREATEs (the flood benchmark's
//! shape, ~600 bytes, the content varying from event to event so the window
//! does not make them free) compressed as Discord's zstd-stream: one
//! context, each message flushed, the frame never ended. FILE holds each
//! message as a 4-byte little-endian length and its bytes; FILE.txt the
//! plain messages, one a line.

use std::io::Write;
use zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer};

fn message(seq: u64, rng: &mut u64) -> String {
    let mut words = String::new();
    for _ in 0..12 {
        // xorshift: reproducible, varied words.
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        words.push_str(["ship", "build", "deploy", "log", "pi", "queue", "gateway", "resume"][(*rng % 8) as usize]);
        words.push_str(&format!("-{} ", *rng % 10_000));
    }
    format!(
        r#"{{"t":"MESSAGE_CREATE","s":{seq},"op":0,"d":{{"id":"{}","channel_id":"1200000000000000007","author":{{"id":"1200000000000000042","username":"ci-bot","discriminator":"0","global_name":null,"avatar":null,"bot":true}},"content":"{words}","timestamp":"2026-11-29T10:00:00.000000+00:00","edited_timestamp":null,"tts":false,"mention_everyone":false,"mentions":[],"mention_roles":[],"attachments":[],"embeds":[],"pinned":false,"type":0,"flags":0}}}}"#,
        1_300_000_000_000_000_000u64 + seq
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, file, count, level] = &args[..] else {
        eprintln!("usage: make-stream FILE N LEVEL");
        std::process::exit(2);
    };
    let count: u64 = count.parse().expect("N");
    let level: i32 = level.parse().expect("LEVEL");
    let mut context = CCtx::create();
    context.set_parameter(CParameter::CompressionLevel(level)).expect("level");
    let mut out = std::io::BufWriter::new(std::fs::File::create(file).expect("FILE"));
    let mut text = std::io::BufWriter::new(std::fs::File::create(format!("{file}.txt")).expect("FILE.txt"));
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let (mut plain, mut packed) = (0u64, 0u64);
    let mut buf = Vec::with_capacity(4096);
    for seq in 1..=count {
        let message = message(seq, &mut rng);
        buf.clear();
        let mut input = InBuffer::around(message.as_bytes());
        loop {
            let pos = buf.len();
            buf.reserve(1024);
            let mut output = OutBuffer::around_pos(&mut buf, pos);
            let left = context
                .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
                .expect("compress");
            if left == 0 {
                break;
            }
        }
        out.write_all(&(buf.len() as u32).to_le_bytes()).unwrap();
        out.write_all(&buf).unwrap();
        writeln!(text, "{message}").unwrap();
        plain += message.len() as u64;
        packed += buf.len() as u64;
    }
    out.flush().unwrap();
    text.flush().unwrap();
    eprintln!(
        "{count} messages, {:.0} bytes each plain, {:.0} compressed at level {level}",
        plain as f64 / count as f64,
        packed as f64 / count as f64
    );
}
