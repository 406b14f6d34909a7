//! A plain `GET` outside Discord's API (no token, no rate limits): for
//! services beside the bot, such as an identify queue.
//!
//! Unlike the REST calls it runs on the event loop, not on the `blocking`
//! pool: an identify queue holds the request until the shard's turn, which
//! can be minutes away, and a pool thread pinned that long per waiting shard
//! would starve the fsyncs and subprocesses the pool is for (16 shards, 16
//! threads: the default cap). Only the status line is read. `http://` and
//! `https://` (the gateway's TLS settings); user info in the URL is sent as
//! Basic authorization. It connects directly, as the gateway does (no
//! `HTTP_PROXY`).

use super::client::USER_AGENT;
use crate::rt::{TcpStream, Timer};
use async_tungstenite::tungstenite::http::Uri;
use futures_lite::{future, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use rustls::pki_types::ServerName;
use std::time::Duration;

/// The longest status line read: `HTTP/1.1 200 OK` and a reason phrase.
const MAX_STATUS_LINE: usize = 1024;

/// Bound on connecting (TCP, with the name looked up), within the whole
/// request's.
const CONNECT_BOUND: Duration = Duration::from_secs(10);

/// Why a [`plain_get`] has no status. Its `Display` completes a sentence
/// whose subject is the service ("identify queue http://… {error}").
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlainGetError {
    /// The URL cannot be asked (not a URL, not http(s), no host, no TLS name).
    BadUrl(String),
    /// Connecting (TCP or TLS) failed.
    Unreachable(String),
    /// No status line within the bound.
    NoAnswer {
        /// The bound.
        within: Duration,
    },
    /// The connection broke before a status line.
    Lost(String),
    /// What came back is not an HTTP status line.
    NotHttp(String),
}

impl std::fmt::Display for PlainGetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlainGetError::BadUrl(why) => f.write_str(why),
            PlainGetError::Unreachable(why) => write!(f, "could not be reached: {why}"),
            PlainGetError::NoAnswer { within } => {
                write!(f, "gave no answer within {:.0} s", within.as_secs_f64())
            }
            PlainGetError::Lost(why) => write!(f, "lost the connection: {why}"),
            PlainGetError::NotHttp(why) => write!(f, "answered no HTTP status line{why}"),
        }
    }
}

impl std::error::Error for PlainGetError {}

/// `GET url` within `timeout`; the HTTP status, or what went wrong.
/// Dropping the future closes the connection (the service can tell).
pub async fn plain_get(url: String, timeout: Duration) -> Result<u16, PlainGetError> {
    future::or(get_status(&url, timeout.min(CONNECT_BOUND)), async {
        Timer::after(timeout).await;
        Err(PlainGetError::NoAnswer { within: timeout })
    })
    .await
}

async fn get_status(url: &str, connect_bound: Duration) -> Result<u16, PlainGetError> {
    let bad = |why: String| PlainGetError::BadUrl(why);
    let uri: Uri = url
        .parse()
        .map_err(|err| bad(format!("is not a URL: {err}")))?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(bad("is neither http:// nor https://".into())),
    };
    let authority = uri.authority().ok_or_else(|| bad("has no host".into()))?;
    let (userinfo, host_port) = match authority.as_str().rsplit_once('@') {
        Some((userinfo, host_port)) => (Some(userinfo), host_port),
        None => (None, authority.as_str()),
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut request = format!(
        "GET {target} HTTP/1.1\r\nHost: {host_port}\r\nUser-Agent: {USER_AGENT}\r\nAccept: */*\r\nConnection: close\r\n"
    );
    if let Some(userinfo) = userinfo {
        request += &format!(
            "Authorization: Basic {}\r\n",
            base64(&percent_decode(userinfo))
        );
    }
    request += "\r\n";
    let stream = TcpStream::connect(host, port, connect_bound)
        .await
        .map_err(|err| PlainGetError::Unreachable(err.to_string()))?;
    if https {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|err| bad(format!("has no usable TLS name: {err}")))?;
        let tls = futures_rustls::TlsConnector::from(crate::transport::tls::client_config())
            .connect(name, stream)
            .await
            .map_err(|err| PlainGetError::Unreachable(format!("(TLS) {err}")))?;
        exchange(tls, &request).await
    } else {
        exchange(stream, &request).await
    }
}

/// Sends `request` and reads the status code of the answer.
async fn exchange(
    mut io: impl AsyncRead + AsyncWrite + Unpin,
    request: &str,
) -> Result<u16, PlainGetError> {
    let lost = |err: std::io::Error| PlainGetError::Lost(err.to_string());
    io.write_all(request.as_bytes()).await.map_err(lost)?;
    io.flush().await.map_err(lost)?;
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    loop {
        if let Some(end) = head.windows(2).position(|w| w == b"\r\n") {
            return status_code(&head[..end]);
        }
        if head.len() >= MAX_STATUS_LINE {
            return Err(PlainGetError::NotHttp(format!(
                " in {MAX_STATUS_LINE} bytes"
            )));
        }
        let n = io.read(&mut buf).await.map_err(lost)?;
        if n == 0 {
            return Err(PlainGetError::Lost("closed without an answer".into()));
        }
        head.extend_from_slice(&buf[..n]);
    }
}

/// `HTTP/1.1 200 OK` -> 200.
fn status_code(line: &[u8]) -> Result<u16, PlainGetError> {
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let version = parts.next().unwrap_or_default();
    parts
        .next()
        .filter(|_| version.starts_with("HTTP/"))
        .and_then(|code| code.parse::<u16>().ok())
        .filter(|code| (100..600).contains(code))
        .ok_or_else(|| PlainGetError::NotHttp(format!(": {:.64}", line)))
}

/// `%XX` escapes decoded (user info in a URL).
fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| {
            std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        });
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

/// Standard base64 with padding (RFC 4648), for Basic authorization.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse() {
        assert_eq!(status_code(b"HTTP/1.1 200 OK"), Ok(200));
        assert_eq!(status_code(b"HTTP/1.0 503 Service Unavailable"), Ok(503));
        assert!(status_code(b"SSH-2.0-OpenSSH").is_err());
        assert!(status_code(b"HTTP/1.1 2000 OK").is_err());
    }

    #[test]
    fn user_info_becomes_basic_authorization() {
        // RFC 7617's example.
        assert_eq!(
            base64(b"Aladdin:open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        assert_eq!(base64(b""), "");
        assert_eq!(percent_decode("a%3Ab%40c%zz"), b"a:b@c%zz");
    }
}
