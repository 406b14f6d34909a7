//! One gateway websocket connection: Hello, the strict command rules with
//! Discord's close codes, heartbeats and their timing, and faults.
//!
//! Each connection runs a reader (this state machine) and a writer (frames
//! from an ordered queue, delayed and compressed as asked) in one task.
//! Identify and Resume live in [`super::identify`].

use super::identify::{handle_resume, lenient_since, Answer};
use super::members;
use super::session_start::handle_identify;
use crate::model::clock::{later, scaled};
use crate::model::payload_checks::{self, Refusal};
use crate::state::conns::{ConnCmd, Out};
use crate::state::events::SimEvent;
use crate::state::faults::Fault;
use crate::state::shared::{Shared, State};
use crate::state::stats::ConnEnd;
use crate::wire::http::{HttpConn, Request, Response};
use crate::wire::tls::SimStream;
use crate::wire::zlib::{compress_payload, ZlibStream};
use crate::wire::zstd::ZstdStream;
use async_net::TcpStream;
use async_tungstenite::tungstenite::handshake::derive_accept_key;
use async_tungstenite::tungstenite::protocol::frame::CloseFrame;
use async_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use async_tungstenite::tungstenite::{Error as WsError, Message};
use async_tungstenite::{WebSocketReceiver, WebSocketSender, WebSocketStream};
use futures_lite::future::{or, pending};
use futures_lite::StreamExt;
use serde_json::Value;
use smolcord::protocol::{CloseCode, Frame, OpCode, MAX_PAYLOAD_BYTES};
use smolcord::wire::{Direction, WireTrace};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long to wait for the client's answer to a close frame.
const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Largest websocket message read: far above the 4096-byte payload limit
/// (so the limit is answered with 4002, as Discord does), low enough that
/// garbage cannot make the simulator buffer much.
const MAX_READ: usize = 1024 * 1024;

/// Takes over an upgrade request: answers 101 and runs the connection.
pub(crate) async fn serve(shared: Arc<Shared>, mut http: HttpConn, request: Request) {
    let key = request.header("sec-websocket-key").map(str::to_owned);
    let version_ok = request.header("sec-websocket-version") == Some("13");
    let Some(key) = key.filter(|_| version_ok) else {
        let response = Response::json(
            426,
            &serde_json::json!({"message": "websocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version: 13"}),
        )
        .with_header("Sec-WebSocket-Version", "13");
        let _ = http.write_response(&response, false).await;
        return;
    };
    let accept = Response {
        status: 101,
        headers: vec![
            ("Upgrade".into(), "websocket".into()),
            ("Connection".into(), "Upgrade".into()),
            (
                "Sec-WebSocket-Accept".into(),
                derive_accept_key(key.as_bytes()),
            ),
        ],
        body: Vec::new(),
    };
    if http.write_response(&accept, true).await.is_err() {
        return;
    }
    let HttpConn { stream, tcp, buf } = http;
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_READ))
        .max_frame_size(Some(MAX_READ));
    let ws = WebSocketStream::from_partially_read(stream, buf, Role::Server, Some(config)).await;
    let (sender, receiver) = ws.split();
    run(shared, tcp, request, sender, receiver).await;
}

/// How the query string asks to be served.
struct Params {
    /// Close code and reason if the parameters are refused.
    refusal: Option<Refusal>,
    /// The `compress` value served (`zlib-stream`, `zstd-stream`), if any.
    compression: Option<&'static str>,
}

fn read_params(request: &Request) -> Params {
    let mut refusal = None;
    // Discord still serves v6-v8 (deprecated) and answers v5 and below with
    // HTTP 400; the simulator accepts only the versions Discord lists as
    // available (9, 10) or none, so a client on an old version is noticed.
    match request.query_param("v") {
        None | Some("9" | "10") => {}
        Some(other) => {
            refusal = Some((
                CloseCode::INVALID_API_VERSION,
                format!("API version `{other}` is not served (use 10)"),
            ))
        }
    }
    match request.query_param("encoding") {
        None | Some("json") => {}
        Some(other) => {
            refusal = refusal.or(Some((
                CloseCode::DECODE_ERROR,
                format!("encoding `{other}` is not supported by the simulator (use json)"),
            )))
        }
    }
    let compression = match request.query_param("compress") {
        None => None,
        Some("zlib-stream") => Some("zlib-stream"),
        Some("zstd-stream") => Some("zstd-stream"),
        Some(other) => {
            // Discord ignores an unknown value the same way.
            log::info!("sim: compress={other} is not supported; sending uncompressed text frames");
            None
        }
    };
    Params {
        refusal,
        compression,
    }
}

