//! REST errors: typed, with the route template (never a token, never a
//! query string) so a log line says which call failed and why.

use std::fmt;
use std::time::Duration;

/// Why a REST call failed. `route` is `METHOD /path/{template}`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RestError {
    /// The server answered with a non-success status (after retries, for 5xx).
    Http {
        /// HTTP status.
        status: u16,
        /// Discord's JSON error code (e.g. 50007 "Cannot send messages to this user").
        code: Option<u64>,
        /// Discord's message, or the start of a non-JSON body.
        message: String,
        /// The route template.
        route: String,
    },
    /// 429s went on longer than the retry budget allows.
    RateLimitedTooLong {
        /// The route template.
        route: String,
        /// What the server last asked us to wait.
        retry_after: Duration,
        /// 429 answers received for this call.
        attempts: u32,
    },
    /// No complete answer within the request timeout (on each try, for a
    /// request that is retried after a timeout).
    Timeout {
        /// The route template.
        route: String,
    },
    /// Connection, TLS or protocol failure (after retries).
    Transport {
        /// The route template.
        route: String,
        /// What the HTTP stack said (token-redacted).
        detail: String,
    },
    /// A success answer whose body is not what Discord documents.
    Decode {
        /// The route template.
        route: String,
        /// The JSON error.
        detail: String,
    },
    /// A download (or an API answer) was larger than the cap.
    TooLarge {
        /// The route (`GET host/path` for downloads).
        route: String,
        /// The cap, bytes.
        limit: u64,
    },
    /// An argument that cannot go into a URL (an id that is not a snowflake).
    InvalidInput {
        /// The route template.
        route: String,
        /// What is wrong.
        detail: String,
    },
    /// A download was not requested: its URL, or a redirect it took,
    /// points off the hosts downloads may use
    /// ([`download_allowed`](super::download_allowed)).
    ForeignHost {
        /// The route of the URL that named it (`GET host/path`).
        route: String,
        /// Where it pointed: `scheme://host[:port]` only (a path or query
        /// may carry a signature).
        origin: String,
        /// Redirects followed before it (0: the URL itself).
        redirects: u32,
    },
    /// A download was redirected more than
    /// [`MAX_REDIRECTS`](super::MAX_REDIRECTS) times.
    TooManyRedirects {
        /// The route of the first URL.
        route: String,
        /// The limit.
        limit: u32,
    },
    /// Writing a download to its local file failed.
    LocalIo {
        /// The file.
        path: String,
        /// The I/O error.
        detail: String,
    },
}

impl RestError {
    /// `true` when repeating the same call cannot succeed: a 4xx other than
    /// 429 (missing access, unknown channel, bad request), a body we cannot
    /// decode, an over-size download, a bad argument. 5xx after retries,
    /// rate limiting, timeouts and transport failures may pass.
    pub fn is_permanent(&self) -> bool {
        match self {
            RestError::Http { status, .. } => (400..500).contains(status) && *status != 429,
            RestError::Decode { .. }
            | RestError::TooLarge { .. }
            | RestError::InvalidInput { .. }
            | RestError::ForeignHost { .. }
            | RestError::TooManyRedirects { .. } => true,
            RestError::RateLimitedTooLong { .. }
            | RestError::Timeout { .. }
            | RestError::Transport { .. }
            | RestError::LocalIo { .. } => false,
        }
    }

    /// The error with every copy of `secret` (an interaction token in the
    /// request's path, which a transport error may echo) replaced.
    pub(crate) fn scrubbed(mut self, redact: impl Fn(&str) -> String) -> RestError {
        match &mut self {
            RestError::Http { message: text, .. }
            | RestError::Transport { detail: text, .. }
            | RestError::Decode { detail: text, .. }
            | RestError::InvalidInput { detail: text, .. } => *text = redact(text),
            RestError::RateLimitedTooLong { .. }
            | RestError::Timeout { .. }
            | RestError::TooLarge { .. }
            | RestError::LocalIo { .. }
            // A download's: a CDN host and path, an origin; no token there.
            | RestError::ForeignHost { .. }
            | RestError::TooManyRedirects { .. } => {}
        }
        self
    }

    /// The route the error belongs to (the file, for [`RestError::LocalIo`]).
    pub fn route(&self) -> &str {
        match self {
            RestError::Http { route, .. }
            | RestError::RateLimitedTooLong { route, .. }
            | RestError::Timeout { route }
            | RestError::Transport { route, .. }
            | RestError::Decode { route, .. }
            | RestError::TooLarge { route, .. }
            | RestError::InvalidInput { route, .. }
            | RestError::ForeignHost { route, .. }
            | RestError::TooManyRedirects { route, .. } => route,
            RestError::LocalIo { path, .. } => path,
        }
    }
}

impl fmt::Display for RestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RestError::Http {
                status,
                code: Some(code),
                message,
                route,
            } => write!(f, "{route}: HTTP {status}, Discord error {code}: {message}"),
            RestError::Http {
                status,
                code: None,
                message,
                route,
            } => write!(f, "{route}: HTTP {status}: {message}"),
            RestError::RateLimitedTooLong {
                route,
                retry_after,
                attempts,
            } => write!(
                f,
                "{route}: still rate limited after {attempts} tries (asked to wait {:.1} s more); giving up",
                retry_after.as_secs_f64()
            ),
            RestError::Timeout { route } => write!(f, "{route}: timed out"),
            RestError::Transport { route, detail } => write!(f, "{route}: transport error: {detail}"),
            RestError::Decode { route, detail } => {
                write!(f, "{route}: unexpected response body: {detail}")
            }
            RestError::TooLarge { route, limit } => {
                write!(f, "{route}: larger than the {limit}-byte cap (for a download: max_attachment_bytes)")
            }
            RestError::InvalidInput { route, detail } => write!(f, "{route}: {detail}"),
            RestError::ForeignHost {
                route,
                origin,
                redirects: 0,
            } => write!(
                f,
                "{route}: {origin} is neither Discord's CDN nor the API's own host; not downloaded"
            ),
            RestError::ForeignHost {
                route,
                origin,
                redirects,
            } => write!(
                f,
                "{route}: redirect {redirects} points to {origin}, neither Discord's CDN nor the API's own host; not followed"
            ),
            RestError::TooManyRedirects { route, limit } => {
                write!(f, "{route}: more than {limit} redirects; not followed")
            }
            RestError::LocalIo { path, detail } => write!(f, "writing {path}: {detail}"),
        }
    }
}

impl std::error::Error for RestError {}
