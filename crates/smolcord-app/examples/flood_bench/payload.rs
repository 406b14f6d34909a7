//! What the flood server says, as WebSocket frames: Hello, READY, heartbeat
//! ACKs and MESSAGE_CREATE dispatches, in plain text, zlib-stream or
//! zstd-stream.
//!
//! The objects carry the field set of `crates/smolcord-sim/src/model/objects.rs`, which
//! twilight-model deserializes strictly (`crates/smolcord-sim/tests/sim/sim_compat.rs`). The flood's
//! MESSAGE_CREATE is a DM from another bot: both clients decode it in full,
//! and the bridge does the least with it (decoded, classified "from a
//! bot", dropped), so its rows measure the gateway path, not the agent.
//!
//! zlib-stream without deflating at line rate: one deflate context per
//! connection, as Discord keeps, but every piece is ended with a *full*
//! flush (Z_FULL_FLUSH: the sync marker `00 00 ff ff` plus a reset of the
//! history), so a compressed piece never refers to anything before it and
//! is valid at any position of the stream. The event's parts that vary
//! (`s` and the message id, which comes first in `d`) sit together at its
//! start: a frame is one stored (uncompressed) deflate block with
//! `{"t":"MESSAGE_CREATE","s":SEQ,"op":0,"d":{"id":"ID`, then the rest,
//! compressed once per connection. So, like Discord's, each message is
//! one compressed block (one Huffman table for the client to build) ending
//! in `00 00 ff ff`; sending it is a few copies, and ACKs can be
//! compressed and slipped in anywhere. The difference: no history shared
//! between messages, so frames are larger than Discord's and inflate more
//! literals (both clients inflate the same bytes). [`self_check`] inflates
//! such a stream with one fresh context before any benchmark runs.
//!
//! zstd-stream is compressed at line rate, as Discord does: one zstd
//! context per connection (level 1, the fastest of the normal levels, so
//! the server keeps ahead), each message flushed (`ZSTD_e_flush`) and the
//! frame never ended, so the window spans messages. Its events' content
//! is pseudo-random letters (same length, seeded by the sequence number):
//! with the fixed content of the other two modes every event after the
//! first would cost 17 bytes, so the socket buffers would hold a quarter of
//! a million events ahead of a heartbeat ACK, and zstd would decode
//! little but copies. [`self_check`] reads that stream with smolcord's
//! decoder too.

use crate::compression::Wire;
use crate::ws::{self, push_frame, push_header, OP_BINARY, OP_TEXT};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd_safe::{CCtx, CParameter, InBuffer, OutBuffer};

/// The bot's own user id (READY).
const BOT_ID: u64 = 1_100_000_000_000_000_001;
/// Flood messages come from this other bot.
const OTHER_BOT_ID: u64 = 1_200_000_000_000_000_042;
/// `--flood guild`: messages come from this person.
const PERSON_ID: u64 = 1_200_000_000_000_000_043;
/// The end marker for the bridge comes from this user (not a bot).
const STRANGER_ID: u64 = 1_200_000_000_000_000_099;
/// Message ids are this plus the sequence number (unique, snowflake-sized).
const MESSAGE_ID_BASE: u64 = 1_300_000_000_000_000_000;
/// A fixed Discord timestamp.
const TIMESTAMP: &str = "2026-11-29T10:00:00.000000+00:00";
/// The flood's message text.
const CONTENT: &str = "build 4812 finished: 1312 tests passed, 0 failed; artifacts uploaded";

/// Discord's Z_SYNC_FLUSH marker, which ends every zlib-stream message.
pub const SYNC_FLUSH_SUFFIX: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

const TRACE: &str = r#""_trace":["[\"flood-bench\",{\"micros\":0.0}]"]"#;

