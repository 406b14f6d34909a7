//! Fault injection: gateway misbehaviour (applied to every live connection)
//! and REST failures (for the next N matching requests), with their JSON
//! forms for the control API.

use serde_json::Value;
use std::time::Duration;

/// A gateway fault. [`Simulator::fault`](crate::Simulator::fault) applies it
/// to every live connection at that moment (connections opened later are
/// not affected) and returns how many it reached.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Fault {
    /// Withhold the ACKs of the next n heartbeats (a zombie connection).
    DropAcks(u32),
    /// Close with this code. 4007, 4009 and the fatal codes end the
    /// session too; others (1000/1001 included) leave it resumable, as
    /// `CloseCode::action` classifies them.
    Close(u16),
    /// Drop TCP without a close frame (the session stays resumable).
    DropTcp,
    /// Send op 7 Reconnect (the client should close and resume).
    Reconnect,
    /// Send op 9 with this `d`. `false` also ends the session; either way
    /// the connection must Identify or Resume again.
    InvalidSession(bool),
    /// Send op 1: ask the client for a heartbeat now.
    RequestHeartbeat,
    /// Stop reading from the socket for this long: heartbeats pile up
    /// unanswered in the kernel buffer. The 4009 clock pauses meanwhile, and
    /// beats are timed when finally read, so the stall shows in the gaps.
    Stall(Duration),
    /// Send a frame that is not valid JSON.
    Malformed,
    /// Send a frame of `SimConfig::oversized_frame_bytes` (an unsequenced
    /// `SIM_OVERSIZED` dispatch).
    Oversized,
    /// Hold back every later server frame by this long (zero clears it).
    Delay(Duration),
    /// Send this many DMs (MESSAGE_CREATE from the user "flooder") as fast
    /// as the socket takes them. Each is numbered and kept for replay like
    /// any dispatch, but made only when the socket has room, so a flood of
    /// millions costs the simulator no memory. Dispatches injected while a
    /// flood is under way are sent after it (their `s` then looks old to
    /// the client): wait for the flood to end first.
    Flood(u64),
    /// Send this text frame as it is (a frame the simulator would never
    /// make: an absurd `s`, a field of the wrong type, ...).
    Raw(String),
    /// Send this many WebSocket pings as fast as the socket takes them
    /// (with [`Fault::Stall`]: a peer that floods us and stops reading).
    PingFlood(u64),
    /// Send one text message of `total` bytes in WebSocket fragments of
    /// `fragment` bytes (a client must refuse it at its size limit).
    Fragmented {
        /// The message's size.
        total: usize,
        /// Bytes per fragment.
        fragment: usize,
    },
}

/// The user id the [`Fault::Flood`] messages come from.
pub const FLOOD_USER_ID: u64 = 990_000_000_000_000_001;

/// What a faulty REST answer looks like.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RestFaultKind {
    /// 429 with `retry_after` seconds, as Discord sends it: `Retry-After`,
    /// `Via`, the JSON body `{"message", "retry_after", "global"}`; not
    /// `global`: the route's bucket headers, `X-RateLimit-Remaining: 0`,
    /// `X-RateLimit-Scope: user`; `global`: `X-RateLimit-Global: true`,
    /// `X-RateLimit-Scope: global` and no bucket headers.
    RateLimited {
        /// Seconds to wait.
        retry_after: f64,
        /// A global (not per-route) limit.
        global: bool,
    },
    /// 429 for a limit on the resource (`X-RateLimit-Scope: shared`): the
    /// route's bucket headers keep their real counts (a client cannot see
    /// it coming), and on a channel route the body carries code 20028.
    SharedRateLimited {
        /// Seconds to wait.
        retry_after: f64,
    },
    /// 403 `{"code": 50007, "message": "Cannot send messages to this user"}`.
    Forbidden,
    /// A 5xx status with a JSON error body.
    ServerError(u16),
    /// 401 `{"code": 0, "message": "401: Unauthorized"}`, what Discord
    /// answers for a bad token: REST refuses while the gateway accepts the
    /// token (or closes with whatever `Fault::Close` says), as a gateway
    /// that never sends 4004 would.
    Unauthorized,
    /// Handle the request as usual but hold the answer back this long (a
    /// hung endpoint; a client that gives up first never learns that its
    /// request took effect).
    Delay(Duration),
    /// Refuse, with this status, the file uploads `scope` names; requests
    /// without a file pass untouched (and do not use up the count), as a
    /// server implementation that mishandles some multipart forms would.
    RefuseUpload {
        /// The status answered (400..=599).
        status: u16,
        /// Which uploads.
        scope: UploadScope,
    },
}