async fn run(
    shared: Arc<Shared>,
    tcp: TcpStream,
    request: Request,
    sender: WebSocketSender<SimStream>,
    receiver: WebSocketReceiver<SimStream>,
) {
    let params = read_params(&request);
    let (out_tx, out_rx) = async_channel::unbounded();
    let (cmd_tx, cmd_rx) = async_channel::unbounded();
    let now = Instant::now();
    let id = {
        let mut state = shared.lock();
        let id = state.conns.open(out_tx, cmd_tx);
        state.stats.open(id, &request.path, &request.query, now);
        if request.query_param("v").is_none() {
            state.stats.totals.connections_without_version += 1;
            log::warn!(
                "sim: gateway connection {id} has no `v` in its URL: served as v10, but Discord \
                 would serve its default version (6, deprecated); ask for ?v=10"
            );
        }
        if let Some(stats) = state.stats.conn(id) {
            stats.compression = params.compression.map(str::to_owned);
            stats.user_agent = request.header("user-agent").map(str::to_owned);
        }
        state.emit(SimEvent::Connected {
            conn: id,
            path: request.path.clone(),
        });
        id
    };
    log::info!(
        "sim: gateway connection {id} on {}?{}",
        request.path,
        request.query
    );
    let trace = WireTrace::server(id, Some(shared.config.token.clone()));
    trace.connected(&format!("{}?{}", request.path, request.query));
    let interval = shared.config.heartbeat_interval;
    let mut reader = Reader {
        trace: trace.clone(),
        deadline_after: scaled(interval, shared.config.heartbeat_grace),
        shared,
        id,
        tcp,
        last_beat: now,
        deadline_base: now,
        session: None,
        drop_acks: 0,
        stall_until: None,
        recent: VecDeque::new(),
        closing_until: None,
        end: None,
    };
    match params.refusal {
        Some((code, reason)) => reader.close(code, &reason),
        None => reader.hello(interval),
    }
    let stream = match params.compression {
        Some("zlib-stream") => StreamCompression::Zlib(ZlibStream::new()),
        Some(_) => StreamCompression::Zstd(ZstdStream::new()),
        None => StreamCompression::None,
    };
    let shared = reader.shared.clone();
    let writer = async {
        write_frames(&shared, sender, out_rx, stream, &trace).await;
        pending::<()>().await
    };
    or(reader.read_loop(receiver, cmd_rx), writer).await;
    reader.finish();
}

async fn wait_until(at: Instant) {
    if at > Instant::now() {
        async_io::Timer::at(at).await;
    }
}

/// A connection's transport compression context.
enum StreamCompression {
    None,
    Zlib(ZlibStream),
    Zstd(ZstdStream),
}

