//! transport: one gateway WebSocket connection, `ws://` or `wss://`
//! (rustls with compiled-in webpki roots, so it works in a `FROM scratch`
//! image, plus any extra CA: see [`tls`]), with optional zlib-stream or
//! zstd-stream decompression ([`Compression`]).
//!
//! A [`Connection`] hands out complete gateway messages as text and accepts
//! text to send. [`Connection::next_message`] is cancel-safe: partial
//! zlib-stream input is kept in the connection, not in the future, so the
//! shard can race it against its heartbeat timer.
//!
//! Everything a peer can make us hold is bounded ([`Limits`]): the size of
//! one message (compressed or not) and of one frame, and the outgoing
//! buffer, which is where a peer that floods us with pings and stops reading
//! would otherwise pile up our pongs. Control frames are handed up as
//! [`Incoming::Control`] so a ping flood counts as work the shard yields
//! after, instead of a loop inside this module that never returns.
//!
//! Every message in and out, and the close, goes through the connection's
//! [`WireTrace`] (`RUST_LOG=smolcord::wire=trace`; free when off).

mod compression;
#[cfg(any(feature = "zlib", feature = "zstd"))]
mod decompress_error;
#[cfg(feature = "zlib")]
mod inflate;
pub mod tls;
mod url;
#[cfg(feature = "zstd")]
mod zstd;

pub use compression::Compression;
use compression::Decompressor;
#[cfg(any(feature = "zlib", feature = "zstd"))]
pub use decompress_error::DecompressError;
#[cfg(feature = "zlib")]
pub use inflate::Inflater;
pub use url::gateway_connect_url;
#[cfg(feature = "zstd")]
pub use zstd::{ZstdInflater, MAX_WINDOW_LOG as ZSTD_MAX_WINDOW_LOG};

use crate::rt::{TcpStream, Timer};
use crate::wire::{Direction, WireTrace};
use async_tungstenite::smol::ClientStream;
use async_tungstenite::tungstenite::client::IntoClientRequest;
use async_tungstenite::tungstenite::http::header::{HeaderValue, USER_AGENT};
use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode as WsCloseCode;
use async_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use async_tungstenite::tungstenite::{Error as WsError, Message};
use async_tungstenite::WebSocketStream;
use futures_lite::{future, StreamExt};
use std::fmt;
use std::time::Duration;

/// What the gateway sent.
#[derive(Debug)]
#[non_exhaustive]
pub enum Incoming {
    /// One complete gateway message (JSON text).
    Text(String),
    /// A WebSocket ping or pong (answered by tungstenite), or part of a
    /// zlib-stream message: nothing for the shard, but work done.
    Control,
    /// The connection ended: the server's close code, or `None` when the
    /// TCP connection dropped without a close frame.
    Closed(Option<u16>),
}

/// How much one connection may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest gateway message accepted, in bytes (after inflating, and
    /// before: compressed input is never larger than what it inflates to,
    /// so one number bounds both). A larger one ends the connection.
    pub max_message_bytes: usize,
    /// Largest single WebSocket frame accepted (Discord sends a message
    /// in one frame, so by default the same as the message).
    pub max_frame_bytes: usize,
}

impl Limits {
    /// Limits for a message cap of `bytes`.
    pub fn message(bytes: usize) -> Limits {
        Limits {
            max_message_bytes: bytes,
            max_frame_bytes: bytes,
        }
    }
}

