//! [`RestClient`]: the REST calls the bridge makes, with retries and rate
//! limits. Waiting happens here, on the event loop's timers; the HTTP
//! exchange itself runs on the blocking pool (see [`super::exchange`]).

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::rt::Timer;
use serde::de::DeserializeOwned;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::Agent;

use super::error::RestError;
use super::exchange::{exchange, fetch_to_file, http_error, Body, Outgoing, Reply};
use super::multipart::{self, Upload, MAX_FILE_BYTES, MAX_REQUEST_BYTES};
use super::nonce::Nonce;
use super::ratelimit::{seconds, RateLimiter, RouteKey};
use super::split::MESSAGE_LIMIT;
use super::types::{Channel, Message};
use crate::offload::unblock;
use crate::protocol::{GatewayBot, Snowflake};
use crate::shard::{GatewayInfo, GatewayInfoSource};
use crate::token::Token;

/// The `User-Agent` Discord requires (`DiscordBot ($url, $version)`).
pub const USER_AGENT: &str = concat!(
    "DiscordBot (https://github.com/smolcord/smolcord, ",
    env!("CARGO_PKG_VERSION"),
    ")"
);

/// Default bound on one request, connect to last body byte.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
/// Default bound on one attachment download.
pub const DEFAULT_DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// 429 answers accepted for one call before giving up.
const MAX_RATE_LIMITED: u32 = 5;
/// Total rate-limit waiting accepted for one call.
const MAX_RATE_WAIT: Duration = Duration::from_secs(60);
/// Tries for a 5xx, a transport failure or (on an idempotent route) a
/// timeout, counted together (first try included). A call is thus at most
/// this many timeouts plus the back-offs long, as it already was when a
/// 5xx came just before the timeout, besides its rate-limit waits.
const TRANSIENT_TRIES: u32 = 3;
/// First back-off after a 5xx or transport failure; doubles each time.
const BACKOFF: Duration = Duration::from_millis(250);
/// A 429 without `retry_after` (a proxy's, say) waits this long.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// A Discord REST client. Cloning is cheap and clones share connections and
/// rate-limit state.
#[derive(Clone)]
pub struct RestClient {
    shared: Arc<Shared>,
    timeout: Duration,
    download_timeout: Duration,
}

struct Shared {
    agent: Agent,
    api_base: String,
    token: Token,
    limiter: Mutex<RateLimiter>,
}

impl fmt::Debug for RestClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestClient")
            .field("api_base", &self.shared.api_base)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A request before it is sent: method, template (for errors and buckets),
/// concrete path, major parameter, and whether it may be sent again after a
/// timeout.
struct Route {
    method: &'static str,
    template: &'static str,
    path: String,
    major: String,
    /// Sending it twice has the effect of sending it once. A request that
    /// timed out may have reached Discord and taken effect (only the answer
    /// was late or lost), so it is retried only when this holds.
    idempotent: bool,
}

impl Route {
    fn name(&self) -> String {
        format!("{} {}", self.method, self.template)
    }

    /// `POST /channels/{channel_id}/messages`, the id checked.
    fn new_message(channel_id: &str) -> Result<Route, RestError> {
        let route = Route {
            method: "POST",
            template: "/channels/{channel_id}/messages",
            path: format!("/channels/{channel_id}/messages"),
            major: channel_id.to_owned(),
            // Every message the client creates carries a nonce with
            // `enforce_nonce` (see `message_body`): Discord answers a repeat
            // with the message the first one created.
            idempotent: true,
        };
        snowflake(&route, "channel_id", channel_id)?;
        Ok(route)
    }

    /// `PATCH /channels/{channel_id}/messages/{message_id}`, the ids checked.
    fn edit_message(channel_id: &str, message_id: &str) -> Result<Route, RestError> {
        let route = Route {
            method: "PATCH",
            template: "/channels/{channel_id}/messages/{message_id}",
            path: format!("/channels/{channel_id}/messages/{message_id}"),
            major: channel_id.to_owned(),
            // An edit sets the content (and attachments): a repeat sets the same.
            idempotent: true,
        };
        snowflake(&route, "channel_id", channel_id)?;
        snowflake(&route, "message_id", message_id)?;
        Ok(route)
    }
}

