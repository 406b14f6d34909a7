//! A stand-in identify queue service (twilight-rs/gateway-queue's
//! protocol: `GET /?shard=N`, answered when N may identify) whose answers
//! a test decides: hold the request, or answer a status at once. It runs
//! on a thread of its own and records every request it gets.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// What the server does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Nothing: the request waits until the client gives up.
    Hold,
    /// This status, at once.
    Status(u16),
}

/// One request as the server got it.
#[derive(Clone, Debug)]
pub struct Request {
    /// Its `shard` query parameter.
    pub shard: Option<u32>,
    /// The request line, e.g. `GET /queue?shard=3 HTTP/1.1`.
    pub line: String,
    /// When its head had arrived.
    pub at: Instant,
}

/// A running server.
pub struct QueueServer {
    /// `http://127.0.0.1:PORT/queue`.
    pub url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl QueueServer {
    /// Starts a server answering each request as `answer` says.
    pub fn start(answer: impl Fn(&Request) -> Answer + Send + 'static) -> QueueServer {
        let listener =
            smol::block_on(async_net::TcpListener::bind("127.0.0.1:0")).expect("bind 127.0.0.1");
        let url = format!("http://{}/queue", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        std::thread::spawn(move || {
            let ex = smol::LocalExecutor::new();
            let answer = Arc::new(answer);
            smol::block_on(ex.run(async {
                while let Ok((stream, _)) = listener.accept().await {
                    let (log, answer) = (log.clone(), answer.clone());
                    ex.spawn(serve(stream, log, answer)).detach();
                }
            }));
        });
        QueueServer { url, requests }
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn serve(
    mut stream: async_net::TcpStream,
    log: Arc<Mutex<Vec<Request>>>,
    answer: Arc<impl Fn(&Request) -> Answer>,
) {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 16 * 1024 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head);
    let line = text.lines().next().unwrap_or_default().to_owned();
    let shard = line
        .split(['?', '&', ' '])
        .find_map(|part| part.strip_prefix("shard="))
        .and_then(|id| id.parse().ok());
    let request = Request {
        shard,
        line,
        at: Instant::now(),
    };
    let decision = answer(&request);
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(request);
    super::wait::changed();
    match decision {
        Answer::Hold => {
            // Until the client leaves.
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
        }
        Answer::Status(code) => {
            let body = r#"{"message": "You're free to connect now! :)"}"#;
            let reply = format!(
                "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(reply.as_bytes()).await;
            let _ = stream.flush().await;
        }
    }
}
