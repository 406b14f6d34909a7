//! Just enough HTTP/1.1 for the simulator's single port: read a request
//! (head via `httparse`, body by `Content-Length` or chunked), write a
//! response, keep the connection alive unless the client says otherwise.
//! Everything the client sends is untrusted: limits, clear errors, no panics.

use super::tls::SimStream;
use async_net::TcpStream;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use serde_json::Value;
use std::fmt;
use std::io;
use std::time::Duration;

/// Largest request head accepted.
const MAX_HEAD: usize = 32 * 1024;
/// Largest request body accepted (Discord's own limit is 25 MiB).
pub(crate) const MAX_BODY: usize = 26 * 1024 * 1024;

/// The pause between two tenths of a paced body (a slow CDN).
const PACE_TICK: Duration = Duration::from_millis(100);

/// A parsed request.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    /// HTTP minor version (0 or 1).
    pub(crate) minor: u8,
    /// Names lowercased.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn header_has_token(&self, name: &str, token: &str) -> bool {
        self.header(name).is_some_and(|v| {
            v.split(',')
                .any(|part| part.trim().eq_ignore_ascii_case(token))
        })
    }

    /// Whether this is a websocket upgrade.
    pub(crate) fn is_websocket(&self) -> bool {
        self.method == "GET"
            && self.header_has_token("upgrade", "websocket")
            && self.header_has_token("connection", "upgrade")
    }

    /// Whether the connection should stay open after the response.
    pub(crate) fn keep_alive(&self) -> bool {
        if self.minor == 0 {
            self.header_has_token("connection", "keep-alive")
        } else {
            !self.header_has_token("connection", "close")
        }
    }

    /// Value of query parameter `name`.
    pub(crate) fn query_param(&self, name: &str) -> Option<&str> {
        self.query.split('&').find_map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (key == name).then_some(value)
        })
    }
}