/// A message body: `content` with mentions disabled, and for a new message
/// its `nonce` with `enforce_nonce`.
fn message_body(content: &str, nonce: Option<&Nonce>) -> serde_json::Value {
    let mut body = serde_json::json!({
        "content": content,
        "allowed_mentions": { "parse": [] },
    });
    if let Some(nonce) = nonce {
        body["nonce"] = nonce.as_str().into();
        body["enforce_nonce"] = true.into();
    }
    body
}

impl RestClient {
    /// A client for `api_base` (e.g. `https://discord.com/api/v10`).
    pub fn new(api_base: &str, token: Token) -> RestClient {
        let config = Agent::config_builder()
            // 4xx/5xx bodies carry Discord's error code: read them.
            .http_status_as_error(false)
            .user_agent(USER_AGENT)
            // The API never redirects; a redirect would be a wrong base URL,
            // better reported than followed.
            .max_redirects(0)
            .timeout_global(Some(DEFAULT_TIMEOUT))
            // 16 KiB instead of ureq's 128 KiB each: a pooled connection
            // keeps both while the bot idles (−0.22 MiB of idle RSS), and
            // Discord's response headers are a few KiB (bodies and uploads
            // stream through).
            .input_buffer_size(16 * 1024)
            .output_buffer_size(16 * 1024)
            .build();
        RestClient {
            shared: Arc::new(Shared {
                agent: Agent::with_parts(
                    config,
                    super::tls::connector(),
                    DefaultResolver::default(),
                ),
                api_base: api_base.trim_end_matches('/').to_owned(),
                token,
                limiter: Mutex::new(RateLimiter::default()),
            }),
            timeout: DEFAULT_TIMEOUT,
            download_timeout: DEFAULT_DOWNLOAD_TIMEOUT,
        }
    }

    /// Sets the bound on each API request (default 15 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the bound on each attachment download (default 60 s).
    pub fn with_download_timeout(mut self, timeout: Duration) -> Self {
        self.download_timeout = timeout;
        self
    }

    /// The REST base URL.
    pub fn api_base(&self) -> &str {
        &self.shared.api_base
    }

    /// `GET /gateway/bot` as a shard's [`GatewayInfoSource`]: where to
    /// connect and the identify budget, asked before each fresh identify.
    pub fn gateway_info_source(&self) -> GatewayInfoSource {
        let rest = self.clone();
        Arc::new(move || {
            let rest = rest.clone();
            Box::pin(async move {
                let bot = rest.gateway_bot().await.map_err(|e| e.to_string())?;
                Ok(GatewayInfo {
                    url: bot.url,
                    session_start_limit: Some(bot.session_start_limit),
                })
            })
        })
    }

    /// `GET /gateway/bot`: gateway URL, shard count, identify budget.
    pub async fn gateway_bot(&self) -> Result<GatewayBot, RestError> {
        let route = Route {
            method: "GET",
            template: "/gateway/bot",
            path: "/gateway/bot".into(),
            major: String::new(),
            idempotent: true,
        };
        self.call(route, None).await
    }

    /// `POST /users/@me/channels`: opens (or returns) the DM channel with a user.
    pub async fn create_dm(&self, recipient_id: &str) -> Result<Channel, RestError> {
        let template = "/users/@me/channels";
        let route = Route {
            method: "POST",
            template,
            path: template.into(),
            major: String::new(),
            // Opening a DM that is open returns the same channel.
            idempotent: true,
        };
        snowflake(&route, "recipient_id", recipient_id)?;
        let body = serde_json::json!({ "recipient_id": recipient_id });
        self.call(route, Some(body)).await
    }

    /// `GET /channels/{id}`: the channel (its `type` tells a DM, 1, from a
    /// guild channel).
    pub async fn get_channel(&self, channel_id: &str) -> Result<Channel, RestError> {
        let route = Route {
            method: "GET",
            template: "/channels/{channel_id}",
            path: format!("/channels/{channel_id}"),
            major: channel_id.to_owned(),
            idempotent: true,
        };
        snowflake(&route, "channel_id", channel_id)?;
        self.call(route, None).await
    }

