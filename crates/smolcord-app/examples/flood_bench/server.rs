//! The flood server: a gateway on 127.0.0.1 that says Hello (500 ms
//! heartbeat), answers Identify with READY, waits for the first heartbeat,
//! then floods as fast as the socket takes it, and writes down when every
//! heartbeat arrives.
//!
//! Two threads per connection, so that a writer blocked on a full socket
//! never delays reading a beat: the reader timestamps each op 1 the moment
//! it is read and asks the writer for the op 11, which goes out ahead of the
//! next batch of events. Events are built into 64 KiB batches by copying
//! (see [`payload`](crate::payload)); nothing is locked per event. Only
//! the first connection is flooded: a client that reconnects gets Hello and
//! ACKs, and the reconnect is written down (it is what the hostile cases
//! watch for).

use crate::payload::{self, Encoder};
use crate::ws::{self, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG, OP_TEXT};
use std::io::{BufReader, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Events are written in batches of about this many bytes.
const BATCH: usize = 64 * 1024;
/// Largest client frame read (an Identify is a few hundred bytes).
const MAX_CLIENT_FRAME: usize = 1024 * 1024;
/// A hostile ping's payload: the largest a control frame may carry, so
/// each pong a client queues costs it the most.
const PING_PAYLOAD: [u8; 125] = [b'p'; 125];

/// What the first connection gets after its first heartbeat.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// `events` MESSAGE_CREATEs (sequence 2 ..= events + 1), then, with
    /// `end_marker`, a DM from a user the bridge answers over REST.
    Flood { events: u64, end_marker: bool },
    /// `pings` WebSocket pings; `stop` says whether and when the server
    /// stops reading the socket for good.
    Pings { pings: u64, stop: StopReading },
    /// One MESSAGE_CREATE of `bytes` (text) in `fragment`-byte frames,
    /// then one ordinary event (or the end marker).
    Huge {
        bytes: usize,
        fragment: usize,
        end_marker: bool,
    },
}

/// When a ping flood's server stops reading (for good).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StopReading {
    /// It keeps reading (and counts pongs).
    Never,
    /// Just before the first ping: every pong the client owes piles up.
    BeforePings,
    /// Once the last ping is written: whatever pongs the client still
    /// owes then pile up.
    AfterPings,
}

/// One heartbeat as it arrived.
#[derive(Clone, Copy, Debug)]
pub struct Beat {
    pub at: Instant,
}

/// What happened on one connection.
#[derive(Clone, Debug, Default)]
pub struct ConnLog {
    pub beats: Vec<Beat>,
    /// The first event (or ping) went into the socket.
    pub flood_started: Option<Instant>,
    /// The last one did.
    pub flood_written: Option<Instant>,
    /// Time the writer spent inside `write` during the flood (mostly
    /// blocked on a full socket: the client was behind).
    pub in_write: Duration,
    pub bytes_written: u64,
    /// Pongs had reached the number of pings sent.
    pub all_pongs: Option<Instant>,
    pub reading_stopped: Option<Instant>,
    /// Pongs the server had read when it stopped reading.
    pub pongs_before_stop: u64,
    /// The client's close frame and its code.
    pub client_close: Option<(Instant, Option<u16>)>,
}

pub struct Conn {
    pub accepted: Instant,
    /// The client's end of the connection.
    pub peer: Option<SocketAddr>,
    pub pongs: AtomicU64,
    stop_reading: AtomicBool,
    stream: TcpStream,
    log: Mutex<ConnLog>,
}

impl Conn {
    fn log(&self) -> MutexGuard<'_, ConnLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Shared {
    mode: Mode,
    interval: Duration,
    addr: SocketAddr,
    conns: Mutex<Vec<Arc<Conn>>>,
    stopping: AtomicBool,
}

/// A running flood server; [`Server::stop`] (or drop) ends it.
pub struct Server {
    shared: Arc<Shared>,
    accept: Option<thread::JoinHandle<()>>,
}

