//! One blocking HTTP exchange with ureq. Everything here runs on the
//! `blocking` pool (called only inside `offload::unblock`).

use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ureq::http;
use ureq::{Agent, SendBody};

use super::error::RestError;
use super::multipart::Segment;
use super::ratelimit::RateHeaders;
use crate::token::Token;

/// The most of an API response body we read: Discord's answers are small,
/// and a misbehaving proxy must not make us buffer without end.
const MAX_API_BODY: u64 = 1024 * 1024;
/// The most of an error body we keep from a download.
const MAX_ERROR_BODY: u64 = 4096;

/// A request body with its `Content-Type`, as segments (bytes, and files
/// read only while the request is sent). Shared, so a retry (or an upload
/// of megabytes) is not one more copy.
#[derive(Clone)]
pub(crate) struct Body {
    pub content_type: String,
    pub segments: Arc<[Segment]>,
}

impl Body {
    pub fn json(bytes: Vec<u8>) -> Body {
        Body {
            content_type: "application/json".to_owned(),
            segments: Arc::from([Segment::Bytes(bytes.into())]),
        }
    }

    /// The body's length in bytes (the files' as listed).
    pub fn len(&self) -> u64 {
        self.segments.iter().map(Segment::len).sum()
    }

    /// A reader of the whole body, its files opened now (on the blocking
    /// pool, without following a link), each read for no more than its
    /// listed length.
    #[allow(clippy::disallowed_methods, clippy::disallowed_types)] // on the blocking pool
    fn reader(&self) -> Result<Box<dyn Read + Send>, RestError> {
        let mut chain: Box<dyn Read + Send> = Box::new(std::io::empty());
        for segment in self.segments.iter() {
            chain = match segment {
                Segment::Bytes(bytes) => Box::new(chain.chain(std::io::Cursor::new(bytes.clone()))),
                Segment::File { path, len } => {
                    let file = std::fs::OpenOptions::new()
                        .read(true)
                        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                        .open(path)
                        .map_err(|e| RestError::LocalIo {
                            path: path.display().to_string(),
                            detail: e.to_string(),
                        })?;
                    Box::new(chain.chain(ExactLen {
                        inner: file.take(*len),
                        left: *len,
                        path: path.clone(),
                    }))
                }
            };
        }
        Ok(chain)
    }
}

/// A file's part of a body: its listed length exactly. A file that ended
/// early is an error at once (the server would wait for the bytes the
/// request declared until the timeout), and `take` keeps a file that grew
/// from sending more.
struct ExactLen<R> {
    inner: R,
    left: u64,
    path: PathBuf,
}

impl<R: Read> Read for ExactLen<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.left > 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "{} ended {} bytes short of the size it was listed with",
                    self.path.display(),
                    self.left
                ),
            ));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// A request, ready to run on the blocking pool.
pub(crate) struct Outgoing {
    pub method: &'static str,
    pub url: String,
    /// Sent as `Authorization: Bot <token>` when present.
    pub token: Option<Token>,
    pub body: Option<Body>,
    pub timeout: Duration,
    pub max_redirects: u32,
}

/// A response with its body read.
pub(crate) struct Reply {
    pub status: u16,
    pub headers: RateHeaders,
    pub body: Vec<u8>,
    pub received: Instant,
    /// The `Date` header (Discord's clock), and the host's wall clock
    /// when the answer came.
    pub date: Option<(String, std::time::SystemTime)>,
}

fn build(
    agent: &Agent,
    out: &Outgoing,
    route: &str,
) -> Result<http::Request<SendBody<'static>>, RestError> {
    let mut builder = http::Request::builder()
        .method(out.method)
        .uri(out.url.as_str());
    if let Some(token) = &out.token {
        builder = builder.header("Authorization", format!("Bot {}", token.expose()));
    }
    let body = match &out.body {
        Some(body) => {
            // The length up front: a streamed body is never sent chunked
            // (some proxies refuse that), and a file that shrank meanwhile
            // fails the request instead of sending a cut form.
            builder = builder
                .header("Content-Type", body.content_type.as_str())
                .header("Content-Length", body.len());
            SendBody::from_owned_reader(body.reader()?)
        }
        None => SendBody::none(),
    };
    let request = builder.body(body).map_err(|e| RestError::InvalidInput {
        route: route.to_owned(),
        detail: redact(
            out.token.as_ref(),
            &format!("cannot build the request: {e}"),
        ),
    })?;
    Ok(agent
        .configure_request(request)
        .timeout_global(Some(out.timeout))
        .max_redirects(out.max_redirects)
        .build())
}

/// Runs an API request and reads its (capped) body.
pub(crate) fn exchange(agent: &Agent, out: Outgoing, route: &str) -> Result<Reply, RestError> {
    let request = build(agent, &out, route)?;
    let token = out.token.as_ref();
    let mut response = agent.run(request).map_err(|e| from_ureq(route, token, e))?;
    let received = Instant::now();
    let date = header(response.headers(), "date").map(|d| (d, std::time::SystemTime::now()));
    let status = response.status().as_u16();
    let headers = RateHeaders::parse(|name| header(response.headers(), name));
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_API_BODY)
        .read_to_vec()
        .map_err(|e| from_ureq(route, token, e))?;
    Ok(Reply {
        status,
        headers,
        body,
        received,
        date,
    })
}