/// Bytes tungstenite reads from the socket at once. 128 KiB (its default)
/// reads a burst in fewer syscalls but is allocated per connection up
/// front; 32 KiB keeps the same throughput here (flood_bench) at a quarter
/// of the memory.
const READ_BUFFER_BYTES: usize = 32 * 1024;
/// Outgoing bytes buffered at most. What we send is small (a command is at
/// most 4096 bytes; heartbeats, pongs and the close frame are tiny), so
/// anything beyond this means the peer stopped reading: the send fails
/// instead of the buffer growing, and a queued pong is replaced by the
/// newest one instead of piling up.
const MAX_WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// A transport failure, naming what failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum TransportError {
    /// Connecting (TCP, TLS or the WebSocket handshake) failed.
    Connect {
        /// The URL (never contains the token).
        url: String,
        /// What went wrong.
        detail: String,
    },
    /// Connecting took longer than the bound.
    ConnectTimeout {
        /// The URL.
        url: String,
        /// The bound.
        after: Duration,
    },
    /// Reading or writing an open connection failed.
    Io(String),
    /// The gateway sent a message or frame over the limit.
    TooLarge {
        /// What tungstenite or the inflater reported.
        detail: String,
        /// The configured limit.
        limit: usize,
    },
    /// A binary frame could not be inflated, or arrived without compression.
    Decode(String),
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Connect { url, detail } => {
                write!(f, "cannot connect to {url}: {detail}")
            }
            TransportError::ConnectTimeout { url, after } => {
                write!(f, "connecting to {url} took longer than {after:?}")
            }
            TransportError::Io(detail) => write!(f, "gateway connection failed: {detail}"),
            TransportError::TooLarge { detail, limit } => write!(
                f,
                "the gateway sent more than {limit} bytes in one message ({detail}); refusing it (raise `max_gateway_message_bytes` if your intents really need more)"
            ),
            TransportError::Decode(detail) => write!(f, "cannot decode gateway frame: {detail}"),
        }
    }
}

impl std::error::Error for TransportError {}

/// One open gateway WebSocket.
pub struct Connection {
    ws: WebSocketStream<ClientStream<TcpStream>>,
    limits: Limits,
    trace: WireTrace,
    decompressor: Decompressor,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `base_url` with `?v=10&encoding=json` (and
    /// `&compress=zlib-stream` or `zstd-stream`), giving up after `timeout`.
    /// The handshake carries `user_agent` (Discord does not need one on the
    /// gateway; some proxies and gateways do). Frames are traced to `trace`.
    pub async fn connect(
        base_url: &str,
        compress: Compression,
        timeout: Duration,
        limits: Limits,
        user_agent: &str,
        trace: WireTrace,
    ) -> Result<Connection, TransportError> {
        if let Some(feature) = compress.missing_feature() {
            return Err(TransportError::Connect {
                url: base_url.to_owned(),
                detail: format!(
                    "compression {compress:?} was asked for but this build has no `{feature}` feature"
                ),
            });
        }
        let url = gateway_connect_url(base_url, compress);
        let connect_error = |detail: String| TransportError::Connect {
            url: url.clone(),
            detail,
        };
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|err| connect_error(err.to_string()))?;
        let agent =
            HeaderValue::from_str(user_agent).map_err(|err| connect_error(err.to_string()))?;
        request.headers_mut().insert(USER_AGENT, agent);
        let config = WebSocketConfig::default()
            .read_buffer_size(READ_BUFFER_BYTES)
            .write_buffer_size(0)
            .max_write_buffer_size(MAX_WRITE_BUFFER_BYTES)
            .max_message_size(Some(limits.max_message_bytes))
            .max_frame_size(Some(limits.max_frame_bytes));
        let attempt = async {
            let (host, port) = host_and_port(request.uri()).map_err(connect_error)?;
            // On smolcord's runtime the socket joins the loop's own epoll
            // (elsewhere, async-io's reactor).
            let stream = TcpStream::connect(&host, port, timeout)
                .await
                .map_err(|err| connect_error(err.to_string()))?;
            let tls = futures_rustls::TlsConnector::from(tls::client_config());
            async_tungstenite::smol::client_async_tls_with_connector_and_config(
                request,
                stream,
                Some(tls),
                Some(config),
            )
            .await
            .map(Some)
            .map_err(|err| connect_error(err.to_string()))
        };
        let timed_out = async {
            Timer::after(timeout).await;
            Ok(None)
        };
        match future::or(attempt, timed_out).await? {
            Some((ws, _response)) => {
                trace.connected(&url);
                Ok(Connection {
                    ws,
                    limits,
                    trace,
                    decompressor: Decompressor::new(compress, limits.max_message_bytes),
                })
            }
            None => Err(TransportError::ConnectTimeout {
                url,
                after: timeout,
            }),
        }
    }