    /// `GET /channels/{id}/messages?after={id}&limit={n}`: the `limit`
    /// (1..=100) messages right after `after` (any snowflake, e.g. one
    /// made from a time), answered newest first as Discord does; page on
    /// with the newest id of the answer (fewer than `limit`: caught up).
    /// Without `after`: the channel's newest `limit` messages.
    pub async fn channel_messages(
        &self,
        channel_id: &str,
        after: Option<Snowflake>,
        limit: u8,
    ) -> Result<Vec<crate::protocol::Message>, RestError> {
        let limit = limit.clamp(1, 100);
        let query = match after {
            Some(after) => format!("after={after}&limit={limit}"),
            None => format!("limit={limit}"),
        };
        let route = Route {
            method: "GET",
            template: "/channels/{channel_id}/messages",
            path: format!("/channels/{channel_id}/messages?{query}"),
            major: channel_id.to_owned(),
            idempotent: true,
        };
        snowflake(&route, "channel_id", channel_id)?;
        self.call(route, None).await
    }

    /// `POST /channels/{id}/messages` with mentions disabled and a random
    /// [`Nonce`] (see [`RestClient::create_message_with_nonce`]).
    pub async fn create_message(
        &self,
        channel_id: &str,
        content: &str,
    ) -> Result<Message, RestError> {
        self.create_message_with_nonce(channel_id, content, &Nonce::random())
            .await
    }

    /// `POST /channels/{id}/messages` with mentions disabled.
    ///
    /// The message carries `nonce` with `enforce_nonce`, so a retry after a
    /// lost answer cannot post it twice, and neither can a later call with
    /// the same nonce within Discord's window (a few minutes). Content must
    /// be 1..=2000 characters (see [`super::split_message`]).
    pub async fn create_message_with_nonce(
        &self,
        channel_id: &str,
        content: &str,
        nonce: &Nonce,
    ) -> Result<Message, RestError> {
        let route = Route::new_message(channel_id)?;
        check_content(&route, content)?;
        self.call(route, Some(message_body(content, Some(nonce))))
            .await
    }

    /// `PATCH /channels/{id}/messages/{id}`: replaces a message's content.
    pub async fn edit_message(
        &self,
        channel_id: &str,
        message_id: &str,
        content: &str,
    ) -> Result<Message, RestError> {
        let route = Route::edit_message(channel_id, message_id)?;
        check_content(&route, content)?;
        self.call(route, Some(message_body(content, None))).await
    }

    /// `POST /channels/{id}/messages` with a file and a random [`Nonce`]
    /// (see [`RestClient::create_message_with_file_and_nonce`]).
    pub async fn create_message_with_file(
        &self,
        channel_id: &str,
        content: &str,
        file: Upload<'_>,
    ) -> Result<Message, RestError> {
        self.create_message_with_file_and_nonce(channel_id, content, file, &Nonce::random())
            .await
    }

    /// `POST /channels/{id}/messages` with a file: a `multipart/form-data`
    /// body of `payload_json` (the content, mentions disabled, `nonce` with
    /// `enforce_nonce` as in [`RestClient::create_message_with_nonce`]) and
    /// `files[0]`. Content may be empty (the file alone); the file must be
    /// within Discord's default 10 MiB.
    pub async fn create_message_with_file_and_nonce(
        &self,
        channel_id: &str,
        content: &str,
        file: Upload<'_>,
        nonce: &Nonce,
    ) -> Result<Message, RestError> {
        let route = Route::new_message(channel_id)?;
        let body = upload_body(&route, message_body(content, Some(nonce)), file, true)?;
        self.call_with(route, Some(body)).await
    }

    /// [`RestClient::create_message_with_file_and_nonce`] without the
    /// `attachments` array in `payload_json`. Discord documents that array
    /// as optional ("Uploading Files": each `files[n]` part names its file
    /// in its `Content-Disposition`; `attachments` only adds metadata such
    /// as a description), and a server that refuses a form with it may take
    /// the form without it: the fallback for an upload refused for good.
    pub async fn create_message_with_bare_file_and_nonce(
        &self,
        channel_id: &str,
        content: &str,
        file: Upload<'_>,
        nonce: &Nonce,
    ) -> Result<Message, RestError> {
        let route = Route::new_message(channel_id)?;
        let body = upload_body(&route, message_body(content, Some(nonce)), file, false)?;
        self.call_with(route, Some(body)).await
    }

