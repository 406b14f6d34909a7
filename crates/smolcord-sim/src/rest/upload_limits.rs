//! Discord's limits on the files of a message create or edit, refused the
//! way Discord refuses them.
//!
//! What Discord documents (discord-api-docs, `developers/reference.mdx`,
//! "Uploading Files", since 2026-09-04, PR #8578): "The file upload size
//! limit applies to each file in a request. The default limit is `20 MiB`
//! for all users", higher with Nitro or a server's boost tier (10 MiB
//! before). Its JSON error codes (`topics/opcodes-and-status-codes.mdx`):
//! 30015 "Maximum number of attachments in a message reached (10)" and
//! 40005 "Request entity too large", which clients get with HTTP 413 for a
//! file over the limit (discord-api-docs#8572, 2026-09).
//!
//! Decided where the docs are silent:
//! - the whole request at most [`MAX_REQUEST_BYTES`] (25 MiB): the docs
//!   said "applies to all files in a request" until 2024 and name no
//!   request limit since; the simulator holds a request in memory, and its
//!   HTTP layer refuses a body over 26 MiB with the same 413 40005;
//! - 11 files or more: HTTP 400 with 30015 (the code the docs list for it,
//!   the one Discord answered when a library sent 11: discord-api-docs#1486),
//!   not 50035 "Invalid Form Body";
//! - the count is checked before the sizes, and on an edit the files
//!   already on the message do not count (Discord's `attachments` field of
//!   an edit lists what is kept; the simulator keeps everything).

#[cfg(test)]
use crate::model::config::DEFAULT_UPLOAD_LIMIT;
use crate::wire::http::Response;
use serde_json::json;

/// Files one message may carry.
pub const MAX_ATTACHMENTS: usize = 10;

/// The most a request with files may carry in all (see the module doc).
pub const MAX_REQUEST_BYTES: usize = 25 * 1024 * 1024;

/// Checks the sizes of a request's files (`sizes`, in bytes) against
/// `limit` per file; `Err` is Discord's answer.
pub(crate) fn check(sizes: &[usize], limit: usize) -> Result<(), Response> {
    if sizes.len() > MAX_ATTACHMENTS {
        return Err(Response::json(
            400,
            &json!({
                "message": format!("Maximum number of attachments in a message reached ({MAX_ATTACHMENTS})"),
                "code": 30015,
            }),
        ));
    }
    let total: usize = sizes.iter().sum();
    if sizes.iter().any(|&n| n > limit) || total > MAX_REQUEST_BYTES {
        return Err(too_large());
    }
    Ok(())
}

/// Discord's 413: `{"message": "Request entity too large", "code": 40005}`.
pub(crate) fn too_large() -> Response {
    Response::json(
        413,
        &json!({"message": "Request entity too large", "code": 40005}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_many_files_or_bytes_are_refused_as_discord_refuses_them() {
        const MIB: usize = 1024 * 1024;
        let code = |r: Result<(), Response>| {
            let r = r.unwrap_err();
            let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            (r.status, body["code"].as_u64().unwrap())
        };
        assert!(check(&[MIB; 10], DEFAULT_UPLOAD_LIMIT).is_ok());
        assert!(check(&[], DEFAULT_UPLOAD_LIMIT).is_ok());
        assert_eq!(code(check(&[1; 11], DEFAULT_UPLOAD_LIMIT)), (400, 30015));
        assert!(check(&[DEFAULT_UPLOAD_LIMIT], DEFAULT_UPLOAD_LIMIT).is_ok());
        assert_eq!(
            code(check(&[DEFAULT_UPLOAD_LIMIT + 1], DEFAULT_UPLOAD_LIMIT)),
            (413, 40005)
        );
        assert_eq!(
            code(check(&[13 * MIB, 13 * MIB], DEFAULT_UPLOAD_LIMIT)),
            (413, 40005)
        );
        assert_eq!(code(check(&[2 * MIB], MIB)), (413, 40005));
        // The count first: 11 files over the size too are refused for the count.
        assert_eq!(
            code(check(&[30 * MIB; 11], DEFAULT_UPLOAD_LIMIT)),
            (400, 30015)
        );
    }
}