/// Sends queued frames in order until a close frame or a send error.
async fn write_frames(
    shared: &Shared,
    mut sender: WebSocketSender<SimStream>,
    queue: async_channel::Receiver<Out>,
    mut stream: StreamCompression,
    trace: &WireTrace,
) {
    let mut payload_compression = false;
    let mut encode = |text: String, payload_compression: bool| {
        trace.sent(&text);
        match &mut stream {
            StreamCompression::Zlib(zlib) => Message::binary(zlib.compress(text.as_bytes())),
            StreamCompression::Zstd(zstd) => Message::binary(zstd.compress(text.as_bytes())),
            StreamCompression::None if payload_compression => {
                Message::binary(compress_payload(text.as_bytes()))
            }
            StreamCompression::None => Message::text(text),
        }
    };
    // A flood in progress: its frames are made one at a time, and anything
    // queued meanwhile (ACKs, other dispatches) goes first, as a real
    // gateway interleaves them.
    let mut burst: Option<Burst> = None;
    let mut sent_in_burst = 0u64;
    loop {
        let item = match &burst {
            Some(_) => match queue.try_recv() {
                Ok(item) => Some(item),
                Err(async_channel::TryRecvError::Empty) => None,
                Err(async_channel::TryRecvError::Closed) => return,
            },
            None => match queue.recv().await {
                Ok(item) => Some(item),
                Err(_) => return,
            },
        };
        let message = match item {
            None => {
                sent_in_burst += 1;
                if sent_in_burst % 64 == 0 {
                    // Let this connection's reader (heartbeats) and other
                    // connections run between slices.
                    futures_lite::future::yield_now().await;
                }
                match burst.as_mut().and_then(|b| b.next(shared)) {
                    Some(Ok(text)) => encode(text, payload_compression),
                    Some(Err(message)) => message,
                    None => {
                        burst = None;
                        continue;
                    }
                }
            }
            Some(Out::Text { text, not_before }) => {
                wait_until(not_before).await;
                encode(text, payload_compression)
            }
            Some(Out::Flood { session_id, count }) => {
                burst = Some(Burst::Dispatches {
                    session_id,
                    next: 0,
                    count,
                });
                continue;
            }
            Some(Out::Pings(count)) => {
                burst = Some(Burst::Pings(count));
                continue;
            }
            Some(Out::Fragmented { total, fragment }) => {
                if send_fragmented(&mut sender, total, fragment).await.is_err() {
                    return;
                }
                continue;
            }
            Some(Out::Close {
                code,
                reason,
                not_before,
            }) => {
                wait_until(not_before).await;
                trace.closed(Direction::Out, Some(code));
                let frame = CloseFrame {
                    code: code.into(),
                    reason: reason.into(),
                };
                if let Err(err) = sender.close(Some(frame)).await {
                    log::debug!("sim: close failed: {err}");
                }
                return;
            }
            Some(Out::PayloadCompression(on)) => {
                payload_compression = on;
                continue;
            }
        };
        if let Err(err) = sender.send(message).await {
            log::debug!("sim: send failed: {err}");
            return;
        }
    }
}

/// A flood being sent (`Fault::Flood`, `Fault::PingFlood`).
enum Burst {
    Dispatches {
        session_id: String,
        next: u64,
        count: u64,
    },
    Pings(u64),
}

impl Burst {
    /// The next frame: dispatch text (`Ok`) or a ready message (`Err`);
    /// `None` when the burst is over.
    fn next(&mut self, shared: &Shared) -> Option<Result<String, Message>> {
        match self {
            Burst::Dispatches {
                session_id,
                next,
                count,
            } => {
                if next == count {
                    log::info!("sim: flood of {count} dispatches sent");
                    return None;
                }
                *next += 1;
                shared.lock().flood_frame(session_id, *next - 1).map(Ok)
            }
            Burst::Pings(0) => None,
            Burst::Pings(left) => {
                *left -= 1;
                Some(Err(Message::Ping(Vec::from(b"sim".as_slice()).into())))
            }
        }
    }
}

/// Sends one text message of `total` bytes in fragments of `fragment`
/// bytes, made one at a time.
async fn send_fragmented(
    sender: &mut WebSocketSender<SimStream>,
    total: usize,
    fragment: usize,
) -> Result<(), WsError> {
    use async_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode as WsOpCode};
    use async_tungstenite::tungstenite::protocol::frame::Frame as WsFrame;
    let mut sent = 0;
    while sent < total {
        let len = fragment.min(total - sent);
        let opcode = if sent == 0 {
            Data::Text
        } else {
            Data::Continue
        };
        let last = sent + len == total;
        let frame = WsFrame::message(vec![b'x'; len], WsOpCode::Data(opcode), last);
        sender.send(Message::Frame(frame)).await?;
        sent += len;
    }
    Ok(())
}