    /// `PATCH /channels/{id}/messages/{id}` with a file: replaces the
    /// content and attaches `file` (e.g. a reply replacing a "working…"
    /// placeholder).
    pub async fn edit_message_with_file(
        &self,
        channel_id: &str,
        message_id: &str,
        content: &str,
        file: Upload<'_>,
    ) -> Result<Message, RestError> {
        let route = Route::edit_message(channel_id, message_id)?;
        // On an edit the array is what attaches the file: Discord keeps
        // only the files it lists.
        let body = upload_body(&route, message_body(content, None), file, true)?;
        self.call_with(route, Some(body)).await
    }

    /// `POST /channels/{id}/typing`: shows "typing…" for about 10 s.
    pub async fn trigger_typing(&self, channel_id: &str) -> Result<(), RestError> {
        let route = Route {
            method: "POST",
            template: "/channels/{channel_id}/typing",
            path: format!("/channels/{channel_id}/typing"),
            major: channel_id.to_owned(),
            // A second "typing…" within the first one's 10 s shows nothing new.
            idempotent: true,
        };
        snowflake(&route, "channel_id", channel_id)?;
        // An empty body still gets `Content-Length: 0`, which proxies want.
        self.send(&route, Some(Body::json(Vec::new())))
            .await
            .map(drop)
    }

