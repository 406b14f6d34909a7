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

use super::clock::ServerClock;
use super::download::{download_allowed, resolve_location, MAX_REDIRECTS};
use super::draft::MessageDraft;
use super::emoji::Emoji;
use super::error::RestError;
use super::exchange::{exchange, fetch_to_file, http_error, Body, Fetched, Outgoing, Reply};
use super::nonce::Nonce;
use super::ratelimit::{seconds, RateLimiter, RouteKey};
use super::route::Route;
use crate::offload::unblock;
use crate::protocol::{Channel, GatewayBot, Message, Snowflake};
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
    clock: ServerClock,
}

impl fmt::Debug for RestClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestClient")
            .field("api_base", &self.shared.api_base)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
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
                clock: ServerClock::default(),
            }),
            timeout: DEFAULT_TIMEOUT,
            download_timeout: DEFAULT_DOWNLOAD_TIMEOUT,
        }
    }

    /// Discord's clock minus the host's, in ms, from the `Date` header of
    /// the last answer that had one (`None` before any; 0 within the
    /// header's second): add it to the host's time before comparing it
    /// with message times (snowflakes).
    pub fn clock_skew_ms(&self) -> Option<i64> {
        self.shared.clock.skew_ms()
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

    /// `GET /gateway/bot`: gateway URL, shard count, identify budget.
    pub async fn gateway_bot(&self) -> Result<GatewayBot, RestError> {
        self.call(Route::GatewayBot, None, None).await
    }

    /// `POST /users/@me/channels`: opens (or returns) the DM channel with a user.
    pub async fn create_dm(&self, recipient_id: Snowflake) -> Result<Channel, RestError> {
        let body = serde_json::json!({ "recipient_id": recipient_id });
        self.call(Route::CreateDm, None, Some(body)).await
    }

    /// `GET /channels/{id}`: the channel (its `kind` tells a DM from a
    /// guild channel).
    pub async fn get_channel(&self, channel_id: Snowflake) -> Result<Channel, RestError> {
        self.call(Route::GetChannel { channel_id }, None, None)
            .await
    }

    /// `GET /channels/{id}/messages?after={id}&limit={n}`: the `limit`
    /// (1..=100) messages right after `after` (any snowflake, e.g. one
    /// made from a time), answered newest first as Discord does; page on
    /// with the newest id of the answer (fewer than `limit`: caught up).
    /// Without `after`: the channel's newest `limit` messages.
    pub async fn channel_messages(
        &self,
        channel_id: Snowflake,
        after: Option<Snowflake>,
        limit: u8,
    ) -> Result<Vec<Message>, RestError> {
        let limit = limit.clamp(1, 100);
        let query = match after {
            Some(after) => format!("after={after}&limit={limit}"),
            None => format!("limit={limit}"),
        };
        self.call(Route::GetMessages { channel_id }, Some(query), None)
            .await
    }

    /// `GET /channels/{id}/messages?before={id}&limit={n}`: the `limit`
    /// (1..=100) messages right before `before`, answered newest first as
    /// Discord does (the conversation leading up to a message).
    pub async fn channel_messages_before(
        &self,
        channel_id: Snowflake,
        before: Snowflake,
        limit: u8,
    ) -> Result<Vec<Message>, RestError> {
        let limit = limit.clamp(1, 100);
        let query = format!("before={before}&limit={limit}");
        self.call(Route::GetMessages { channel_id }, Some(query), None)
            .await
    }

    /// `POST /channels/{id}/messages`: sends `draft` as a new message
    /// (as `multipart/form-data` when it has files), mentions disabled.
    ///
    /// The message carries the draft's nonce (a random one if it has none)
    /// with `enforce_nonce`, so a retry after a lost answer cannot post it
    /// twice.
    pub async fn create_message(
        &self,
        channel_id: Snowflake,
        draft: &MessageDraft<'_>,
    ) -> Result<Message, RestError> {
        let route = Route::CreateMessage { channel_id };
        let random = Nonce::random();
        let nonce = draft.nonce_or(&random);
        let body = message_body(&route, draft, Some(nonce), false)?;
        self.call_with(route, None, Some(body)).await
    }

    /// `PATCH /channels/{id}/messages/{id}`: replaces a message's content
    /// (and, when the draft has files, its attachments: e.g. a reply
    /// replacing a "working…" placeholder).
    pub async fn edit_message(
        &self,
        channel_id: Snowflake,
        message_id: Snowflake,
        draft: &MessageDraft<'_>,
    ) -> Result<Message, RestError> {
        let route = Route::EditMessage {
            channel_id,
            message_id,
        };
        let body = message_body(&route, draft, None, true)?;
        self.call_with(route, None, Some(body)).await
    }

    /// `POST /channels/{id}/messages/{id}/threads`: starts a public thread
    /// named `name` (1 to 100 characters) from a message; the thread's id
    /// is the message's. Discord refuses a second thread from the same
    /// message (400 160004), so a timeout is not retried.
    pub async fn start_thread_from_message(
        &self,
        channel_id: Snowflake,
        message_id: Snowflake,
        name: &str,
    ) -> Result<Channel, RestError> {
        let route = Route::StartThreadFromMessage {
            channel_id,
            message_id,
        };
        let name: String = name.chars().take(100).collect();
        if name.trim().is_empty() {
            return Err(RestError::InvalidInput {
                route: route.to_string(),
                detail: "a thread name needs 1 to 100 characters".into(),
            });
        }
        // Archived after a day without messages (Discord's 1440 minutes).
        let body = serde_json::json!({"name": name, "auto_archive_duration": 1440});
        self.call(route, None, Some(body)).await
    }

    /// `PUT /channels/{id}/messages/{id}/reactions/{emoji}/@me`: the bot
    /// reacts to a message with `emoji` (a repeat changes nothing).
    pub async fn create_reaction(
        &self,
        channel_id: Snowflake,
        message_id: Snowflake,
        emoji: Emoji,
    ) -> Result<(), RestError> {
        let route = Route::CreateReaction {
            channel_id,
            message_id,
            emoji,
        };
        self.send(&route, None, Some(Body::json(Vec::new())))
            .await
            .map(drop)
    }

    /// `POST /channels/{id}/typing`: shows "typing…" for about 10 s.
    pub async fn trigger_typing(&self, channel_id: Snowflake) -> Result<(), RestError> {
        // An empty body still gets `Content-Length: 0`, which proxies want.
        let route = Route::TriggerTyping { channel_id };
        self.send(&route, None, Some(Body::json(Vec::new())))
            .await
            .map(drop)
    }

    /// Downloads an attachment (CDN URL) to `dest`, at most `max_bytes`.
    /// No `Authorization` header: the CDN needs none and must never see the
    /// token. Returns the number of bytes written; on error `dest` is removed.
    ///
    /// Only from Discord's CDN or the API's own host
    /// ([`download_allowed`](super::download_allowed)): the URL and every
    /// redirect (at most [`MAX_REDIRECTS`]) are checked before they are
    /// requested, and one that points elsewhere is
    /// [`RestError::ForeignHost`]. The timeout covers a try's redirects
    /// and body together.
    pub async fn download(&self, url: &str, max_bytes: u64, dest: &Path) -> Result<u64, RestError> {
        let route = download_route(url)?;
        if let Err(origin) = download_allowed(url, self.api_base()) {
            return Err(RestError::ForeignHost {
                route,
                origin,
                redirects: 0,
            });
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let result = self.download_once(url, &route, max_bytes, dest).await;
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

    /// One try of [`RestClient::download`]: the URL, then each redirect
    /// once it passed the host rule, within one `download_timeout`.
    async fn download_once(
        &self,
        url: &str,
        route: &str,
        max_bytes: u64,
        dest: &Path,
    ) -> Result<u64, RestError> {
        let deadline = Instant::now() + self.download_timeout;
        let mut hop_url = url.to_owned();
        let mut hop_route = route.to_owned();
        for redirects in 0..=MAX_REDIRECTS {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(RestError::Timeout { route: hop_route });
            }
            let agent = self.shared.agent.clone();
            let out = Outgoing {
                method: "GET",
                url: hop_url.clone(),
                token: None,
                body: None,
                timeout: left,
                // Followed here, each hop checked first.
                max_redirects: 0,
            };
            let (task_route, task_dest) = (hop_route.clone(), dest.to_path_buf());
            let fetched =
                unblock(move || fetch_to_file(&agent, out, &task_route, max_bytes, task_dest))
                    .await?;
            let location = match fetched {
                Fetched::Written(bytes) => return Ok(bytes),
                Fetched::Redirect(location) => location,
            };
            if redirects == MAX_REDIRECTS {
                break;
            }
            let next = resolve_location(&hop_url, &location).ok_or_else(|| RestError::Http {
                status: 302,
                code: None,
                message: "a redirect without a usable Location".to_owned(),
                route: hop_route.clone(),
            })?;
            if let Err(origin) = download_allowed(&next, self.api_base()) {
                return Err(RestError::ForeignHost {
                    route: hop_route,
                    origin,
                    redirects: redirects + 1,
                });
            }
            let next_route = download_route(&next)?;
            log::debug!("{hop_route}: redirected to {next_route}");
            hop_route = next_route;
            hop_url = next;
        }
        Err(RestError::TooManyRedirects {
            route: route.to_owned(),
            limit: MAX_REDIRECTS,
        })
    }

    pub(super) async fn call<T: DeserializeOwned>(
        &self,
        route: Route,
        query: Option<String>,
        body: Option<serde_json::Value>,
    ) -> Result<T, RestError> {
        let body = body.map(|b| Body::json(b.to_string().into_bytes()));
        self.call_with(route, query, body).await
    }

    async fn call_with<T: DeserializeOwned>(
        &self,
        route: Route,
        query: Option<String>,
        body: Option<Body>,
    ) -> Result<T, RestError> {
        let reply = self.send(&route, query, body).await?;
        serde_json::from_slice(&reply.body).map_err(|e| RestError::Decode {
            route: route.to_string(),
            detail: self.shared.token.redact(&e.to_string()),
        })
    }

    /// Sends with rate limits and retries; returns a 2xx reply.
    pub(super) async fn send(
        &self,
        route: &Route,
        query: Option<String>,
        body: Option<Body>,
    ) -> Result<Reply, RestError> {
        self.send_as(route, query, body, route.idempotent()).await
    }

    /// [`RestClient::send`], a timeout retried only when `idempotent`.
    async fn send_as(
        &self,
        route: &Route,
        query: Option<String>,
        body: Option<Body>,
        idempotent: bool,
    ) -> Result<Reply, RestError> {
        let sent = self.send_once_as(route, query, body, idempotent).await;
        match route.interaction_token() {
            Some(token) => sent.map_err(|e| e.scrubbed(|text| token.redact(text))),
            None => sent,
        }
    }

    async fn send_once_as(
        &self,
        route: &Route,
        query: Option<String>,
        body: Option<Body>,
        idempotent: bool,
    ) -> Result<Reply, RestError> {
        // Authorised by the interaction token in the path: the bot token
        // is not sent, and the bot's global limit does not apply.
        let by_interaction = route.interaction_token().is_some();
        let name = route.to_string();
        let key = RouteKey {
            route: name.clone(),
            major: route.major().map(|id| id.to_string()).unwrap_or_default(),
        };
        let path = match &query {
            Some(query) => format!("{}?{query}", route.path()),
            None => route.path(),
        };
        let mut waited = Duration::ZERO;
        let mut rate_limited = 0;
        let mut transient = 0;
        loop {
            // Wait for the bucket (and the global limit), within the budget.
            loop {
                // Own statement: the guard must be dropped before awaiting.
                let wait = self
                    .limiter()
                    .acquire_as(&key, Instant::now(), !by_interaction);
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
                method: route.method().as_str(),
                url: format!("{}{path}", self.shared.api_base),
                token: (!by_interaction).then(|| self.shared.token.clone()),
                body: body.clone(),
                timeout: self.timeout,
                max_redirects: 0,
            };
            let task_route = name.clone();
            let result = unblock(move || exchange(&agent, out, &task_route)).await;
            let reply = match result {
                Ok(reply) => reply,
                Err(e) if transient + 1 < TRANSIENT_TRIES && worth_retrying(idempotent, &e) => {
                    transient += 1;
                    log::warn!("{e}; retrying");
                    Timer::after(backoff(transient)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.limiter().update(&key, &reply.headers, reply.received);
            if let Some((date, at)) = &reply.date {
                self.shared.clock.record(date, *at);
            }
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
fn worth_retrying(idempotent: bool, e: &RestError) -> bool {
    match e {
        RestError::Timeout { .. } => idempotent,
        e => is_transient(e),
    }
}

fn backoff(attempt: u32) -> Duration {
    let base = BACKOFF * 2u32.saturating_pow(attempt.saturating_sub(1));
    base + Duration::from_millis(fastrand::u64(0..100))
}

/// The request body of `draft`: JSON, or a multipart form with its files.
fn message_body(
    route: &Route,
    draft: &MessageDraft<'_>,
    nonce: Option<&Nonce>,
    edit: bool,
) -> Result<Body, RestError> {
    let invalid = |detail: String| RestError::InvalidInput {
        route: route.to_string(),
        detail,
    };
    let payload = draft.body(nonce, edit).map_err(invalid)?;
    if draft.files().is_empty() {
        return Ok(Body::json(payload.to_string().into_bytes()));
    }
    let (content_type, segments) = draft.form(&payload).map_err(invalid)?;
    Ok(Body {
        content_type,
        segments: segments.into(),
    })
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
            let route = Route::CreateMessage {
                channel_id: Snowflake::new(1),
            };
            let err = rest
                .send_as(&route, None, Some(Body::json(b"{}".to_vec())), idempotent)
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