pub fn hello(interval_ms: u64) -> String {
    format!(r#"{{"t":null,"s":null,"op":10,"d":{{"heartbeat_interval":{interval_ms},{TRACE}}}}}"#)
}

pub const HEARTBEAT_ACK: &str = r#"{"t":null,"s":null,"op":11,"d":null}"#;

/// READY as sequence 1.
pub fn ready(resume_gateway_url: &str) -> String {
    format!(
        concat!(
            r#"{{"t":"READY","s":1,"op":0,"d":{{"v":10,"user_settings":{{}},"#,
            r#""user":{{"id":"{bot}","username":"flood-bench","discriminator":"0","global_name":null,"avatar":null,"bot":true,"verified":true,"mfa_enabled":false,"email":null,"flags":0,"public_flags":0,"locale":"en-US","premium_type":0}},"#,
            r#""session_type":"normal","session_id":"f100d0000000000000000000000be4c4","resume_gateway_url":"{url}","#,
            r#""relationships":[],"private_channels":[],"presences":[],"guilds":[],"guild_join_requests":[],"#,
            r#""geo_ordered_rtc_regions":["local"],"shard":[0,1],"application":{{"id":"{bot}","flags":0}},{trace}}}}}"#
        ),
        bot = BOT_ID,
        url = resume_gateway_url,
        trace = TRACE
    )
}

fn author(id: u64, name: &str, bot: bool) -> String {
    let bot = if bot { r#","bot":true"# } else { "" };
    format!(
        r#"{{"username":"{name}","public_flags":0,"id":"{id}","global_name":null,"discriminator":"0","avatar":null{bot}}}"#
    )
}

/// A MESSAGE_CREATE dispatch in Discord's envelope order (`t`, `s`, `op`,
/// `d`), the message id first in `d`; `seq` and `id` are spliced in as
/// they are (numbers or placeholders).
fn message_create(seq: &str, id: &str, author: &str, content: &str) -> String {
    message_in(seq, id, author, content, DM_PLACE)
}

/// Where a message is: `channel_type`, `channel_id` and, in a guild,
/// `guild_id` and the author's `member`, as JSON fields.
type Place = &'static str;
const DM_PLACE: Place = r#""channel_type":1,"channel_id":"1200000000000000007""#;
/// A guild text channel the bridge does not answer in (`--flood guild`).
const GUILD_PLACE: Place = concat!(
    r#""channel_type":0,"channel_id":"1300000000000000102","guild_id":"1300000000000000100","#,
    r#""member":{"roles":[],"premium_since":null,"pending":false,"nick":null,"mute":false,"joined_at":"2026-11-01T10:00:00.000000+00:00","flags":0,"deaf":false,"communication_disabled_until":null,"banner":null,"avatar":null}"#
);

/// `--flood guild`: the flood is messages from a person in a server
/// channel the bridge does not answer in (what GUILD_MESSAGES brings),
/// instead of DMs from another bot. Set once, before any event is built.
pub static GUILD_FLOOD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn guild_flood() -> bool {
    GUILD_FLOOD.load(std::sync::atomic::Ordering::Relaxed)
}

fn message_in(seq: &str, id: &str, author: &str, content: &str, place: Place) -> String {
    format!(
        concat!(
            r#"{{"t":"MESSAGE_CREATE","s":{seq},"op":0,"d":{{"id":"{id}","type":0,"tts":false,"#,
            r#""timestamp":"{ts}","pinned":false,"mentions":[],"mention_roles":[],"mention_everyone":false,"#,
            r#""flags":0,"embeds":[],"edited_timestamp":null,"content":"{content}","components":[],"#,
            r#"{place},"author":{author},"attachments":[],"reactions":[]}}}}"#
        ),
        seq = seq,
        ts = TIMESTAMP,
        id = id,
        content = content,
        place = place,
        author = author
    )
}

/// A flood event's author and place: another bot in a DM, or (`--flood
/// guild`) a person in a server channel.
fn flood_author_and_place() -> (String, Place) {
    if guild_flood() {
        (author(PERSON_ID, "someone", false), GUILD_PLACE)
    } else {
        (author(OTHER_BOT_ID, "ci-bot", true), DM_PLACE)
    }
}

/// Flood event `seq` as plain JSON.
pub fn flood_event(seq: u64) -> String {
    let (author, place) = flood_author_and_place();
    message_in(
        &seq.to_string(),
        &(MESSAGE_ID_BASE + seq).to_string(),
        &author,
        CONTENT,
        place,
    )
}

/// A DM from a user at `seq`: the bridge answers it over REST (a pairing
/// code), which tells the benchmark that everything before it was consumed.
pub fn end_marker(seq: u64) -> String {
    message_create(
        &seq.to_string(),
        &(MESSAGE_ID_BASE + seq).to_string(),
        &author(STRANGER_ID, "stranger", false),
        "hello?",
    )
}

/// A flood event (from the other bot) with `content_bytes` of text.
pub fn huge_event(seq: u64, content_bytes: usize) -> String {
    message_create(
        &seq.to_string(),
        &(MESSAGE_ID_BASE + seq).to_string(),
        &author(OTHER_BOT_ID, "ci-bot", true),
        &"x".repeat(content_bytes),
    )
}

/// `n` in decimal, in `out`.
fn decimal(mut n: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut at = out.len();
    loop {
        at -= 1;
        out[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &out[at..];
        }
    }
}

/// Deflates `input` and ends it with a full flush (see the module doc).
fn full_flush(compress: &mut Compress, input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() / 2 + 64);
    let mut consumed = 0;
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.capacity().max(1024));
        }
        let before = compress.total_in();
        let status = compress.compress_vec(&input[consumed..], &mut out, FlushCompress::Full);
        consumed += (compress.total_in() - before) as usize;
        match status {
            // Done once all input is in and the flush fit (a full buffer may
            // hide a pending flush).
            Ok(Status::Ok | Status::BufError)
                if consumed == input.len() && out.len() < out.capacity() =>
            {
                return out
            }
            Ok(_) => {}
            Err(err) => panic!("deflate into memory failed: {err}"),
        }
    }
}