    /// Downloads an attachment (CDN URL) to `dest`, at most `max_bytes`.
    /// No `Authorization` header: the CDN needs none and must never see the
    /// token. Returns the number of bytes written; on error `dest` is removed.
    pub async fn download(&self, url: &str, max_bytes: u64, dest: &Path) -> Result<u64, RestError> {
        let route = download_route(url)?;
        let mut tries = 0;
        loop {
            tries += 1;
            let agent = self.shared.agent.clone();
            let out = Outgoing {
                method: "GET",
                url: url.to_owned(),
                token: None,
                body: None,
                timeout: self.download_timeout,
                max_redirects: 3,
            };
            let (task_route, dest) = (route.clone(), dest.to_path_buf());
            let result =
                unblock(move || fetch_to_file(&agent, out, &task_route, max_bytes, dest)).await;
            // A download that timed out is not tried again, although a GET is
            // safe to repeat: it had `download_timeout` (60 s) for a big file
            // on a slow link, and starting over from the first byte would most
            // likely time out too, after minutes the voice note waits for.
            match result {
                Err(e) if tries < TRANSIENT_TRIES && is_transient(&e) => {
                    log::warn!("{e}; retrying");
                    Timer::after(backoff(tries)).await;
                }
                other => return other,
            }
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        route: Route,
        body: Option<serde_json::Value>,
    ) -> Result<T, RestError> {
        let body = body.map(|b| Body::json(b.to_string().into_bytes()));
        self.call_with(route, body).await
    }

    async fn call_with<T: DeserializeOwned>(
        &self,
        route: Route,
        body: Option<Body>,
    ) -> Result<T, RestError> {
        let reply = self.send(&route, body).await?;
        serde_json::from_slice(&reply.body).map_err(|e| RestError::Decode {
            route: route.name(),
            detail: self.shared.token.redact(&e.to_string()),
        })
    }

    /// Sends with rate limits and retries; returns a 2xx reply.
    async fn send(&self, route: &Route, body: Option<Body>) -> Result<Reply, RestError> {
        let name = route.name();
        let key = RouteKey {
            route: name.clone(),
            major: route.major.clone(),
        };
        let mut waited = Duration::ZERO;
        let mut rate_limited = 0;
        let mut transient = 0;
        loop {
            // Wait for the bucket (and the global limit), within the budget.
            loop {
                // Own statement: the guard must be dropped before awaiting.
                let wait = self.limiter().acquire(&key, Instant::now());
                let Some(wait) = wait else { break };
                if waited + wait > MAX_RATE_WAIT {
                    return Err(RestError::RateLimitedTooLong {
                        route: name,
                        retry_after: wait,
                        attempts: rate_limited,
                    });
                }
                log::debug!(
                    "{name}: waiting {:.2} s for the rate limit",
                    wait.as_secs_f64()
                );
                Timer::after(wait).await;
                waited += wait;
            }

            let agent = self.shared.agent.clone();
            let out = Outgoing {
                method: route.method,
                url: format!("{}{}", self.shared.api_base, route.path),
                token: Some(self.shared.token.clone()),
                body: body.clone(),
                timeout: self.timeout,
                max_redirects: 0,
            };
            let task_route = name.clone();
            let result = unblock(move || exchange(&agent, out, &task_route)).await;
            let reply = match result {
                Ok(reply) => reply,
                Err(e) if transient + 1 < TRANSIENT_TRIES && worth_retrying(route, &e) => {
                    transient += 1;
                    log::warn!("{e}; retrying");
                    Timer::after(backoff(transient)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.limiter().update(&key, &reply.headers, reply.received);
            log::debug!("{name}: HTTP {}", reply.status);
            match reply.status {
                200..=299 => return Ok(reply),
                429 => {
                    rate_limited += 1;
                    let (retry_after, global) = retry_after(&reply);
                    if rate_limited >= MAX_RATE_LIMITED || waited + retry_after > MAX_RATE_WAIT {
                        return Err(RestError::RateLimitedTooLong {
                            route: name,
                            retry_after,
                            attempts: rate_limited,
                        });
                    }
                    log::warn!(
                        "{name}: rate limited{}, retrying in {:.2} s",
                        if global { " (global)" } else { "" },
                        retry_after.as_secs_f64()
                    );
                    self.limiter()
                        .limited(&key, retry_after, global, reply.received);
                }
                500..=599 if transient + 1 < TRANSIENT_TRIES => {
                    transient += 1;
                    log::warn!("{name}: HTTP {}; retrying", reply.status);
                    Timer::after(backoff(transient)).await;
                }
                status => {
                    return Err(http_error(
                        &name,
                        status,
                        &reply.body,
                        Some(&self.shared.token),
                    ))
                }
            }
        }
    }

    fn limiter(&self) -> MutexGuard<'_, RateLimiter> {
        // A panic while holding the lock cannot leave the map half-written
        // in a way that matters; keep going rather than poison every call.
        self.shared
            .limiter
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What a 429 asks: the body's `retry_after` (float seconds), else the
/// `Retry-After` header; global from the body or the headers.
fn retry_after(reply: &Reply) -> (Duration, bool) {
    #[derive(serde::Deserialize)]
    struct Limited {
        retry_after: Option<f64>,
        global: Option<bool>,
    }
    let body = serde_json::from_slice::<Limited>(&reply.body).ok();
    let from_body = body
        .as_ref()
        .and_then(|b| b.retry_after)
        .and_then(|s| seconds(&s.to_string()));
    let wait = from_body
        .or(reply.headers.retry_after)
        .unwrap_or(DEFAULT_RETRY_AFTER);
    let global = body.and_then(|b| b.global).unwrap_or(false)
        || reply.headers.global
        || reply.headers.scope.as_deref() == Some("global");
    (wait, global)
}

/// A failure that another try of the same request may not have.
fn is_transient(e: &RestError) -> bool {
    match e {
        RestError::Transport { .. } => true,
        RestError::Http { status, .. } => *status >= 500,
        _ => false,
    }
}

/// [`is_transient`], and a timeout of an idempotent route. A timeout
/// leaves it open whether Discord acted on the request, so a route whose
/// repeat could act twice (a message without an enforced nonce, say: none
/// is sent today) fails with it, and its caller decides.
fn worth_retrying(route: &Route, e: &RestError) -> bool {
    match e {
        RestError::Timeout { .. } => route.idempotent,
        e => is_transient(e),
    }
}

fn backoff(attempt: u32) -> Duration {
    let base = BACKOFF * 2u32.saturating_pow(attempt.saturating_sub(1));
    base + Duration::from_millis(fastrand::u64(0..100))
}

/// Ids go into URL paths, so they must be snowflakes and nothing else.
fn snowflake(route: &Route, what: &str, id: &str) -> Result<(), RestError> {
    if !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        let shown: String = id.chars().take(40).collect();
        Err(RestError::InvalidInput {
            route: route.name(),
            detail: format!("{what} {shown:?} is not a snowflake id"),
        })
    }
}

/// The multipart body of a message (`payload`, which gets the file's
/// `attachments` entry when `attachments_field`) with one file, within
/// Discord's limits.
fn upload_body(
    route: &Route,
    mut payload: serde_json::Value,
    file: Upload<'_>,
    attachments_field: bool,
) -> Result<Body, RestError> {
    let invalid = |detail: String| RestError::InvalidInput {
        route: route.name(),
        detail,
    };
    let content = payload["content"].as_str().unwrap_or_default();
    if !content.is_empty() {
        check_content(route, content)?;
    }
    if attachments_field {
        payload["attachments"] = serde_json::json!([{ "id": 0, "filename": file.filename }]);
    }
    if !multipart::plain_filename(file.filename) {
        return Err(invalid(format!(
            "file name {:?} must be 1 to 100 ASCII letters, digits, '.', '_' or '-'",
            file.filename.chars().take(40).collect::<String>()
        )));
    }
    if file.bytes.len() > MAX_FILE_BYTES {
        return Err(invalid(format!(
            "the file has {} bytes; Discord takes at most {MAX_FILE_BYTES} per file",
            file.bytes.len()
        )));
    }
    let (content_type, bytes) = multipart::form(payload.to_string().as_bytes(), &[file]);
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(invalid(format!(
            "the request has {} bytes; Discord takes at most {MAX_REQUEST_BYTES}",
            bytes.len()
        )));
    }
    Ok(Body {
        content_type,
        bytes: bytes.into(),
    })
}

fn check_content(route: &Route, content: &str) -> Result<(), RestError> {
    let chars = content.chars().count();
    if content.trim().is_empty() || chars > MESSAGE_LIMIT {
        return Err(RestError::InvalidInput {
            route: route.name(),
            detail: format!(
                "content has {chars} characters; Discord takes 1 to {MESSAGE_LIMIT} (use split_message)"
            ),
        });
    }
    Ok(())
}

/// `GET host/path` of a download URL: no query (signed CDN URLs carry their
/// signature there).
fn download_route(url: &str) -> Result<String, RestError> {
    let invalid = |detail: String| RestError::InvalidInput {
        route: "GET (download)".into(),
        detail,
    };
    let uri: ureq::http::Uri = url.parse().map_err(|_| invalid("not a valid URL".into()))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => return Err(invalid("only http and https URLs can be downloaded".into())),
    }
    let host = uri.host().unwrap_or_default();
    Ok(format!("GET {host}{}", uri.path()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::{AsyncReadExt, AsyncWriteExt};

    /// Sends a `POST` that is or is not idempotent to a server that reads
    /// requests and never answers; returns the error and how many requests
    /// (one connection each: a timed-out one is not reused) it sent.
    fn against_a_hung_server(idempotent: bool) -> (RestError, usize) {
        smol::block_on(async {
            let listener = async_net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let (done_tx, done_rx) = smol::channel::bounded::<usize>(1);
            let _server = smol::spawn(async move {
                let (mut requests, mut held) = (0, Vec::new());
                // One connection at a time, in the order they came: when the
                // test's own "!" arrives, every try before it was counted.
                while let Ok((mut stream, _)) = listener.accept().await {
                    let mut first = [0u8; 1];
                    match stream.read(&mut first).await {
                        Ok(1) if first[0] == b'!' => {
                            let _ = done_tx.send(requests).await;
                        }
                        Ok(1) => requests += 1,
                        _ => {}
                    }
                    held.push(stream);
                }
            });
            let rest = RestClient::new(
                &format!("http://127.0.0.1:{port}/api/v10"),
                Token::new("a-test-token").unwrap(),
            )
            .with_timeout(Duration::from_millis(300));
            let route = Route {
                method: "POST",
                template: "/things",
                path: "/things".into(),
                major: String::new(),
                idempotent,
            };
            let err = rest
                .send(&route, Some(Body::json(b"{}".to_vec())))
                .await
                .err()
                .expect("no answer, no success");
            let mut last = async_net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            last.write_all(b"!").await.unwrap();
            let requests = futures_lite::future::or(async { done_rx.recv().await.ok() }, async {
                Timer::after(Duration::from_secs(20)).await;
                None
            })
            .await
            .expect("the server saw the last connection within 20 s");
            (err, requests)
        })
    }

    #[test]
    fn a_request_that_may_act_twice_is_not_sent_again_after_a_timeout() {
        let (err, requests) = against_a_hung_server(false);
        assert!(matches!(err, RestError::Timeout { .. }), "{err:?}");
        assert_eq!(requests, 1);
        // The same server and route, idempotent: tried TRANSIENT_TRIES times.
        let (err, requests) = against_a_hung_server(true);
        assert!(matches!(err, RestError::Timeout { .. }), "{err:?}");
        assert_eq!(requests, TRANSIENT_TRIES as usize);
    }
}
