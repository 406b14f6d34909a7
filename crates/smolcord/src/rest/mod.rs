//! REST: the few Discord HTTP calls the bridge needs — one route table
//! ([`Route`], which the simulator serves by too) — `GET /gateway/bot`,
//! open a DM, read history, create / edit a message from one
//! [`MessageDraft`] (files as `multipart/form-data`, a reply, a [`Nonce`]
//! that makes a re-send create nothing new),
//! typing, attachment download — with
//! Discord's rate limits (buckets, 429 `retry_after`, the global limit),
//! retries of 5xx and transport failures (and of timeouts, for the
//! requests a repeat cannot make act twice: all the bridge sends), and
//! typed errors carrying Discord's JSON error code.
//!
//! # Why ureq
//!
//! The HTTP stack is [`ureq`] 3 (`default-features = false`: its TLS is our
//! connector on the shared rustls config, `tls.rs`), run through
//! [`crate::offload::unblock`]:
//! - it is maintained, and shares rustls 0.23 with ring with the gateway's
//!   TLS, so the binary carries one TLS stack (≈ +230 KB measured, against
//!   ≈ +280 KB for async-h1, unmaintained since 2023, and ≈ +2 MB for
//!   libcurl via isahc);
//! - its calls are blocking, but they run on the `blocking` pool, so the
//!   event loop (and the heartbeat) never waits on them; DNS resolution is
//!   blocking in every stack anyway;
//! - the bridge sends a handful of requests a minute: a thread per
//!   in-flight request costs nothing that matters, and owning chunked
//!   encoding, keep-alive and TLS errors in a hand-written client would.
//!
//! The one exception is [`plain_get`] (an identify queue service holds it
//! for minutes): it waits on the loop, as a socket, not a pool thread.
//!
//! Rate-limit waits and retry back-offs are async timers on the loop, never
//! sleeps on a pool thread. `https://` trusts what the gateway trusts (see
//! [`crate::transport::tls`]).
//!
//! ```no_run
//! # smol::block_on(async {
//! use smolcord::protocol::Snowflake;
//! use smolcord::rest::{split_message, MessageDraft, RestClient, MESSAGE_LIMIT};
//! use smolcord::token::Token;
//! let token = Token::new("…").expect("a token");
//! let rest = RestClient::new("https://discord.com/api/v10", token);
//! let dm = rest.create_dm(Snowflake::new(80351110224678912)).await?;
//! for chunk in split_message("a long reply", MESSAGE_LIMIT) {
//!     rest.create_message(dm.id, &MessageDraft::text(&chunk)).await?;
//! }
//! # Ok::<(), smolcord::rest::RestError>(())
//! # });
//! ```

mod client;
mod clock;
mod download;
mod draft;
mod emoji;
mod error;
mod exchange;
mod interactions;
mod multipart;
mod nonce;
mod plain;
mod ratelimit;
mod route;
mod split;
mod tls;

pub use client::{RestClient, DEFAULT_DOWNLOAD_TIMEOUT, DEFAULT_TIMEOUT, USER_AGENT};
pub use clock::parse_http_date;
pub use download::{download_allowed, CDN_HOSTS, MAX_REDIRECTS};
pub use draft::MessageDraft;
pub use emoji::{Emoji, EMOJI_MAX_BYTES};
pub use error::RestError;
pub use interactions::{
    ApplicationCommand, CommandOption, InteractionResponse, RegisteredCommand, CONTEXT_BOT_DM,
    OPTION_STRING,
};
pub use multipart::{FileSource, Upload, MAX_FILES, MAX_FILE_BYTES, MAX_REQUEST_BYTES};
pub use nonce::{Nonce, NONCE_MAX_CHARS};
pub use plain::{plain_get, PlainGetError};
pub use route::{Method, Route, Unmatched};
pub use split::{split_message, MESSAGE_LIMIT};
