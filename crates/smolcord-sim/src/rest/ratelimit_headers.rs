//! Rate limits as Discord puts them on the wire: which bucket a request
//! counts against, the `X-RateLimit-*` headers on every answer, and the
//! three kinds of 429 (Discord's docs, "Rate Limits": "Exceeding A Rate
//! Limit").
//!
//! | scope | status line and headers | body |
//! |---|---|---|
//! | `user` (a route's bucket) | 429, `Retry-After`, `X-RateLimit-Limit`, `-Remaining: 0`, `-Reset`, `-Reset-After`, `-Bucket`, `-Scope: user` | `{"message": "You are being rate limited.", "retry_after", "global": false}` |
//! | `shared` (a resource's limit) | as `user`, but `-Remaining` is the bucket's real count and `-Scope: shared` | `{"message": "The resource is being rate limited.", "retry_after", "global": false}`; on a channel route also `"code": 20028` and Discord's "write rate limit" message, as bots meet it |
//! | `global` | 429, `Retry-After`, `X-RateLimit-Global: true`, `-Scope: global`, no bucket headers | `{"message": "You are being rate limited.", "retry_after", "global": true}` |
//!
//! Every REST answer also carries `Via: 1.1 google` (added by the server
//! for all of `/api/`): Discord's API sits behind Google's load balancer,
//! and discord.py (2.x and its forks) reads a 429 *without* `Via` as a
//! Cloudflare ban and raises instead of waiting `retry_after`.
//!
//! Bucket ids are opaque 32-hex-digit strings, one per route (method and
//! path with ids elided), the same for every major parameter, as Discord's
//! `X-RateLimit-Bucket` is "non-inclusive of top-level resources".

use crate::model::objects;
use crate::state::ratelimit::Standing;
use crate::wire::http::Response;
use serde_json::json;

/// The header every REST answer carries (see the module doc).
pub(crate) const VIA: (&str, &str) = ("Via", "1.1 google");

/// Which limit a 429 reports (`X-RateLimit-Scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The bot's own per-route limit.
    User,
    /// A limit on the resource shared by everyone (not counted as an
    /// invalid request by Discord).
    Shared,
    /// The bot's global limit.
    Global,
}

impl Scope {
    fn header(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Shared => "shared",
            Scope::Global => "global",
        }
    }
}

/// The bucket a request counts against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RouteBucket {
    /// The opaque `X-RateLimit-Bucket` id (one per route).
    pub bucket: String,
    /// The major parameter (channel, guild or webhook id; empty if none).
    pub major: String,
    /// Whether the major parameter is a channel.
    pub channel: bool,
}

/// The bucket of `method` on `segments` (the path after `/api/v10/`).
/// Top-level resources (`channels`, `guilds`, `webhooks`) are the major
/// parameter; every other id is elided from the route.
pub(crate) fn route_bucket(method: &str, segments: &[&str]) -> RouteBucket {
    let major_kind = match segments {
        [kind @ ("channels" | "guilds" | "webhooks"), id, ..] if is_id(id) => Some(*kind),
        _ => None,
    };
    // A reaction's emoji is a parameter like an id: all emoji share the
    // route's bucket (Discord's `reactions/{emoji}/@me`).
    let route: Vec<&str> = segments
        .iter()
        .enumerate()
        .map(|(at, s)| {
            let emoji = at > 0 && segments[at - 1] == "reactions";
            if is_id(s) || emoji {
                "{id}"
            } else {
                s
            }
        })
        .collect();
    let key = format!("{} /{}", method.to_ascii_uppercase(), route.join("/"));
    RouteBucket {
        bucket: opaque_id(&key),
        major: match major_kind {
            Some(_) => segments[1].to_owned(),
            None => String::new(),
        },
        channel: major_kind == Some("channels"),
    }
}

fn is_id(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit())
}

/// 32 hex digits from two FNV-1a passes: stable across runs (a client may
/// log them), shaped like Discord's bucket hashes.
fn opaque_id(key: &str) -> String {
    let fnv = |seed: u64| {
        key.bytes().fold(seed, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    format!(
        "{:016x}{:016x}",
        fnv(0xcbf2_9ce4_8422_2325),
        fnv(0x6c62_272e_07bb_0142)
    )
}

fn seconds(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64()
}

/// Adds the bucket headers of a served request.
pub(crate) fn with_counts(response: Response, counts: &Standing, bucket: &str) -> Response {
    let reset_after = seconds(counts.reset_after);
    let reset = objects::unix_ms() as f64 / 1000.0 + reset_after;
    response
        .with_header("X-RateLimit-Limit", counts.limit.to_string())
        .with_header("X-RateLimit-Remaining", counts.remaining.to_string())
        .with_header("X-RateLimit-Reset", format!("{reset:.3}"))
        .with_header("X-RateLimit-Reset-After", format!("{reset_after:.3}"))
        .with_header("X-RateLimit-Bucket", bucket)
}

/// A 429 of `scope`. `route` and `counts` give the bucket headers (not
/// sent for a global limit): for `user` the bucket is spent until
/// `retry_after`; for `shared` it keeps its real count.
pub(crate) fn too_many(
    scope: Scope,
    retry_after: f64,
    route: &RouteBucket,
    counts: &Standing,
) -> Response {
    let retry_after = if retry_after.is_finite() {
        retry_after.max(0.0)
    } else {
        0.0
    };
    let mut body = json!({
        "message": "You are being rate limited.",
        "retry_after": retry_after,
        "global": scope == Scope::Global,
    });
    if scope == Scope::Shared {
        if route.channel {
            body["message"] = json!(
                "The write action you are performing on the channel has hit the write rate limit."
            );
            body["code"] = json!(20028);
        } else {
            body["message"] = json!("The resource is being rate limited.");
        }
    }
    let response = Response::json(429, &body)
        .with_header("Retry-After", format!("{}", retry_after.ceil() as u64));
    let response = match scope {
        Scope::Global => response.with_header("X-RateLimit-Global", "true"),
        Scope::User => with_counts(
            response,
            &Standing {
                limit: counts.limit,
                remaining: 0,
                reset_after: std::time::Duration::from_secs_f64(retry_after),
            },
            &route.bucket,
        ),
        Scope::Shared => with_counts(response, counts, &route.bucket),
    };
    response.with_header("X-RateLimit-Scope", scope.header())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bucket_per_route_and_the_major_parameter_apart() {
        let a = route_bucket("POST", &["channels", "11", "messages"]);
        let b = route_bucket("POST", &["channels", "22", "messages"]);
        assert_eq!(a.bucket, b.bucket);
        assert_eq!((a.major.as_str(), b.major.as_str()), ("11", "22"));
        assert!(a.channel);
        let edit = route_bucket("PATCH", &["channels", "11", "messages", "5"]);
        assert_ne!(edit.bucket, a.bucket);
        assert_eq!(
            edit.bucket,
            route_bucket("PATCH", &["channels", "11", "messages", "6"]).bucket
        );
        let me = route_bucket("GET", &["users", "@me"]);
        assert_eq!((me.major.as_str(), me.channel), ("", false));
        assert_eq!(route_bucket("GET", &["guilds", "7", "members"]).major, "7");
        assert_eq!(a.bucket.len(), 32);
        assert!(a.bucket.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}
