//! A minimal gateway + HTTP test client for the simulator's tests: raw
//! async-tungstenite on smol, and raw HTTP/1.1 over async-net. Every wait
//! is bounded; a timeout panics with what was awaited.

use async_net::TcpStream;
use async_tungstenite::tungstenite::Message;
use async_tungstenite::WebSocketStream;
use flate2::{Decompress, FlushDecompress};
use futures_lite::{AsyncReadExt, AsyncWriteExt, StreamExt};
use serde_json::{json, Value};
use smolcord::transport::ZstdInflater;
use smolcord_sim::{SimConfig, Simulator, DEFAULT_SIM_TOKEN, SYNC_FLUSH_SUFFIX};
use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::wait::{self, block_within};

/// Bound on any single wait.
pub const WAIT: Duration = Duration::from_secs(5);

/// Runs a test body with an overall bound of 30 s.
pub fn run<F: Future<Output = ()>>(f: F) {
    block_within(Duration::from_secs(30), f)
}

/// Awaits `f` or panics naming `what` after [`WAIT`].
pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    wait::within(what, WAIT, f).await
}

pub fn sim() -> Simulator {
    sim_with(SimConfig::default())
}

pub fn sim_with(config: SimConfig) -> Simulator {
    Simulator::start(config).expect("simulator starts")
}