/// Which uploads a [`RestFaultKind::RefuseUpload`] refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UploadScope {
    /// Those whose `payload_json` carries the `attachments` array (the
    /// metadata Discord documents as optional).
    AttachmentsField,
    /// Edits (`PATCH`) that carry a file.
    Edits,
    /// Every request that carries a file.
    Any,
}

/// What a request uploads: what [`RestFaultKind::RefuseUpload`] looks at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UploadShape {
    /// It carries at least one file.
    pub files: bool,
    /// Its JSON has an `attachments` array.
    pub attachments_field: bool,
    /// It is a `PATCH`.
    pub edit: bool,
}

impl RestFaultKind {
    /// Whether this fault applies to a request of `shape` (only upload
    /// refusals look at it).
    pub(crate) fn applies_to(&self, shape: UploadShape) -> bool {
        match self {
            RestFaultKind::RefuseUpload { scope, .. } => {
                shape.files
                    && match scope {
                        UploadScope::AttachmentsField => shape.attachments_field,
                        UploadScope::Edits => shape.edit,
                        UploadScope::Any => true,
                    }
            }
            _ => true,
        }
    }
}

/// A REST fault for the next `count` requests whose path starts with
/// `path_prefix` (all `/api/...` requests when `None`).
#[derive(Clone, Debug, PartialEq)]
pub struct RestFault {
    /// The answer.
    pub kind: RestFaultKind,
    /// How many requests get it.
    pub count: u32,
    /// Only requests under this path (e.g. `/api/v10/channels`); with a
    /// method before it (`GET /api/v10/channels/1/messages`), only
    /// requests of that method (a history read, not a post).
    pub path_prefix: Option<String>,
}

impl RestFault {
    /// `count` 429s with `retry_after` seconds on every route.
    pub fn rate_limited(count: u32, retry_after: f64) -> RestFault {
        RestFault {
            kind: RestFaultKind::RateLimited {
                retry_after,
                global: false,
            },
            count,
            path_prefix: None,
        }
    }

    /// `count` global 429s (`X-RateLimit-Scope: global`).
    pub fn global_rate_limited(count: u32, retry_after: f64) -> RestFault {
        RestFault {
            kind: RestFaultKind::RateLimited {
                retry_after,
                global: true,
            },
            count,
            path_prefix: None,
        }
    }

    /// `count` shared-scope 429s (`X-RateLimit-Scope: shared`).
    pub fn shared_rate_limited(count: u32, retry_after: f64) -> RestFault {
        RestFault {
            kind: RestFaultKind::SharedRateLimited { retry_after },
            count,
            path_prefix: None,
        }
    }

    /// Restricts the fault to paths starting with `prefix`.
    pub fn on(mut self, prefix: &str) -> RestFault {
        self.path_prefix = Some(prefix.to_owned());
        self
    }
}

fn field<'a>(body: &'a Value, name: &str) -> Result<&'a Value, String> {
    body.get(name)
        .ok_or_else(|| format!("missing field `{name}`"))
}

fn uint(body: &Value, name: &str) -> Result<u64, String> {
    field(body, name)?
        .as_u64()
        .ok_or_else(|| format!("field `{name}` must be a non-negative integer"))
}

fn millis(body: &Value) -> Result<Duration, String> {
    uint(body, "ms").map(Duration::from_millis)
}

fn kind(body: &Value) -> Result<&str, String> {
    if !body.is_object() {
        return Err("the body must be a JSON object".to_owned());
    }
    field(body, "kind")?
        .as_str()
        .ok_or_else(|| "field `kind` must be a string".to_owned())
}