/// What one request of a download got.
#[derive(Debug)]
pub(crate) enum Fetched {
    /// The body, written to the file: this many bytes.
    Written(u64),
    /// A redirect to this `Location` (as sent: maybe relative), not
    /// followed; nothing was written.
    Redirect(String),
}

/// Downloads `out.url` into `dest`, refusing more than `max_bytes`; a
/// redirect is returned, not followed (`out.max_redirects` is 0: the
/// caller checks where it leads first). A partial file is removed on any
/// failure.
#[allow(clippy::disallowed_methods)] // runs on the blocking pool, inside offload::unblock
pub(crate) fn fetch_to_file(
    agent: &Agent,
    out: Outgoing,
    route: &str,
    max_bytes: u64,
    dest: PathBuf,
) -> Result<Fetched, RestError> {
    let request = build(agent, &out, route)?;
    let mut response = agent.run(request).map_err(|e| from_ureq(route, None, e))?;
    let status = response.status().as_u16();
    if matches!(status, 301 | 302 | 303 | 307 | 308) {
        if let Some(location) = header(response.headers(), "location") {
            return Ok(Fetched::Redirect(location));
        }
    }
    if !(200..300).contains(&status) {
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_ERROR_BODY)
            .read_to_vec()
            .unwrap_or_default();
        return Err(http_error(route, status, &body, None));
    }
    let too_large = || RestError::TooLarge {
        route: route.to_owned(),
        limit: max_bytes,
    };
    if response
        .body()
        .content_length()
        .is_some_and(|n| n > max_bytes)
    {
        return Err(too_large());
    }
    let local = |e: std::io::Error| RestError::LocalIo {
        path: dest.display().to_string(),
        detail: e.to_string(),
    };
    // 0600: a voice note is as private as the DM it came in.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&dest)
        .map_err(local)?;
    let mut reader = response.into_body().into_reader();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    let result = loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // ureq wraps its own errors (timeouts included) in io::Error.
            Err(e) => break Err(from_ureq(route, None, ureq::Error::from(e))),
        };
        total += n as u64;
        // Counted before writing: a chunked body has no length up front.
        if total > max_bytes {
            break Err(too_large());
        }
        if let Err(e) = file.write_all(&buf[..n]) {
            break Err(local(e));
        }
    };
    drop(file);
    if result.is_err() {
        let _ = std::fs::remove_file(&dest);
    }
    result.map(Fetched::Written)
}

fn header(headers: &http::HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

fn is_timeout_kind(kind: std::io::ErrorKind) -> bool {
    matches!(
        kind,
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

/// Maps a ureq error; its text passes through the token redactor because
/// library errors may echo request parts.
pub(crate) fn from_ureq(route: &str, token: Option<&Token>, e: ureq::Error) -> RestError {
    match e {
        ureq::Error::Timeout(_) => RestError::Timeout {
            route: route.to_owned(),
        },
        ureq::Error::Io(io) if is_timeout_kind(io.kind()) => RestError::Timeout {
            route: route.to_owned(),
        },
        // An answer over the cap is no transport failure: the same request
        // gets the same answer (a caller may ask for less, e.g. a smaller
        // history page).
        ureq::Error::BodyExceedsLimit(_) => RestError::TooLarge {
            route: route.to_owned(),
            limit: MAX_API_BODY,
        },
        other => RestError::Transport {
            route: route.to_owned(),
            detail: redact(token, &other.to_string()),
        },
    }
}

fn redact(token: Option<&Token>, text: &str) -> String {
    match token {
        Some(token) => token.redact(text),
        None => text.to_owned(),
    }
}

/// Turns a non-success answer into [`RestError::Http`], reading Discord's
/// `{code, message}` body when there is one.
pub(crate) fn http_error(
    route: &str,
    status: u16,
    body: &[u8],
    token: Option<&Token>,
) -> RestError {
    #[derive(serde::Deserialize)]
    struct DiscordError {
        code: Option<u64>,
        message: Option<String>,
        errors: Option<serde_json::Value>,
    }
    let (code, message) = match serde_json::from_slice::<DiscordError>(body) {
        Ok(parsed) => {
            let mut message = parsed.message.unwrap_or_default();
            // 50035 "Invalid Form Body" says which field only in `errors`.
            if let Some(errors) = parsed.errors {
                message = format!("{message} ({})", truncate(&errors.to_string(), 300));
            }
            (parsed.code, message)
        }
        Err(_) => (None, truncate(String::from_utf8_lossy(body).trim(), 200)),
    };
    RestError::Http {
        status,
        code,
        message: redact(token, &message),
        route: route.to_owned(),
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
