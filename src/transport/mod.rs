//! transport: one gateway WebSocket connection, `ws://` or `wss://`
//! (rustls with compiled-in webpki roots, so it works in a `FROM scratch`
//! image, plus any extra CA: see [`tls`]), with optional zlib-stream
//! inflation.
//!
//! A [`Connection`] hands out complete gateway messages as text and accepts
//! text to send. [`Connection::next_message`] is cancel-safe: partial
//! zlib-stream input is kept in the connection, not in the future, so the
//! shard can race it against its heartbeat timer.

#[cfg(feature = "zlib")]
mod inflate;
pub mod tls;
mod url;

#[cfg(feature = "zlib")]
pub use inflate::{InflateError, Inflater};
pub use url::gateway_connect_url;

use async_tungstenite::smol::ConnectStream;
use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode as WsCloseCode;
use async_tungstenite::tungstenite::protocol::CloseFrame;
use async_tungstenite::tungstenite::Message;
use async_tungstenite::WebSocketStream;
use futures_lite::{future, StreamExt};
use std::fmt;
use std::time::Duration;

/// What the gateway sent.
#[derive(Debug)]
pub enum Incoming {
    /// One complete gateway message (JSON text).
    Text(String),
    /// The connection ended: the server's close code, or `None` when the
    /// TCP connection dropped without a close frame.
    Closed(Option<u16>),
}

/// A transport failure, naming what failed.
#[derive(Debug)]
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
            TransportError::Decode(detail) => write!(f, "cannot decode gateway frame: {detail}"),
        }
    }
}

impl std::error::Error for TransportError {}

/// One open gateway WebSocket.
pub struct Connection {
    ws: WebSocketStream<ConnectStream>,
    #[cfg(feature = "zlib")]
    inflater: Option<Inflater>,
}

impl Connection {
    /// Connects to `base_url` with `?v=10&encoding=json` (and
    /// `&compress=zlib-stream` when `compress`), giving up after `timeout`.
    pub async fn connect(
        base_url: &str,
        compress: bool,
        timeout: Duration,
    ) -> Result<Connection, TransportError> {
        #[cfg(not(feature = "zlib"))]
        if compress {
            return Err(TransportError::Connect {
                url: base_url.to_owned(),
                detail: "compression was asked for but this build has no `zlib` feature".into(),
            });
        }
        let url = gateway_connect_url(base_url, compress);
        let attempt = async {
            let tls = futures_rustls::TlsConnector::from(tls::client_config());
            async_tungstenite::smol::connect_async_with_tls_connector(url.as_str(), Some(tls))
                .await
                .map(Some)
                .map_err(|err| TransportError::Connect {
                    url: url.clone(),
                    detail: err.to_string(),
                })
        };
        let timed_out = async {
            async_io::Timer::after(timeout).await;
            Ok(None)
        };
        match future::or(attempt, timed_out).await? {
            Some((ws, _response)) => Ok(Connection {
                ws,
                #[cfg(feature = "zlib")]
                inflater: compress.then(Inflater::new),
            }),
            None => Err(TransportError::ConnectTimeout {
                url,
                after: timeout,
            }),
        }
    }

    /// The next complete gateway message, or how the connection ended.
    /// Cancel-safe.
    pub async fn next_message(&mut self) -> Result<Incoming, TransportError> {
        loop {
            let message = match self.ws.next().await {
                None => return Ok(Incoming::Closed(None)),
                Some(Err(err)) => return Err(TransportError::Io(err.to_string())),
                Some(Ok(message)) => message,
            };
            match message {
                Message::Text(text) => return Ok(Incoming::Text(text.as_str().to_owned())),
                Message::Binary(bytes) => {
                    if let Some(text) = self.inflate(&bytes)? {
                        return Ok(Incoming::Text(text));
                    }
                }
                Message::Close(frame) => {
                    return Ok(Incoming::Closed(frame.map(|frame| u16::from(frame.code))))
                }
                // tungstenite answers pings itself.
                Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            }
        }
    }

    #[cfg(feature = "zlib")]
    fn inflate(&mut self, bytes: &[u8]) -> Result<Option<String>, TransportError> {
        match self.inflater.as_mut() {
            Some(inflater) => inflater
                .push(bytes)
                .map_err(|err| TransportError::Decode(err.to_string())),
            None => Err(TransportError::Decode(
                "binary frame on an uncompressed connection".into(),
            )),
        }
    }

    #[cfg(not(feature = "zlib"))]
    fn inflate(&mut self, _bytes: &[u8]) -> Result<Option<String>, TransportError> {
        Err(TransportError::Decode(
            "binary frame on an uncompressed connection".into(),
        ))
    }

    /// Sends one gateway message.
    pub async fn send(&mut self, text: String) -> Result<(), TransportError> {
        self.ws
            .send(Message::text(text))
            .await
            .map_err(|err| TransportError::Io(err.to_string()))
    }

    /// Closes with `code`, waiting at most `bound` for the close handshake:
    /// a zombied peer never answers, and waiting on it would hang the shard.
    pub async fn close(mut self, code: u16, bound: Duration) {
        let handshake = async {
            let frame = CloseFrame {
                code: WsCloseCode::from(code),
                reason: "".into(),
            };
            if self.ws.close(Some(frame)).await.is_ok() {
                // Read until the server's close arrives or the stream ends.
                while let Some(Ok(_)) = self.ws.next().await {}
            }
        };
        future::or(handshake, async {
            async_io::Timer::after(bound).await;
        })
        .await;
    }
}