/// A fast heartbeat configuration.
pub fn fast(interval_ms: u64) -> SimConfig {
    SimConfig {
        heartbeat_interval: Duration::from_millis(interval_ms),
        ..SimConfig::default()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Inflate {
    None,
    /// zlib-stream: one context for the connection.
    Stream,
    /// Identify `compress: true`: each binary frame on its own.
    Payload,
    /// zstd-stream: one context for the connection, one message per frame.
    Zstd,
}

/// What the client saw next.
#[derive(Debug)]
pub enum Seen {
    Frame(Value),
    /// A frame that is not JSON.
    Garbage(String),
    /// A close frame with this code.
    Closed(Option<u16>),
    /// The connection ended without a close frame.
    Dropped,
}

pub struct Client {
    pub ws: WebSocketStream<TcpStream>,
    pub mode: Inflate,
    inflate: Decompress,
    unzstd: ZstdInflater,
    pending: Vec<u8>,
    /// What each binary frame decompressed to (zstd-stream), in order.
    pub binary_texts: Vec<String>,
    /// Raw binary frames received (for framing checks).
    pub binary_frames: Vec<Vec<u8>>,
    pub text_frames: usize,
    pub last_seq: Option<u64>,
}

impl Client {
    /// Connects to `sim` at `path_and_query` (e.g. `/?v=10&encoding=json`).
    pub async fn connect(sim: &Simulator, path_and_query: &str) -> Client {
        Client::connect_addr(sim.local_addr(), path_and_query).await
    }

    pub async fn connect_addr(addr: SocketAddr, path_and_query: &str) -> Client {
        let tcp = within("TCP connect", TcpStream::connect(addr))
            .await
            .expect("TCP connect");
        let url = format!("ws://{addr}{path_and_query}");
        let (ws, _) = within(
            "websocket handshake",
            async_tungstenite::client_async(url, tcp),
        )
        .await
        .expect("websocket handshake");
        let mode = if path_and_query.contains("compress=zlib-stream") {
            Inflate::Stream
        } else if path_and_query.contains("compress=zstd-stream") {
            Inflate::Zstd
        } else {
            Inflate::None
        };
        Client {
            ws,
            mode,
            inflate: Decompress::new(true),
            unzstd: ZstdInflater::new(),
            pending: Vec::new(),
            binary_texts: Vec::new(),
            binary_frames: Vec::new(),
            text_frames: 0,
            last_seq: None,
        }
    }

    /// Connects with `?v=10&encoding=json` and reads Hello; returns the
    /// client and the heartbeat interval.
    pub async fn hello(sim: &Simulator) -> (Client, u64) {
        let mut client = Client::connect(sim, "/?v=10&encoding=json").await;
        let interval = client.expect_hello().await;
        (client, interval)
    }

    pub async fn expect_hello(&mut self) -> u64 {
        let hello = self.expect_op(10).await;
        hello["d"]["heartbeat_interval"]
            .as_u64()
            .expect("Hello has heartbeat_interval")
    }

    pub async fn send(&mut self, value: Value) {
        self.send_text(&value.to_string()).await;
    }

    pub async fn send_text(&mut self, text: &str) {
        within("send", self.ws.send(Message::text(text.to_owned())))
            .await
            .expect("send");
    }

    pub async fn send_binary(&mut self, bytes: &[u8]) {
        within("send", self.ws.send(Message::binary(bytes.to_vec())))
            .await
            .expect("send");
    }

    pub async fn heartbeat(&mut self) {
        let d = self.last_seq.map_or(Value::Null, |s| json!(s));
        self.send(json!({"op": 1, "d": d})).await;
    }

    pub async fn identify(&mut self, intents: u64) {
        self.identify_with(json!({"token": DEFAULT_SIM_TOKEN, "intents": intents}))
            .await;
    }

    /// Sends Identify with `fields` merged over default properties.
    pub async fn identify_with(&mut self, fields: Value) {
        let mut d =
            json!({"properties": {"os": "linux", "browser": "sim-test", "device": "sim-test"}});
        if let (Some(d), Some(fields)) = (d.as_object_mut(), fields.as_object()) {
            for (k, v) in fields {
                d.insert(k.clone(), v.clone());
            }
        }
        self.send(json!({"op": 2, "d": d})).await;
    }

    /// Identifies and reads READY; returns it.
    pub async fn identify_ready(&mut self, intents: u64) -> Value {
        self.identify(intents).await;
        let ready = self.expect_dispatch().await;
        assert_eq!(ready["t"], "READY", "{ready}");
        ready
    }

    pub async fn resume(&mut self, session_id: &str, seq: u64) {
        self.send(json!({"op": 6, "d": {"token": DEFAULT_SIM_TOKEN, "session_id": session_id, "seq": seq}}))
            .await;
    }

    /// The next thing that happens on the connection.
    pub async fn next(&mut self) -> Seen {
        within("a gateway frame", self.next_unbounded()).await
    }

    async fn next_unbounded(&mut self) -> Seen {
        loop {
            let message = match self.ws.next().await {
                None | Some(Err(_)) => return Seen::Dropped,
                Some(Ok(message)) => message,
            };
            let text = match message {
                Message::Text(text) => {
                    self.text_frames += 1;
                    text.as_str().to_owned()
                }
                Message::Binary(bytes) => {
                    self.binary_frames.push(bytes.to_vec());
                    match self.mode {
                        Inflate::None => panic!("unexpected binary frame"),
                        Inflate::Payload => {
                            let mut out = String::new();
                            flate2::read::ZlibDecoder::new(&bytes[..])
                                .read_to_string_sync(&mut out);
                            out
                        }
                        Inflate::Stream => {
                            self.pending.extend_from_slice(&bytes);
                            if !self.pending.ends_with(&SYNC_FLUSH_SUFFIX) {
                                continue;
                            }
                            let input = std::mem::take(&mut self.pending);
                            String::from_utf8(inflate_all(&mut self.inflate, &input))
                                .expect("inflated UTF-8")
                        }
                        Inflate::Zstd => {
                            let text = self.unzstd.push(&bytes).expect("zstd-stream message");
                            self.binary_texts.push(text.clone());
                            text
                        }
                    }
                }
                Message::Close(frame) => return Seen::Closed(frame.map(|f| u16::from(f.code))),
                _ => continue,
            };
            return match serde_json::from_str::<Value>(&text) {
                Ok(value) => {
                    if let Some(s) = value["s"].as_u64() {
                        self.last_seq = Some(s);
                    }
                    Seen::Frame(value)
                }
                Err(_) => Seen::Garbage(text),
            };
        }
    }

    /// The next frame; panics on anything else.
    pub async fn frame(&mut self) -> Value {
        match self.next().await {
            Seen::Frame(value) => value,
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    /// The next frame, which must have opcode `op`.
    pub async fn expect_op(&mut self, op: u64) -> Value {
        let frame = self.frame().await;
        assert_eq!(frame["op"], op, "expected op {op}, got {frame}");
        frame
    }

    /// The next dispatch, skipping heartbeat ACKs.
    pub async fn expect_dispatch(&mut self) -> Value {
        loop {
            let frame = self.frame().await;
            match frame["op"].as_u64() {
                Some(11) => continue,
                Some(0) => return frame,
                _ => panic!("expected a dispatch, got {frame}"),
            }
        }
    }

    /// Reads until the connection closes; returns the close code. Frames
    /// before the close are skipped.
    pub async fn expect_close(&mut self) -> Option<u16> {
        loop {
            match self.next().await {
                Seen::Closed(code) => return code,
                Seen::Dropped => return None,
                _ => continue,
            }
        }
    }

    /// Sends a close frame with `code` and waits for the connection to end.
    pub async fn close(mut self, code: u16) {
        use async_tungstenite::tungstenite::protocol::frame::CloseFrame;
        let frame = CloseFrame {
            code: code.into(),
            reason: "test".into(),
        };
        let _ = within("close", self.ws.close(Some(frame))).await;
        loop {
            match within("close echo", self.ws.next()).await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                _ => continue,
            }
        }
    }

    /// Drops TCP without a close frame.
    pub fn drop_tcp(self) {
        let _ = self.ws.get_ref().shutdown(std::net::Shutdown::Both);
    }
}

trait ReadToStringSync {
    fn read_to_string_sync(&mut self, out: &mut String);
}

impl<R: std::io::Read> ReadToStringSync for R {
    fn read_to_string_sync(&mut self, out: &mut String) {
        std::io::Read::read_to_string(self, out).expect("payload inflates");
    }
}

/// Inflates one zlib-stream message with the connection's context.
pub fn inflate_all(ctx: &mut Decompress, input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() * 4 + 64);
    let mut consumed = 0;
    loop {
        let before = ctx.total_in();
        ctx.decompress_vec(&input[consumed..], &mut out, FlushDecompress::Sync)
            .expect("inflate");
        consumed += (ctx.total_in() - before) as usize;
        if consumed == input.len() && out.len() < out.capacity() {
            return out;
        }
        out.reserve(out.capacity().max(1024));
    }
}

/// Waits until `deadline` (used to beat on a fixed schedule).
pub async fn at(deadline: Instant) {
    async_io::Timer::at(deadline).await;
}

/// A raw HTTP reply.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "reply is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// A keep-alive HTTP/1.1 connection.
pub struct Http {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Http {
    pub async fn connect(sim: &Simulator) -> Http {
        Http::connect_addr(sim.local_addr()).await
    }

    pub async fn connect_addr(addr: SocketAddr) -> Http {
        let stream = within("TCP connect", TcpStream::connect(addr))
            .await
            .expect("connect");
        Http {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends raw bytes.
    pub async fn send_raw(&mut self, bytes: &[u8]) {
        within("HTTP write", self.stream.write_all(bytes))
            .await
            .expect("write");
    }

    /// Sends a request; `auth` adds `Authorization: Bot <default token>`.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        auth: bool,
        json: Option<&Value>,
    ) -> Reply {
        let token = auth.then_some(DEFAULT_SIM_TOKEN);
        self.request_as(token, method, path, json).await
    }

    /// Sends a request with `Authorization: Bot <token>` if `token` is set.
    pub async fn request_as(
        &mut self,
        token: Option<&str>,
        method: &str,
        path: &str,
        json: Option<&Value>,
    ) -> Reply {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: sim\r\nUser-Agent: DiscordBot (test, 1)\r\n"
        );
        if let Some(token) = token {
            head.push_str(&format!("Authorization: Bot {token}\r\n"));
        }
        let body = json.map(|j| j.to_string()).unwrap_or_default();
        if json.is_some() {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        self.send_raw(head.as_bytes()).await;
        self.send_raw(body.as_bytes()).await;
        self.read_reply().await
    }

    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        let n = within("HTTP read", self.stream.read(&mut chunk))
            .await
            .expect("read");
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    /// Whether the server closed the connection (EOF with nothing left).
    pub async fn is_closed(&mut self) -> bool {
        self.buf.is_empty() && !self.fill().await
    }

    pub async fn read_reply(&mut self) -> Reply {
        let head_end = loop {
            if let Some(pos) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break pos + 4;
            }
            assert!(self.fill().await, "connection closed before a reply");
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        self.buf.drain(..head_end);
        let mut lines = head.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .expect("status line");
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map_or(0, |(_, v)| v.parse().expect("content-length"));
        while self.buf.len() < length {
            assert!(self.fill().await, "connection closed inside a body");
        }
        let body = self.buf.drain(..length).collect();
        Reply {
            status,
            headers,
            body,
        }
    }
}

/// One request on a fresh connection.
pub async fn http(
    sim: &Simulator,
    method: &str,
    path: &str,
    auth: bool,
    json: Option<&Value>,
) -> Reply {
    Http::connect(sim)
        .await
        .request(method, path, auth, json)
        .await
}