impl Fault {
    /// Reads the control API form, e.g. `{"kind":"drop_acks","n":2}`.
    pub fn from_json(body: &Value) -> Result<Fault, String> {
        Ok(match kind(body)? {
            "drop_acks" => Fault::DropAcks(
                u32::try_from(uint(body, "n")?).map_err(|_| "field `n` is too large")?,
            ),
            "close" => Fault::Close(
                u16::try_from(uint(body, "code")?)
                    .ok()
                    .filter(|c| (1000..5000).contains(c))
                    .ok_or("field `code` must be a close code in 1000..=4999")?,
            ),
            "drop_tcp" => Fault::DropTcp,
            "reconnect" => Fault::Reconnect,
            "invalid_session" => Fault::InvalidSession(
                field(body, "resumable")?
                    .as_bool()
                    .ok_or("field `resumable` must be true or false")?,
            ),
            "request_heartbeat" => Fault::RequestHeartbeat,
            "stall" => Fault::Stall(millis(body)?),
            "malformed" => Fault::Malformed,
            "oversized" => Fault::Oversized,
            "delay" => Fault::Delay(millis(body)?),
            "flood" => Fault::Flood(uint(body, "n")?),
            "ping_flood" => Fault::PingFlood(uint(body, "n")?),
            "raw" => Fault::Raw(
                field(body, "text")?
                    .as_str()
                    .ok_or("field `text` must be a string")?
                    .to_owned(),
            ),
            "fragmented" => Fault::Fragmented {
                total: usize::try_from(uint(body, "total")?).map_err(|_| "`total` is too large")?,
                fragment: usize::try_from(uint(body, "fragment")?)
                    .ok()
                    .filter(|&f| f > 0)
                    .ok_or("`fragment` must be a positive size")?,
            },
            other => {
                return Err(format!(
                    "unknown fault kind `{other}` (expected drop_acks, close, drop_tcp, reconnect, \
                     invalid_session, request_heartbeat, stall, malformed, oversized, delay, flood, ping_flood, raw or fragmented)"
                ))
            }
        })
    }
}

/// `{"kind": "rate_limited", "retry_after": 1.0, "scope": "user" |
/// "shared" | "global"}`; `"global": true` is the older spelling of the
/// global scope.
fn rate_limited(body: &Value) -> Result<RestFaultKind, String> {
    let retry_after = match body.get("retry_after") {
        None => 1.0,
        Some(v) => v
            .as_f64()
            .filter(|s| s.is_finite() && (0.0..=86_400.0).contains(s))
            .ok_or("field `retry_after` must be a number of seconds from 0 to 86400")?,
    };
    let global = match body.get("global") {
        None => false,
        Some(v) => v.as_bool().ok_or("field `global` must be true or false")?,
    };
    let scope = match body.get("scope") {
        None => None,
        Some(v) => Some(v.as_str().ok_or("field `scope` must be a string")?),
    };
    Ok(match (scope, global) {
        (None | Some("user"), false) => RestFaultKind::RateLimited {
            retry_after,
            global: false,
        },
        (None | Some("global"), _) => RestFaultKind::RateLimited {
            retry_after,
            global: true,
        },
        (Some("shared"), false) => RestFaultKind::SharedRateLimited { retry_after },
        (Some(other @ ("user" | "shared")), true) => {
            return Err(format!(
                "`\"global\": true` contradicts `\"scope\": \"{other}\"`"
            ))
        }
        (Some(other), _) => {
            return Err(format!(
                "unknown scope `{other}` (expected user, shared or global)"
            ))
        }
    })
}