impl Server {
    pub fn start(mode: Mode, interval: Duration) -> std::io::Result<Server> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let shared = Arc::new(Shared {
            mode,
            interval,
            addr: listener.local_addr()?,
            conns: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
        });
        let accept_shared = shared.clone();
        let accept = thread::Builder::new()
            .name("flood-accept".into())
            .spawn(move || accept_loop(listener, accept_shared))?;
        Ok(Server {
            shared,
            accept: Some(accept),
        })
    }

    pub fn url(&self) -> String {
        format!("ws://{}", self.shared.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// Each connection's log so far, in order of arrival.
    pub fn logs(&self) -> Vec<ConnLog> {
        self.conns().iter().map(|c| c.log().clone()).collect()
    }

    pub fn conns(&self) -> Vec<Arc<Conn>> {
        lock(&self.shared.conns).clone()
    }

    pub fn stop(&mut self) {
        if self.shared.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        for conn in self.conns() {
            let _ = conn.stream.shutdown(Shutdown::Both);
        }
        // Wakes the accept loop.
        let _ = TcpStream::connect(self.shared.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut workers = Vec::new();
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let conn = Arc::new(Conn {
            accepted: Instant::now(),
            peer: stream.peer_addr().ok(),
            pongs: AtomicU64::new(0),
            stop_reading: AtomicBool::new(false),
            stream: handle,
            log: Mutex::new(ConnLog::default()),
        });
        let first = {
            let mut conns = lock(&shared.conns);
            conns.push(conn.clone());
            conns.len() == 1
        };
        let shared = shared.clone();
        let spawned = thread::Builder::new()
            .name("flood-writer".into())
            .spawn(move || {
                // However it ends (the client left, the server stopped),
                // the logs say what happened before.
                let _ = serve(&shared, &conn, stream, first);
                let _ = conn.stream.shutdown(Shutdown::Both);
            });
        if let Ok(worker) = spawned {
            workers.push(worker);
        }
    }
    for worker in workers {
        let _ = worker.join();
    }
}

/// What the reader tells the writer.
enum Heard {
    Identify,
    Resume,
    Heartbeat,
    Ping(Vec<u8>),
    Close(Vec<u8>),
    Gone,
}

#[derive(serde::Deserialize)]
struct Envelope {
    op: u8,
}

fn read_loop(shared: Arc<Shared>, conn: Arc<Conn>, stream: TcpStream, to_writer: Sender<Heard>) {
    let mut reader = BufReader::with_capacity(64 * 1024, stream);
    let pings = match shared.mode {
        Mode::Pings { pings, .. } => pings,
        _ => u64::MAX,
    };
    loop {
        if conn.stop_reading.load(Ordering::SeqCst) {
            // Not another byte: the client's pongs and beats pile up.
            while !shared.stopping.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(20));
            }
            return;
        }
        let Ok(frame) = ws::read_frame(&mut reader, MAX_CLIENT_FRAME) else {
            let _ = to_writer.send(Heard::Gone);
            return;
        };
        let heard = match frame.opcode {
            OP_TEXT => {
                let Ok(envelope) = serde_json::from_slice::<Envelope>(&frame.payload) else {
                    continue;
                };
                match envelope.op {
                    1 => {
                        conn.log().beats.push(Beat { at: Instant::now() });
                        Heard::Heartbeat
                    }
                    2 => Heard::Identify,
                    6 => Heard::Resume,
                    _ => continue,
                }
            }
            OP_PING => Heard::Ping(frame.payload),
            OP_PONG => {
                if conn.pongs.fetch_add(1, Ordering::Relaxed) + 1 == pings {
                    conn.log().all_pongs = Some(Instant::now());
                }
                continue;
            }
            OP_CLOSE => {
                let code = (frame.payload.len() >= 2)
                    .then(|| u16::from_be_bytes([frame.payload[0], frame.payload[1]]));
                conn.log().client_close = Some((Instant::now(), code));
                let _ = to_writer.send(Heard::Close(frame.payload));
                return;
            }
            _ => continue,
        };
        if to_writer.send(heard).is_err() {
            return;
        }
    }
}

