//! A stand-in for Discord's REST API, for `smolcord run`: `GET
//! /gateway/bot` points at the flood server with a full identify budget,
//! `POST /channels/ID/messages` is answered like Discord (a message
//! object) and timed, since the bridge's answer to the end marker says it
//! has consumed every event before it; anything else is a 404.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

struct Shared {
    gateway_url: String,
    posts: Mutex<Vec<Instant>>,
    stopping: AtomicBool,
}

pub struct RestStub {
    addr: SocketAddr,
    shared: Arc<Shared>,
    thread: Option<thread::JoinHandle<()>>,
}

impl RestStub {
    pub fn start(gateway_url: String) -> std::io::Result<RestStub> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            gateway_url,
            posts: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
        });
        let serve_shared = shared.clone();
        let thread = thread::Builder::new()
            .name("rest-stub".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if serve_shared.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(stream) = stream {
                        // One request per connection (we answer
                        // `Connection: close`); a bad one is just dropped.
                        let _ = answer(&serve_shared, stream);
                    }
                }
            })?;
        Ok(RestStub {
            addr,
            shared,
            thread: Some(thread),
        })
    }

    pub fn api_base(&self) -> String {
        format!("http://{}/api/v10", self.addr)
    }

    /// When each message was posted.
    pub fn posts(&self) -> Vec<Instant> {
        self.shared
            .posts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for RestStub {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn answer(shared: &Shared, stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length.min(1 << 20)];
    reader.read_exact(&mut body)?;
    let mut parts = request_line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let channel = path
        .strip_prefix("/api/v10/channels/")
        .and_then(|rest| rest.strip_suffix("/messages"));
    let (status, json) = match (method, path, channel) {
        ("GET", "/api/v10/gateway/bot", _) => (
            "200 OK",
            serde_json::json!({
                "url": shared.gateway_url,
                "shards": 1,
                "session_start_limit": {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1},
            }),
        ),
        ("POST", _, Some(channel)) => {
            shared
                .posts
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Instant::now());
            (
                "200 OK",
                serde_json::json!({"id": "1400000000000000001", "channel_id": channel, "content": ""}),
            )
        }
        _ => (
            "404 Not Found",
            serde_json::json!({"message": "Unknown", "code": 0}),
        ),
    };
    let body = json.to_string();
    let mut stream = reader.into_inner();
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