const SEQ_SLOT: &str = "\u{1}SEQ\u{1}";
const ID_SLOT: &str = "\u{1}ID\u{1}";

/// The flood event around its two variable parts: head, middle, tail.
fn event_parts() -> [Vec<u8>; 3] {
    let (author, place) = flood_author_and_place();
    let template = message_in(SEQ_SLOT, ID_SLOT, &author, CONTENT, place);
    let (head, rest) = template.split_once(SEQ_SLOT).expect("seq slot");
    let (middle, tail) = rest.split_once(ID_SLOT).expect("id slot");
    [head, middle, tail].map(|part| part.as_bytes().to_vec())
}

struct Zlib {
    compress: Compress,
    /// The zlib header, sent in front of the first frame.
    header: Option<Vec<u8>>,
    /// The event after its message id, compressed with a full flush.
    tail: Vec<u8>,
}

/// Flood event `seq`'s content in zstd-stream mode (see the module doc):
/// `CONTENT`'s length of lowercase letters and spaces, overwritten in place.
fn vary_content(seq: u64, content: &mut [u8]) {
    let mut state = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for byte in content {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let pick = (state % 27) as u8;
        *byte = if pick == 26 { b' ' } else { b'a' + pick };
    }
}

/// Flood event `seq` as zstd-stream mode sends it.
pub fn varied_flood_event(seq: u64) -> String {
    let mut text = flood_event(seq).into_bytes();
    let at = find(&text, CONTENT.as_bytes()).expect("content in the event");
    vary_content(seq, &mut text[at..at + CONTENT.len()]);
    String::from_utf8(text).expect("letters and spaces")
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A connection's zstd-stream: the context and a reused scratch buffer.
struct Zstd {
    context: CCtx<'static>,
    scratch: Vec<u8>,
    /// Where the content starts in the event's tail.
    content_at: usize,
}

impl Zstd {
    fn new() -> Zstd {
        let mut context = CCtx::create();
        context
            .set_parameter(CParameter::CompressionLevel(1))
            .expect("zstd level 1");
        Zstd {
            context,
            scratch: Vec::with_capacity(4096),
            content_at: 0,
        }
    }

    /// One message, flushed, the frame left open: appended to `out`.
    fn compress(&mut self, message: &[u8], out: &mut Vec<u8>) {
        let mut input = InBuffer::around(message);
        loop {
            if out.capacity() - out.len() < 256 {
                out.reserve(out.capacity().max(1024));
            }
            let pos = out.len();
            let mut output = OutBuffer::around_pos(out, pos);
            let left = self
                .context
                .compress_stream2(&mut output, &mut input, ZSTD_EndDirective::ZSTD_e_flush)
                .expect("zstd into memory");
            if left == 0 {
                return;
            }
        }
    }
}

/// Turns gateway messages into frames for one connection.
pub struct Encoder {
    plain: [Vec<u8>; 3],
    zlib: Option<Zlib>,
    zstd: Option<Zstd>,
}

impl Encoder {
    pub fn new(wire: Wire) -> Encoder {
        let plain = event_parts();
        let zstd = (wire == Wire::Zstd).then(|| Zstd {
            content_at: find(&plain[2], CONTENT.as_bytes()).expect("content in the tail"),
            ..Zstd::new()
        });
        let zlib = (wire == Wire::Zlib).then(|| {
            let mut compress = Compress::new(Compression::default(), true);
            let header = Some(full_flush(&mut compress, b""));
            let tail = full_flush(&mut compress, &plain[2]);
            Zlib {
                compress,
                header,
                tail,
            }
        });
        Encoder { plain, zlib, zstd }
    }

    /// Appends one message as a frame (compressed now, if compressed).
    pub fn push_text(&mut self, buf: &mut Vec<u8>, text: &str) {
        if let Some(zstd) = &mut self.zstd {
            let mut payload = std::mem::take(&mut zstd.scratch);
            payload.clear();
            zstd.compress(text.as_bytes(), &mut payload);
            push_frame(buf, OP_BINARY, &payload);
            zstd.scratch = payload;
            return;
        }
        match &mut self.zlib {
            None => push_frame(buf, OP_TEXT, text.as_bytes()),
            Some(zlib) => {
                let mut payload = zlib.header.take().unwrap_or_default();
                payload.extend_from_slice(&full_flush(&mut zlib.compress, text.as_bytes()));
                push_frame(buf, OP_BINARY, &payload);
            }
        }
    }

    /// Appends flood event `seq`: copies only.
    pub fn push_event(&mut self, buf: &mut Vec<u8>, seq: u64) {
        let mut seq_digits = [0u8; 20];
        let seq_text = decimal(seq, &mut seq_digits);
        let mut id_digits = [0u8; 20];
        let id_text = decimal(MESSAGE_ID_BASE + seq, &mut id_digits);
        let [head, middle, tail] = &self.plain;
        let start = head.len() + seq_text.len() + middle.len() + id_text.len();
        if let Some(zstd) = &mut self.zstd {
            // The event's text, then its compressed bytes after it in the
            // same scratch buffer (no allocation per event).
            let mut scratch = std::mem::take(&mut zstd.scratch);
            scratch.clear();
            for part in [head, seq_text, middle, id_text, tail] {
                scratch.extend_from_slice(part);
            }
            let content =
                head.len() + seq_text.len() + middle.len() + id_text.len() + zstd.content_at;
            vary_content(seq, &mut scratch[content..content + CONTENT.len()]);
            let text_len = scratch.len();
            let mut compressed = scratch.split_off(text_len);
            zstd.compress(&scratch, &mut compressed);
            push_frame(buf, OP_BINARY, &compressed);
            scratch.clear();
            zstd.scratch = scratch;
            return;
        }
        match &mut self.zlib {
            None => {
                push_header(buf, true, OP_TEXT, start + tail.len());
                for part in [head, seq_text, middle, id_text, tail] {
                    buf.extend_from_slice(part);
                }
            }
            Some(zlib) => {
                let header = zlib.header.take().unwrap_or_default();
                // The stored block's header: BFINAL=0 BTYPE=00 (byte-aligned
                // after a flush), LEN, NLEN.
                let len = start as u16;
                push_header(
                    buf,
                    true,
                    OP_BINARY,
                    header.len() + 5 + start + zlib.tail.len(),
                );
                buf.extend_from_slice(&header);
                buf.push(0);
                buf.extend_from_slice(&len.to_le_bytes());
                buf.extend_from_slice(&(!len).to_le_bytes());
                for part in [head, seq_text, middle, id_text] {
                    buf.extend_from_slice(part);
                }
                buf.extend_from_slice(&zlib.tail);
            }
        }
    }
}

/// Inflates a zlib-stream made by [`Encoder`] (Hello, READY, events at small
/// and large sequence numbers, ACKs between them, the end marker) with one
/// fresh context, as a client does, and checks every message against its
/// plain text and that smolcord's `Message` decodes the event. Run before
/// any benchmark: a broken stream must fail loudly, not look like a slow
/// client.
pub fn self_check() -> Result<(), String> {
    let ready_text = ready("ws://127.0.0.1:1");
    let mut zlib = Encoder::new(Wire::Zlib);
    let mut zstd = Encoder::new(Wire::Zstd);
    let mut zstd_frames = Vec::new();
    let mut seqs = Vec::new();
    let mut frames = Vec::new();
    let mut expected = Vec::new();
    for (text, seq) in [
        (hello(500), None),
        (ready_text, None),
        (flood_event(2), Some(2)),
        (HEARTBEAT_ACK.to_owned(), None),
        (flood_event(3), Some(3)),
        (flood_event(1_000_001), Some(1_000_001)),
        (HEARTBEAT_ACK.to_owned(), None),
        (end_marker(1_000_002), None),
    ] {
        match seq {
            Some(seq) => {
                zlib.push_event(&mut frames, seq);
                zstd.push_event(&mut zstd_frames, seq);
                // The plain encoder's frame must carry the same text.
                let mut plain = Vec::new();
                Encoder::new(Wire::Plain).push_event(&mut plain, seq);
                let frame =
                    ws::read_frame(&mut &plain[..], usize::MAX).map_err(|e| e.to_string())?;
                if frame.payload != text.as_bytes() {
                    return Err(format!("plain event {seq} differs from its JSON"));
                }
                let value: serde_json::Value =
                    serde_json::from_str(&text).map_err(|e| format!("event {seq}: {e}"))?;
                serde_json::from_value::<smolcord::protocol::Message>(value["d"].clone())
                    .map_err(|e| format!("event {seq} is not a smolcord Message: {e}"))?;
            }
            None => {
                zlib.push_text(&mut frames, &text);
                zstd.push_text(&mut zstd_frames, &text);
            }
        }
        expected.push(text);
        seqs.push(seq);
    }
    let mut inflater = Decompress::new(true);
    let mut reader = &frames[..];
    for (i, text) in expected.iter().enumerate() {
        let frame = ws::read_frame(&mut reader, usize::MAX).map_err(|e| e.to_string())?;
        if !frame.payload.ends_with(&SYNC_FLUSH_SUFFIX) {
            return Err(format!("zlib frame {i} does not end with 00 00 ff ff"));
        }
        let mut out = Vec::with_capacity(text.len() + 64);
        let before = inflater.total_in();
        inflater
            .decompress_vec(&frame.payload, &mut out, FlushDecompress::Sync)
            .map_err(|e| format!("zlib frame {i} does not inflate: {e}"))?;
        if inflater.total_in() - before != frame.payload.len() as u64 || out != text.as_bytes() {
            return Err(format!("zlib frame {i} inflates to something else"));
        }
    }
    let mut unzstd = smolcord::transport::ZstdInflater::new();
    let mut reader = &zstd_frames[..];
    for (i, (text, seq)) in expected.iter().zip(&seqs).enumerate() {
        let frame = ws::read_frame(&mut reader, usize::MAX).map_err(|e| e.to_string())?;
        let got = unzstd
            .push(&frame.payload)
            .map_err(|e| format!("zstd frame {i}: {e}"))?;
        let want = seq.map_or_else(|| text.clone(), varied_flood_event);
        if want == *text && seq.is_some() {
            return Err(format!("zstd event {i} has the fixed content"));
        }
        serde_json::from_str::<serde_json::Value>(&want)
            .map_err(|e| format!("zstd event {i}: {e}"))?;
        if got != want {
            return Err(format!("zstd frame {i} decompresses to something else"));
        }
    }
    Ok(())
}