    /// The next complete gateway message, a control frame, or how the
    /// connection ended. Cancel-safe.
    pub async fn next_message(&mut self) -> Result<Incoming, TransportError> {
        let message = match self.ws.next().await {
            None => {
                self.trace.closed(Direction::In, None);
                return Ok(Incoming::Closed(None));
            }
            Some(Err(WsError::Capacity(err))) => {
                return Err(TransportError::TooLarge {
                    detail: err.to_string(),
                    limit: self.limits.max_message_bytes,
                })
            }
            Some(Err(err)) => return Err(TransportError::Io(err.to_string())),
            Some(Ok(message)) => message,
        };
        match message {
            Message::Text(text) => {
                self.trace.received(text.as_str());
                Ok(Incoming::Text(text.as_str().to_owned()))
            }
            Message::Binary(bytes) => Ok(match self.inflate(&bytes)? {
                Some(text) => {
                    self.trace.received(&text);
                    Incoming::Text(text)
                }
                None => Incoming::Control,
            }),
            Message::Close(frame) => {
                let code = frame.map(|frame| u16::from(frame.code));
                self.trace.closed(Direction::In, code);
                Ok(Incoming::Closed(code))
            }
            // tungstenite queues the pong itself (one at most).
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => Ok(Incoming::Control),
        }
    }

    fn inflate(&mut self, bytes: &[u8]) -> Result<Option<String>, TransportError> {
        self.decompressor.push(bytes, self.limits.max_message_bytes)
    }

    /// Sends one gateway message.
    pub async fn send(&mut self, text: String) -> Result<(), TransportError> {
        self.trace.sent(&text);
        self.ws
            .send(Message::text(text))
            .await
            .map_err(|err| TransportError::Io(err.to_string()))
    }

    /// Closes with `code`, waiting at most `bound` for the close handshake:
    /// a zombied peer never answers, and waiting on it would hang the shard.
    /// With a zero `bound` the close frame goes out only if the socket takes
    /// it at once, and the connection is dropped (a dead peer, or one that
    /// stopped reading, would only make us wait).
    pub async fn close(mut self, code: u16, bound: Duration) {
        self.trace.closed(Direction::Out, Some(code));
        let frame = CloseFrame {
            code: WsCloseCode::from(code),
            reason: "".into(),
        };
        if bound.is_zero() {
            let _ = future::poll_once(self.ws.close(Some(frame))).await;
            return;
        }
        let handshake = async {
            if self.ws.close(Some(frame)).await.is_ok() {
                // Read until the server's close arrives or the stream ends,
                // yielding now and then: a peer may flood us meanwhile.
                let mut frames = 0u32;
                while let Some(Ok(_)) = self.ws.next().await {
                    frames += 1;
                    if frames % 64 == 0 {
                        future::yield_now().await;
                    }
                }
            }
        };
        future::or(handshake, async {
            Timer::after(bound).await;
        })
        .await;
    }
}

/// The host (without IPv6 brackets) and port of a `ws://` or `wss://` URI.
fn host_and_port(uri: &async_tungstenite::tungstenite::http::Uri) -> Result<(String, u16), String> {
    let host = uri
        .host()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned())
        .ok_or("the URL has no host")?;
    let port = uri
        .port_u16()
        .or(match uri.scheme_str() {
            Some("wss") => Some(443),
            Some("ws") => Some(80),
            _ => None,
        })
        .ok_or("the URL is neither ws:// nor wss://")?;
    Ok((host, port))
}
