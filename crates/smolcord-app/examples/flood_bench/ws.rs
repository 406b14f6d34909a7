//! Just enough server-side WebSocket (RFC 6455) for the flood server: the
//! upgrade handshake, unmasked frames out, masked frames in.
//!
//! Written by hand on blocking std sockets so that sending an event costs
//! the server a copy into a batch buffer and nothing else: no per-message
//! allocation, locking or flushing that could make the server, rather than
//! the client under test, the bottleneck.

use async_tungstenite::tungstenite::handshake::derive_accept_key;
use std::io::{self, Read, Write};
use std::net::TcpStream;

pub const OP_CONTINUATION: u8 = 0x0;
pub const OP_TEXT: u8 = 0x1;
pub const OP_BINARY: u8 = 0x2;
pub const OP_CLOSE: u8 = 0x8;
pub const OP_PING: u8 = 0x9;
pub const OP_PONG: u8 = 0xA;

/// Appends the header of an unmasked (server) frame of `len` payload bytes.
pub fn push_header(buf: &mut Vec<u8>, fin: bool, opcode: u8, len: usize) {
    buf.push(if fin { 0x80 } else { 0 } | opcode);
    if len < 126 {
        buf.push(len as u8);
    } else if let Ok(len) = u16::try_from(len) {
        buf.push(126);
        buf.extend_from_slice(&len.to_be_bytes());
    } else {
        buf.push(127);
        buf.extend_from_slice(&(len as u64).to_be_bytes());
    }
}

/// Appends one complete unmasked frame.
pub fn push_frame(buf: &mut Vec<u8>, opcode: u8, payload: &[u8]) {
    push_header(buf, true, opcode, payload.len());
    buf.extend_from_slice(payload);
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// Reads the HTTP upgrade request, answers 101 and returns the request
/// target (path and query, e.g. `/?v=10&encoding=json&compress=zlib-stream`).
pub fn accept(stream: &mut TcpStream) -> io::Result<String> {
    // The client sends nothing after its request until our answer, so
    // reading in chunks cannot swallow a frame.
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > 16 * 1024 {
            return Err(bad("upgrade request longer than 16 KiB"));
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(bad("connection closed during the upgrade request"));
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut lines = head.split("\r\n");
    let target = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .ok_or_else(|| bad("no request line"))?
        .to_owned();
    let key = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("sec-websocket-key"))
        .map(|(_, value)| value.trim().to_owned())
        .ok_or_else(|| bad("no Sec-WebSocket-Key"))?;
    let answer = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
        derive_accept_key(key.as_bytes())
    );
    stream.write_all(answer.as_bytes())?;
    Ok(target)
}

/// Sends an upgrade request as a client (the raw sink) and reads the answer.
pub fn connect(stream: &mut TcpStream, host: &str, target: &str) -> io::Result<()> {
    let request = format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    stream.write_all(request.as_bytes())?;
    // Byte by byte: the server's first frame may follow at once.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 || stream.read(&mut byte)? == 0 {
            return Err(bad("no upgrade answer"));
        }
        head.push(byte[0]);
    }
    if !head.starts_with(b"HTTP/1.1 101") {
        return Err(bad("upgrade refused"));
    }
    Ok(())
}

/// One frame as read.
pub struct Frame {
    pub opcode: u8,
    pub payload: Vec<u8>,
}

/// Reads one frame, masked (from a client) or not; payloads over `max`
/// bytes are an error. Fragmentation is not reassembled: gateway clients
/// send small single frames.
pub fn read_frame(reader: &mut impl Read, max: usize) -> io::Result<Frame> {
    let mut head = [0u8; 2];
    reader.read_exact(&mut head)?;
    let opcode = head[0] & 0x0f;
    let masked = head[1] & 0x80 != 0;
    let len = match head[1] & 0x7f {
        126 => {
            let mut ext = [0u8; 2];
            reader.read_exact(&mut ext)?;
            u64::from(u16::from_be_bytes(ext))
        }
        127 => {
            let mut ext = [0u8; 8];
            reader.read_exact(&mut ext)?;
            u64::from_be_bytes(ext)
        }
        n => u64::from(n),
    };
    if len > max as u64 {
        return Err(bad(format!("a {len}-byte frame (limit {max})")));
    }
    let mut mask = [0u8; 4];
    if masked {
        reader.read_exact(&mut mask)?;
    }
    let mut payload = vec![0u8; len as usize];
    reader.read_exact(&mut payload)?;
    if masked {
        for (i, byte) in payload.iter_mut().enumerate() {
            *byte ^= mask[i % 4];
        }
    }
    Ok(Frame { opcode, payload })
}

/// Appends a masked (client) text frame; the zero mask is as valid as any.
pub fn push_client_text(buf: &mut Vec<u8>, text: &str) {
    let start = buf.len();
    push_header(buf, true, OP_TEXT, text.len());
    buf[start + 1] |= 0x80;
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(text.as_bytes());
}