/// A response to write.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// A JSON body with `Content-Type: application/json` exactly (discord.py
    /// parses nothing else as JSON).
    pub(crate) fn json(status: u16, body: &Value) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }

    pub(crate) fn bytes(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".into(), content_type.into())],
            body,
        }
    }

    pub(crate) fn no_content() -> Response {
        Response {
            status: 204,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub(crate) fn with_header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    fn encode(&self, keep_alive: bool) -> Vec<u8> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if self.status != 204 && self.status != 101 {
            head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        if self.status != 101 {
            let connection = if keep_alive { "keep-alive" } else { "close" };
            head.push_str(&format!(
                "Connection: {connection}\r\nServer: smolcord-sim\r\n"
            ));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        bytes
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        426 => "Upgrade Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Why a request could not be read. `status` is what to answer (if the
/// connection can still take an answer).
#[derive(Debug)]
pub(crate) struct HttpError {
    pub(crate) status: Option<u16>,
    pub(crate) message: String,
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl HttpError {
    fn bad(status: u16, message: impl Into<String>) -> HttpError {
        HttpError {
            status: Some(status),
            message: message.into(),
        }
    }

    fn io(err: io::Error) -> HttpError {
        HttpError {
            status: None,
            message: format!("connection error: {err}"),
        }
    }
}

/// One client connection (plain or TLS) with its read-ahead buffer.
pub(crate) struct HttpConn {
    pub(crate) stream: SimStream,
    /// The socket under `stream`, to cut it abruptly (`Fault::DropTcp`).
    pub(crate) tcp: TcpStream,
    /// Bytes read but not yet consumed.
    pub(crate) buf: Vec<u8>,
}

impl HttpConn {
    pub(crate) fn new(stream: SimStream, tcp: TcpStream) -> HttpConn {
        HttpConn {
            stream,
            tcp,
            buf: Vec::new(),
        }
    }

    /// Reads more bytes; `false` on end of stream.
    async fn fill(&mut self) -> Result<bool, HttpError> {
        let mut chunk = [0u8; 8192];
        let n = self.stream.read(&mut chunk).await.map_err(HttpError::io)?;
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n > 0)
    }

    /// Reads the next request, or `None` when the client closed cleanly
    /// between requests.
    pub(crate) async fn read_request(&mut self) -> Result<Option<Request>, HttpError> {
        let head_end = loop {
            if let Some(pos) = find(&self.buf, b"\r\n\r\n") {
                break pos + 4;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(HttpError::bad(431, "request head is larger than 32 KiB"));
            }
            if !self.fill().await? {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(HttpError {
                    status: None,
                    message: "connection closed in the middle of a request head".into(),
                });
            }
        };
        let mut request = parse_head(&self.buf[..head_end])?;
        self.buf.drain(..head_end);
        if request.is_websocket() {
            return Ok(Some(request));
        }
        if request.header_has_token("expect", "100-continue") {
            self.write_raw(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        request.body = if request.header_has_token("transfer-encoding", "chunked") {
            self.read_chunked().await?
        } else {
            let length = match request.header("content-length") {
                None => 0,
                Some(text) => text
                    .trim()
                    .parse::<usize>()
                    .map_err(|_| HttpError::bad(400, format!("bad Content-Length `{text}`")))?,
            };
            if length > MAX_BODY {
                return Err(HttpError::bad(413, "request body is larger than 26 MiB"));
            }
            self.read_exact_body(length).await?
        };
        Ok(Some(request))
    }

    async fn read_exact_body(&mut self, length: usize) -> Result<Vec<u8>, HttpError> {
        while self.buf.len() < length {
            if !self.fill().await? {
                return Err(HttpError::bad(400, "connection closed inside the body"));
            }
        }
        Ok(self.buf.drain(..length).collect())
    }

    async fn read_line(&mut self) -> Result<String, HttpError> {
        loop {
            if let Some(pos) = find(&self.buf, b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..pos + 2).collect();
                return Ok(String::from_utf8_lossy(&line[..pos]).into_owned());
            }
            if self.buf.len() > MAX_HEAD {
                return Err(HttpError::bad(400, "chunk line too long"));
            }
            if !self.fill().await? {
                return Err(HttpError::bad(
                    400,
                    "connection closed inside a chunked body",
                ));
            }
        }
    }

    async fn read_chunked(&mut self) -> Result<Vec<u8>, HttpError> {
        let mut body = Vec::new();
        loop {
            let line = self.read_line().await?;
            let size_text = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| HttpError::bad(400, format!("bad chunk size `{size_text}`")))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.read_line().await?.is_empty() {}
                return Ok(body);
            }
            if size > MAX_BODY.saturating_sub(body.len()) {
                return Err(HttpError::bad(413, "request body is larger than 26 MiB"));
            }
            body.extend(self.read_exact_body(size).await?);
            if !self.read_line().await?.is_empty() {
                return Err(HttpError::bad(400, "chunk not followed by CRLF"));
            }
        }
    }

    async fn write_raw(&mut self, bytes: &[u8]) -> Result<(), HttpError> {
        self.stream.write_all(bytes).await.map_err(HttpError::io)?;
        self.stream.flush().await.map_err(HttpError::io)
    }

    pub(crate) async fn write_response(
        &mut self,
        response: &Response,
        keep_alive: bool,
    ) -> Result<(), HttpError> {
        self.write_raw(&response.encode(keep_alive)).await
    }

    /// [`HttpConn::write_response`] at most `bytes_per_sec` (a slow CDN):
    /// a tenth of a second's share every [`PACE_TICK`].
    pub(crate) async fn write_response_paced(
        &mut self,
        response: &Response,
        keep_alive: bool,
        bytes_per_sec: u64,
    ) -> Result<(), HttpError> {
        let bytes = response.encode(keep_alive);
        let share = usize::try_from(bytes_per_sec / 10)
            .unwrap_or(usize::MAX)
            .max(1);
        for slice in bytes.chunks(share) {
            self.write_raw(slice).await?;
            async_io::Timer::after(PACE_TICK).await;
        }
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn parse_head(bytes: &[u8]) -> Result<Request, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut headers);
    match parsed.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(HttpError::bad(400, "incomplete request head"))
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::bad(431, "more than 64 request headers"))
        }
        Err(err) => return Err(HttpError::bad(400, format!("malformed request: {err}"))),
    }
    let target = parsed.path.unwrap_or("/");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Ok(Request {
        method: parsed.method.unwrap_or("GET").to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        minor: parsed.version.unwrap_or(1),
        headers: parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).trim().to_owned(),
                )
            })
            .collect(),
        body: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_websocket_upgrade() {
        let req = parse_head(
            b"GET /resume?v=10&encoding=json HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
              Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: abc\r\n\r\n",
        )
        .unwrap();
        assert!(req.is_websocket());
        assert_eq!(req.path, "/resume");
        assert_eq!(req.query_param("v"), Some("10"));
        assert_eq!(req.query_param("compress"), None);
        assert_eq!(req.header("sec-websocket-key"), Some("abc"));
    }

    #[test]
    fn keep_alive_rules() {
        let req = parse_head(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(!req.keep_alive());
        let req = parse_head(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
        assert!(!req.keep_alive());
        let req = parse_head(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert!(req.keep_alive());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            &b"\x00\x01\r\n\r\n"[..],
            b"GET\r\n\r\n",
            b"G E T / HTTP/9\r\n\r\n",
        ] {
            let err = parse_head(bad).unwrap_err();
            assert_eq!(err.status, Some(400), "{err}");
        }
    }
}