/// A websocket close reason may hold at most 123 bytes.
fn close_reason(text: &str) -> String {
    let mut end = text.len().min(123);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// What woke the reader.
enum Wake {
    Frame(Option<Result<Message, WsError>>),
    Cmd(Option<ConnCmd>),
    Timer,
}

/// The reader side: the protocol state of one connection.
pub(crate) struct Reader {
    pub(crate) shared: Arc<Shared>,
    pub(crate) id: u64,
    /// The `smolcord::sim::wire` trace of this connection.
    trace: WireTrace,
    tcp: TcpStream,
    deadline_after: Duration,
    /// The previous heartbeat (or Hello), for gaps.
    last_beat: Instant,
    /// Where the 4009 clock starts (moves past a server stall).
    deadline_base: Instant,
    /// The session this connection serves, once identified or resumed.
    pub(crate) session: Option<String>,
    drop_acks: u32,
    stall_until: Option<Instant>,
    /// Arrival times of recent commands (rate limit).
    recent: VecDeque<Instant>,
    /// Set once closing: stop waiting for the client after this.
    closing_until: Option<Instant>,
    end: Option<ConnEnd>,
}

impl Reader {
    fn queue_out(&self, out: Out) {
        self.shared.lock().conns.queue(self.id, out);
    }

    /// Queues a frame (the connection's delay applies).
    pub(crate) fn send(&self, text: String) {
        self.shared.lock().conns.send_text(self.id, text);
    }

    fn hello(&mut self, interval: Duration) {
        let d = serde_json::json!({
            "heartbeat_interval": interval.as_millis() as u64,
            "_trace": ["[\"smolcord-sim\",{\"micros\":0.0}]"],
        });
        let frame = Frame::new(
            OpCode::Hello,
            serde_json::value::to_raw_value(&d).ok(),
            None,
            None,
        );
        let now = Instant::now();
        self.last_beat = now;
        self.deadline_base = now;
        self.send(frame.to_json());
        let mut state = self.shared.lock();
        let at = state.stats.ms(now);
        if let Some(stats) = state.stats.conn(self.id) {
            stats.hello_at_ms = Some(at);
        }
    }

    /// Carries out what Identify or Resume answered.
    fn answer(&mut self, answer: Answer) {
        if answer == Answer::InvalidSession {
            self.invalid_session(false);
        }
    }

    /// Sends op 9 and leaves the connection unauthenticated; `false` ends
    /// the session.
    pub(crate) fn invalid_session(&mut self, resumable: bool) {
        let frame = Frame::new(
            OpCode::InvalidSession,
            serde_json::value::to_raw_value(&resumable).ok(),
            None,
            None,
        );
        self.send(frame.to_json());
        let now = Instant::now();
        let mut state = self.shared.lock();
        state.stats.totals.invalid_sessions += 1;
        Self::release_session(&mut self.session, self.id, &mut state, !resumable, now);
        state.emit(SimEvent::InvalidSession {
            conn: self.id,
            resumable,
        });
    }

    /// Closes with `code`; the session survives only codes a client may
    /// resume after (as `CloseCode::action` classifies them).
    pub(crate) fn close(&mut self, code: CloseCode, reason: &str) {
        if self.closing_until.is_some() {
            return;
        }
        log::info!("sim: closing connection {} with {code}: {reason}", self.id);
        let now = Instant::now();
        self.closing_until = Some(now + CLOSE_WAIT);
        self.end = Some(ConnEnd::ServerClose);
        let mut state = self.shared.lock();
        if let Some(entry) = state.conns.get(self.id) {
            entry.send_close(code.0, &close_reason(reason));
        }
        let ends_session = code.action() != smolcord::protocol::CloseAction::Resume;
        Self::release_session(&mut self.session, self.id, &mut state, ends_session, now);
        if code == CloseCode::SESSION_TIMED_OUT {
            state.stats.totals.heartbeat_timeouts += 1;
        }
        if let Some(stats) = state.stats.conn(self.id) {
            stats.server_close_code = Some(code.0);
        }
        state.stats.end(self.id, ConnEnd::ServerClose, now);
        state.emit(SimEvent::ClosedByServer {
            conn: self.id,
            code: Some(code.0),
        });
    }

    /// Lets go of the session this connection serves: ends it, or leaves
    /// it resumable (neither if another connection has taken it over).
    fn release_session(
        session: &mut Option<String>,
        conn: u64,
        state: &mut State,
        end_it: bool,
        now: Instant,
    ) {
        let Some(session_id) = session.take() else {
            return;
        };
        // A connection another one has taken the session from (a resume
        // elsewhere) can no longer end it: an op 9 on a dying socket must
        // not take the live connection's session away.
        let Some(found) = state.sessions.get_mut(&session_id) else {
            return;
        };
        if found.conn.is_some_and(|c| c != conn) {
            return;
        }
        if end_it {
            state.sessions.remove(&session_id);
        } else {
            found.detach(now);
        }
    }

    /// Drops TCP without a close frame (the session stays resumable).
    fn drop_tcp(&mut self) {
        log::info!("sim: dropping TCP of connection {}", self.id);
        self.trace.closed(Direction::Out, None);
        let _ = self.tcp.shutdown(std::net::Shutdown::Both);
        self.end = Some(ConnEnd::ServerDrop);
        let mut state = self.shared.lock();
        state
            .stats
            .end(self.id, ConnEnd::ServerDrop, Instant::now());
        state.emit(SimEvent::ClosedByServer {
            conn: self.id,
            code: None,
        });
    }

    async fn read_loop(
        &mut self,
        mut receiver: WebSocketReceiver<SimStream>,
        cmds: async_channel::Receiver<ConnCmd>,
    ) {
        loop {
            let now = Instant::now();
            if let Some(until) = self.stall_until {
                if now >= until {
                    self.stall_until = None;
                    self.deadline_base = self.deadline_base.max(until);
                }
            }
            let deadline = match self.closing_until {
                Some(until) if now >= until => return,
                Some(until) => until,
                None => match self.stall_until {
                    Some(until) => until,
                    None => {
                        let due = later(self.deadline_base, self.deadline_after);
                        if now >= due {
                            let waited = now.saturating_duration_since(self.deadline_base);
                            self.close(
                                CloseCode::SESSION_TIMED_OUT,
                                &format!("no heartbeat for {} ms", waited.as_millis()),
                            );
                            continue;
                        }
                        due
                    }
                },
            };
            let stalled = self.stall_until.is_some();
            let wake = or(
                async { Wake::Cmd(cmds.recv().await.ok()) },
                or(
                    async {
                        if stalled {
                            pending::<()>().await;
                        }
                        Wake::Frame(receiver.next().await)
                    },
                    async {
                        async_io::Timer::at(deadline).await;
                        Wake::Timer
                    },
                ),
            )
            .await;
            match wake {
                Wake::Timer => {}
                Wake::Cmd(None) => return,
                Wake::Cmd(Some(ConnCmd::Superseded)) => {
                    self.session = None;
                    self.drop_tcp();
                    return;
                }
                Wake::Cmd(Some(ConnCmd::Fault(fault))) => {
                    if self.apply_fault(fault) {
                        return;
                    }
                }
                Wake::Frame(None) => return,
                Wake::Frame(Some(Err(err))) => {
                    log::debug!("sim: connection {} read error: {err}", self.id);
                    match err {
                        WsError::Capacity(_) if self.closing_until.is_none() => {
                            self.close(CloseCode::DECODE_ERROR, "message too large")
                        }
                        _ => return,
                    }
                }
                Wake::Frame(Some(Ok(message))) => self.on_message(message),
            }
        }
    }

    /// Returns true when the connection is gone.
    fn apply_fault(&mut self, fault: Fault) -> bool {
        if self.closing_until.is_some() {
            return false;
        }
        match fault {
            Fault::DropAcks(n) => self.drop_acks = n,
            Fault::Close(code) => self.close(CloseCode(code), CloseCode(code).description()),
            Fault::DropTcp => {
                self.drop_tcp();
                return true;
            }
            Fault::Reconnect => {
                self.send(Frame::new(OpCode::Reconnect, None, None, None).to_json())
            }
            Fault::InvalidSession(resumable) => self.invalid_session(resumable),
            Fault::RequestHeartbeat => {
                self.send(Frame::new(OpCode::Heartbeat, None, None, None).to_json())
            }
            Fault::Stall(duration) => {
                let until = later(Instant::now(), duration);
                self.stall_until = Some(self.stall_until.map_or(until, |u| u.max(until)));
            }
            Fault::Malformed => {
                self.send("{\"op\":0,\"t\":\"MESSAGE_CREATE\",\"s\":".to_owned());
            }
            Fault::Oversized => {
                let size = self.shared.config.oversized_frame_bytes;
                let mut text = String::with_capacity(size + 80);
                text.push_str("{\"op\":0,\"s\":null,\"t\":\"SIM_OVERSIZED\",\"d\":{\"padding\":\"");
                let fill = size.saturating_sub(text.len() + 3);
                text.extend(std::iter::repeat_n('x', fill));
                text.push_str("\"}}");
                self.send(text);
            }
            // Applied to the connection entry by `Shared::fault`.
            Fault::Delay(_) => {}
            Fault::PingFlood(count) => self.queue_out(Out::Pings(count)),
            Fault::Raw(text) => self.send(text),
            Fault::Fragmented { total, fragment } => {
                self.queue_out(Out::Fragmented { total, fragment })
            }
            Fault::Flood(count) => {
                let Some(session_id) = self.session.clone() else {
                    log::info!("sim: no flood on connection {}: no session yet", self.id);
                    return false;
                };
                self.queue_out(Out::Flood { session_id, count });
            }
        }
        false
    }

    fn on_message(&mut self, message: Message) {
        let bytes: &[u8] = match &message {
            Message::Text(text) => text.as_bytes(),
            Message::Binary(bytes) => bytes,
            Message::Close(frame) => {
                let code = frame.as_ref().map_or(1005, |f| u16::from(f.code));
                self.trace.closed(Direction::In, Some(code));
                if let Some(stats) = self.shared.lock().stats.conn(self.id) {
                    stats.client_close_code = Some(code);
                }
                if self.closing_until.is_none() {
                    log::info!("sim: client closed connection {} with {code}", self.id);
                    self.end = Some(ConnEnd::ClientClose);
                    self.closing_until = Some(Instant::now() + CLOSE_WAIT);
                    let now = Instant::now();
                    let mut state = self.shared.lock();
                    // 1000/1001 end the session (the bot shows offline);
                    // any other code keeps it resumable.
                    Self::release_session(
                        &mut self.session,
                        self.id,
                        &mut state,
                        matches!(code, 1000 | 1001),
                        now,
                    );
                    state.stats.end(self.id, ConnEnd::ClientClose, now);
                    state.emit(SimEvent::ClientClosed {
                        conn: self.id,
                        code: Some(code),
                    });
                }
                return;
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => return,
        };
        if self.trace.enabled() {
            self.trace.received(&String::from_utf8_lossy(bytes));
        }
        if self.closing_until.is_some() {
            return;
        }
        if let Err((code, reason)) = self.on_command(bytes) {
            self.close(code, &reason);
        }
    }

    fn on_command(&mut self, bytes: &[u8]) -> Result<(), Refusal> {
        let now = Instant::now();
        if bytes.len() > MAX_PAYLOAD_BYTES {
            return Err((
                CloseCode::DECODE_ERROR,
                format!(
                    "payload of {} bytes; the limit is {MAX_PAYLOAD_BYTES}",
                    bytes.len()
                ),
            ));
        }
        let window = self.shared.config.command_window;
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > window)
        {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        let limit = self.shared.config.command_limit as usize;
        if self.recent.len() > limit {
            return Err((
                CloseCode::RATE_LIMITED,
                format!("more than {limit} commands in {} s", window.as_secs()),
            ));
        }
        let frame =
            Frame::decode(bytes).map_err(|err| (CloseCode::DECODE_ERROR, err.to_string()))?;
        {
            let token = self.shared.config.token.clone();
            let raw = token.redact(&String::from_utf8_lossy(bytes));
            self.shared.lock().emit(SimEvent::CommandReceived {
                conn: self.id,
                op: frame.raw_opcode(),
                raw,
            });
        }
        let op = match frame.opcode() {
            Some(op) if op.is_client_command() => op,
            _ => {
                return Err((
                    CloseCode::UNKNOWN_OPCODE,
                    format!("unknown opcode {} for a client", frame.raw_opcode()),
                ))
            }
        };
        match op {
            OpCode::Heartbeat => self.on_heartbeat(&frame, now),
            OpCode::Identify => {
                let answer = handle_identify(&self.shared, self.id, &mut self.session, &frame)?;
                self.answer(answer);
                Ok(())
            }
            OpCode::Resume => {
                let answer = handle_resume(&self.shared, self.id, &mut self.session, &frame)?;
                self.answer(answer);
                Ok(())
            }
            _ if self.session.is_none() => Err((
                CloseCode::NOT_AUTHENTICATED,
                format!("opcode {} before Identify", frame.raw_opcode()),
            )),
            OpCode::PresenceUpdate => {
                let mut d: Value = frame
                    .data()
                    .map_err(|err| (CloseCode::UNKNOWN_OPCODE, err.to_string()))?;
                payload_checks::presence(&d).map_err(|err| {
                    (
                        CloseCode::UNKNOWN_OPCODE,
                        format!("bad payload for opcode 3: {err}"),
                    )
                })?;
                lenient_since(&mut d);
                serde_json::from_value::<smolcord::protocol::PresenceUpdate>(d)
                    .map(|_| ())
                    .map_err(|err| {
                        (
                            CloseCode::UNKNOWN_OPCODE,
                            format!("bad payload for opcode 3: {err}"),
                        )
                    })
            }
            OpCode::RequestGuildMembers => {
                members::handle(&self.shared, self.session.as_deref(), &frame)
            }
            OpCode::VoiceStateUpdate => {
                let d: Value = frame
                    .data()
                    .map_err(|err| (CloseCode::UNKNOWN_OPCODE, err.to_string()))?;
                payload_checks::voice_state(&d).map_err(|err| {
                    (
                        CloseCode::UNKNOWN_OPCODE,
                        format!("bad payload for opcode 4: {err}"),
                    )
                })
            }
            OpCode::RequestSoundboardSounds => {
                let d: Value = frame
                    .data()
                    .map_err(|err| (CloseCode::UNKNOWN_OPCODE, err.to_string()))?;
                payload_checks::soundboard(&d).map_err(|err| {
                    (
                        CloseCode::UNKNOWN_OPCODE,
                        format!("bad payload for opcode 31: {err}"),
                    )
                })
            }
            _ => Ok(()),
        }
    }

    fn on_heartbeat(&mut self, frame: &Frame, now: Instant) -> Result<(), Refusal> {
        let d: Option<u64> = frame.data().map_err(|_| {
            (
                CloseCode::UNKNOWN_OPCODE,
                "heartbeat `d` must be a sequence number or null".to_owned(),
            )
        })?;
        let gap = now.saturating_duration_since(self.last_beat);
        self.last_beat = now;
        self.deadline_base = self.deadline_base.max(now);
        let ack = self.drop_acks == 0;
        self.drop_acks = self.drop_acks.saturating_sub(1);
        let mut state = self.shared.lock();
        let sent = self
            .session
            .as_deref()
            .and_then(|id| state.sessions.get_mut(id))
            .map(|session| session.seq);
        if let (Some(seq), Some(sent)) = (d, sent) {
            if seq > sent {
                state.stats.totals.heartbeats_with_unsent_seq += 1;
                log::warn!(
                    "sim: connection {} heartbeat carries seq {seq}, but its session has sent only {sent}",
                    self.id
                );
            }
        }
        state.stats.heartbeat(self.id, d, gap, now);
        if let Some(stats) = state.stats.conn(self.id) {
            if ack {
                stats.acks_sent += 1;
            } else {
                stats.acks_dropped += 1;
            }
        }
        if ack {
            if let Some(entry) = state.conns.get(self.id) {
                entry.send_text(Frame::new(OpCode::HeartbeatAck, None, None, None).to_json());
            }
        }
        state.emit(SimEvent::Heartbeat {
            conn: self.id,
            seq: d,
            gap,
        });
        Ok(())
    }

    /// Unregisters the connection; a session it still served becomes
    /// resumable.
    fn finish(&mut self) {
        let now = Instant::now();
        let end = *self.end.get_or_insert(ConnEnd::ClientDrop);
        if end == ConnEnd::ClientDrop {
            self.trace.closed(Direction::In, None);
        }
        let mut state = self.shared.lock();
        state.conns.close(self.id);
        Self::release_session(&mut self.session, self.id, &mut state, false, now);
        state.stats.end(self.id, end, now);
        if end == ConnEnd::ClientDrop {
            log::info!("sim: connection {} dropped by the client", self.id);
            state.emit(SimEvent::ClientClosed {
                conn: self.id,
                code: None,
            });
        }
    }
}