struct Writer<'a> {
    shared: &'a Shared,
    conn: &'a Conn,
    stream: TcpStream,
    encoder: Encoder,
    heard: Receiver<Heard>,
    buf: Vec<u8>,
    /// Set by the flood loop: time spent inside write.
    in_write: Duration,
    bytes: u64,
}

fn serve(
    shared: &Arc<Shared>,
    conn: &Arc<Conn>,
    mut stream: TcpStream,
    first: bool,
) -> Result<(), String> {
    let target = ws::accept(&mut stream).map_err(|e| format!("handshake: {e}"))?;
    let wire = crate::compression::Wire::of_target(&target);
    let _ = stream.set_nodelay(true);
    let read_half = stream.try_clone().map_err(|e| e.to_string())?;
    let (to_writer, heard) = mpsc::channel();
    let (reader_shared, reader_conn) = (shared.clone(), conn.clone());
    thread::Builder::new()
        .name("flood-reader".into())
        .spawn(move || read_loop(reader_shared, reader_conn, read_half, to_writer))
        .map_err(|e| e.to_string())?;
    let mut writer = Writer {
        shared,
        conn,
        stream,
        encoder: Encoder::new(wire),
        heard,
        buf: Vec::with_capacity(2 * BATCH),
        in_write: Duration::ZERO,
        bytes: 0,
    };
    writer.run(first)
}