impl RestFault {
    /// Reads the control API form, e.g.
    /// `{"kind":"rate_limited","count":1,"retry_after":0.5}`.
    pub fn from_json(body: &Value) -> Result<RestFault, String> {
        let kind = match kind(body)? {
            "rate_limited" => rate_limited(body)?,
            "forbidden" => RestFaultKind::Forbidden,
            "unauthorized" => RestFaultKind::Unauthorized,
            "delay" => RestFaultKind::Delay(millis(body)?),
            "server_error" => RestFaultKind::ServerError(match body.get("status") {
                None => 500,
                Some(_) => u16::try_from(uint(body, "status")?)
                    .ok()
                    .filter(|s| (500..600).contains(s))
                    .ok_or("field `status` must be a 5xx status")?,
            }),
            "refuse_upload" => RestFaultKind::RefuseUpload {
                status: match body.get("status") {
                    None => 500,
                    Some(_) => u16::try_from(uint(body, "status")?)
                        .ok()
                        .filter(|s| (400..600).contains(s))
                        .ok_or("field `status` must be a 4xx or 5xx status")?,
                },
                scope: match body.get("scope").map(Value::as_str) {
                    None | Some(Some("attachments_field")) => UploadScope::AttachmentsField,
                    Some(Some("edits")) => UploadScope::Edits,
                    Some(Some("any")) => UploadScope::Any,
                    Some(_) => {
                        return Err(
                            "field `scope` must be \"attachments_field\", \"edits\" or \"any\""
                                .to_owned(),
                        )
                    }
                },
            },
            other => {
                return Err(format!(
                    "unknown REST fault kind `{other}` (expected rate_limited, forbidden, server_error, unauthorized, delay or refuse_upload)"
                ))
            }
        };
        let count = match body.get("count") {
            None => 1,
            Some(_) => {
                u32::try_from(uint(body, "count")?).map_err(|_| "field `count` is too large")?
            }
        };
        let path_prefix = match body.get("path_prefix") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_str()
                    .ok_or("field `path_prefix` must be a string")?
                    .to_owned(),
            ),
        };
        Ok(RestFault {
            kind,
            count,
            path_prefix,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_fault_kind_parses() {
        let cases = [
            (json!({"kind":"drop_acks","n":2}), Fault::DropAcks(2)),
            (json!({"kind":"close","code":4000}), Fault::Close(4000)),
            (json!({"kind":"drop_tcp"}), Fault::DropTcp),
            (json!({"kind":"reconnect"}), Fault::Reconnect),
            (
                json!({"kind":"invalid_session","resumable":true}),
                Fault::InvalidSession(true),
            ),
            (json!({"kind":"request_heartbeat"}), Fault::RequestHeartbeat),
            (
                json!({"kind":"stall","ms":250}),
                Fault::Stall(Duration::from_millis(250)),
            ),
            (json!({"kind":"malformed"}), Fault::Malformed),
            (json!({"kind":"oversized"}), Fault::Oversized),
            (
                json!({"kind":"delay","ms":5}),
                Fault::Delay(Duration::from_millis(5)),
            ),
        ];
        for (body, fault) in cases {
            assert_eq!(Fault::from_json(&body).unwrap(), fault);
        }
    }

    #[test]
    fn bad_faults_name_the_problem() {
        let err = |v: Value| Fault::from_json(&v).unwrap_err();
        assert!(err(json!({"kind":"explode"})).contains("unknown fault kind `explode`"));
        assert!(err(json!({"kind":"drop_acks"})).contains("missing field `n`"));
        assert!(err(json!({"kind":"close","code":99})).contains("`code`"));
        assert!(err(json!({})).contains("missing field `kind`"));
        assert!(err(json!([1])).contains("JSON object"));
    }

    #[test]
    fn rest_faults_parse_with_defaults() {
        let fault = RestFault::from_json(&json!({"kind":"rate_limited"})).unwrap();
        assert_eq!(fault, RestFault::rate_limited(1, 1.0));
        let scoped = |scope: &str| {
            RestFault::from_json(&json!({"kind":"rate_limited","scope":scope,"retry_after":0.5}))
        };
        assert_eq!(scoped("user").unwrap(), RestFault::rate_limited(1, 0.5));
        assert_eq!(
            scoped("global").unwrap(),
            RestFault::global_rate_limited(1, 0.5)
        );
        assert_eq!(
            scoped("shared").unwrap(),
            RestFault::shared_rate_limited(1, 0.5)
        );
        assert!(scoped("galaxy").unwrap_err().contains("galaxy"));
        assert!(RestFault::from_json(
            &json!({"kind":"rate_limited","scope":"shared","global":true})
        )
        .unwrap_err()
        .contains("contradicts"));
        assert!(
            RestFault::from_json(&json!({"kind":"rate_limited","retry_after":1e9}))
                .unwrap_err()
                .contains("86400")
        );
        let fault = RestFault::from_json(
            &json!({"kind":"server_error","status":502,"count":2,"path_prefix":"/api/v10/channels"}),
        )
        .unwrap();
        assert_eq!(fault.kind, RestFaultKind::ServerError(502));
        assert_eq!(fault.count, 2);
        assert!(RestFault::from_json(&json!({"kind":"server_error","status":404})).is_err());
        let fault = RestFault::from_json(&json!({"kind":"unauthorized","count":9})).unwrap();
        assert_eq!((fault.kind, fault.count), (RestFaultKind::Unauthorized, 9));
        let fault = RestFault::from_json(&json!({"kind":"delay","ms":1500})).unwrap();
        assert_eq!(
            fault.kind,
            RestFaultKind::Delay(Duration::from_millis(1500))
        );
        assert!(RestFault::from_json(&json!({"kind":"delay"}))
            .unwrap_err()
            .contains("`ms`"));
        let fault =
            RestFault::from_json(&json!({"kind":"refuse_upload","status":400,"scope":"edits"}))
                .unwrap();
        assert_eq!(
            fault.kind,
            RestFaultKind::RefuseUpload {
                status: 400,
                scope: UploadScope::Edits
            }
        );
        let edit = UploadShape {
            files: true,
            edit: true,
            ..UploadShape::default()
        };
        assert!(fault.kind.applies_to(edit));
        assert!(!fault.kind.applies_to(UploadShape {
            edit: true,
            ..UploadShape::default()
        }));
        assert!(
            RestFault::from_json(&json!({"kind":"refuse_upload","scope":"all"}))
                .unwrap_err()
                .contains("`scope`")
        );
        assert!(RestFault::from_json(&json!({"kind":"teapot"}))
            .unwrap_err()
            .contains("teapot"));
    }
}