impl Writer<'_> {
    fn run(&mut self, first: bool) -> Result<(), String> {
        let hello = payload::hello(self.shared.interval.as_millis() as u64);
        self.encoder.push_text(&mut self.buf, &hello);
        self.flush()?;
        // Identify (or a resume, after a reconnect).
        let identified = loop {
            match self.next_heard()? {
                Heard::Identify => break true,
                Heard::Resume => break false,
                other => self.answer(other)?,
            }
        };
        if !(identified && first) {
            return self.idle();
        }
        let ready = payload::ready(&format!("ws://{}", self.shared.addr));
        self.encoder.push_text(&mut self.buf, &ready);
        self.flush()?;
        // The flood starts once the heartbeat schedule has: after the
        // first beat (answered here).
        loop {
            let heard = self.next_heard()?;
            let beat = matches!(heard, Heard::Heartbeat);
            self.answer(heard)?;
            if beat {
                break;
            }
        }
        let started = Instant::now();
        self.conn.log().flood_started = Some(started);
        let stop = match self.shared.mode {
            Mode::Pings { stop, .. } => stop,
            _ => StopReading::Never,
        };
        if stop == StopReading::BeforePings {
            self.stop_reading();
        }
        (self.in_write, self.bytes) = (Duration::ZERO, 0);
        match self.shared.mode {
            Mode::Flood { events, end_marker } => {
                self.events(2, events)?;
                self.tail(events + 2, end_marker)?;
            }
            Mode::Pings { pings, .. } => {
                self.pings(pings)?;
                if stop == StopReading::AfterPings {
                    self.stop_reading();
                }
            }
            Mode::Huge {
                bytes,
                fragment,
                end_marker,
            } => {
                self.huge(bytes, fragment)?;
                self.tail(3, end_marker)?;
            }
        }
        {
            let mut log = self.conn.log();
            log.flood_written = Some(Instant::now());
            log.in_write = self.in_write;
            log.bytes_written = self.bytes;
        }
        self.idle()
    }

    /// The reader reads nothing more (after the frame it may be in), and
    /// nothing more is answered: beats, pongs and a close pile up.
    fn stop_reading(&self) {
        self.conn.stop_reading.store(true, Ordering::SeqCst);
        let mut log = self.conn.log();
        log.reading_stopped = Some(Instant::now());
        log.pongs_before_stop = self.conn.pongs.load(Ordering::Relaxed);
    }

    /// The next thing the reader heard (bounded waits, so a stop is seen).
    fn next_heard(&self) -> Result<Heard, String> {
        loop {
            match self.heard.recv_timeout(Duration::from_millis(100)) {
                Ok(heard) => return Ok(heard),
                Err(RecvTimeoutError::Timeout) => {
                    if self.shared.stopping.load(Ordering::SeqCst) {
                        return Err("server stopped".into());
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Err("reader ended".into()),
            }
        }
    }

    /// Queues the answer to what the reader heard, ahead of the next batch.
    fn answer(&mut self, heard: Heard) -> Result<(), String> {
        match heard {
            Heard::Heartbeat => self
                .encoder
                .push_text(&mut self.buf, payload::HEARTBEAT_ACK),
            Heard::Ping(data) => ws::push_frame(&mut self.buf, OP_PONG, &data),
            Heard::Close(data) => {
                ws::push_frame(&mut self.buf, OP_CLOSE, &data);
                let _ = self.flush();
                return Err("the client closed".into());
            }
            Heard::Gone => return Err("the client went away".into()),
            Heard::Identify | Heard::Resume => {}
        }
        Ok(())
    }

    /// Answers whatever the reader heard meanwhile, without waiting.
    fn answer_pending(&mut self) -> Result<(), String> {
        while let Ok(heard) = self.heard.try_recv() {
            self.answer(heard)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), String> {
        let started = Instant::now();
        let result = self.stream.write_all(&self.buf);
        self.in_write += started.elapsed();
        self.bytes += self.buf.len() as u64;
        self.buf.clear();
        result.map_err(|e| format!("write: {e}"))
    }

    /// Answers beats until the connection or the server ends.
    fn idle(&mut self) -> Result<(), String> {
        loop {
            let heard = self.next_heard()?;
            self.answer(heard)?;
            self.answer_pending()?;
            self.flush()?;
        }
    }

    fn events(&mut self, first: u64, count: u64) -> Result<(), String> {
        let mut seq = first;
        let end = first + count;
        while seq < end {
            self.answer_pending()?;
            while self.buf.len() < BATCH && seq < end {
                self.encoder.push_event(&mut self.buf, seq);
                seq += 1;
            }
            self.flush()?;
        }
        Ok(())
    }

    /// The end marker (for the bridge), or one more ordinary event.
    fn tail(&mut self, seq: u64, end_marker: bool) -> Result<(), String> {
        self.answer_pending()?;
        if end_marker {
            self.encoder
                .push_text(&mut self.buf, &payload::end_marker(seq));
        } else {
            self.encoder.push_event(&mut self.buf, seq);
        }
        self.flush()
    }

    fn pings(&mut self, count: u64) -> Result<(), String> {
        let mut sent = 0;
        while sent < count {
            self.answer_pending()?;
            while self.buf.len() < BATCH && sent < count {
                ws::push_frame(&mut self.buf, OP_PING, &PING_PAYLOAD);
                sent += 1;
            }
            self.flush()?;
        }
        Ok(())
    }

    /// One text message of `bytes` in `fragment`-byte frames (plain text
    /// only: the hostile cases run without compression).
    fn huge(&mut self, bytes: usize, fragment: usize) -> Result<(), String> {
        let text = payload::huge_event(2, bytes);
        let mut chunks = text.as_bytes().chunks(fragment.max(1)).peekable();
        let mut opcode = OP_TEXT;
        while let Some(chunk) = chunks.next() {
            self.answer_pending()?;
            ws::push_header(&mut self.buf, chunks.peek().is_none(), opcode, chunk.len());
            self.flush()?;
            self.buf.extend_from_slice(chunk);
            self.flush()?;
            opcode = OP_CONTINUATION;
        }
        Ok(())
    }
}
