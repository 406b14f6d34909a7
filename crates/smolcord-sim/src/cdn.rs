//! The CDN misbehaving, and big files without carrying them: a redirect to
//! another host (a download client must check where a redirect leads
//! before it follows it), a bandwidth (a slow CDN, for memory and heartbeat
//! measurements while a download streams), and attachments of N generated
//! bytes (a 25 MiB file named by its size, where the control API's body
//! limit would not carry it in base64).
//!
//! Set from Rust with [`Simulator::cdn_fault`](crate::Simulator::cdn_fault)
//! or over HTTP: `POST /control/cdn` and `POST /control/dm-file` (the
//! crate's control API list).

use std::time::Duration;

use serde_json::{json, Value};

use super::control::{bad, id_field, str_field};
use super::http::{Request, Response};
use super::inject::SimFile;
use super::state::Shared;

/// The largest generated attachment: far over Discord's own limits (500 MiB
/// with Nitro), so any client limit can be tested, and still a bound on
/// what one control call makes the simulator hold.
pub const MAX_GENERATED_BYTES: u64 = 512 * 1024 * 1024;

/// How the simulator's CDN (`/attachments/`) misbehaves.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CdnFault {
    /// The next `count` attachment requests are answered `302 Found` with
    /// `Location: to` (Discord's CDN could send a client anywhere).
    Redirect {
        /// Where to: any URL (the client decides whether to follow it).
        to: String,
        /// How many requests get it.
        count: u32,
    },
    /// Attachment bodies go out at most this fast (`None`: at full speed),
    /// in tenths of a second's share.
    Bandwidth {
        /// Bytes a second.
        bytes_per_sec: Option<u64>,
    },
}

/// The CDN's settings, kept in the simulator's state.
#[derive(Debug, Default)]
pub(crate) struct Cdn {
    redirect: Option<(String, u32)>,
    bytes_per_sec: Option<u64>,
}

impl Cdn {
    pub(crate) fn apply(&mut self, fault: CdnFault) {
        match fault {
            CdnFault::Redirect { to, count } => {
                self.redirect = (count > 0).then_some((to, count));
            }
            CdnFault::Bandwidth { bytes_per_sec } => {
                self.bytes_per_sec = bytes_per_sec.filter(|&b| b > 0);
            }
        }
    }

    /// The redirect this request gets, if one is pending (counted down).
    fn take_redirect(&mut self) -> Option<String> {
        let (to, left) = self.redirect.as_mut()?;
        let to = to.clone();
        *left -= 1;
        if *left == 0 {
            self.redirect = None;
        }
        Some(to)
    }
}

/// Answers `GET /attachments/…`: the pending redirect, or the file (see
/// [`super::rest::attachment`]); the pace to send it at.
pub(crate) fn attachment(shared: &Shared, request: &Request) -> (Response, Option<u64>) {
    let (redirect, pace) = {
        let mut state = shared.lock();
        (state.cdn.take_redirect(), state.cdn.bytes_per_sec)
    };
    match redirect {
        Some(to) => {
            log::info!("sim: CDN request {} redirected to {to}", request.path);
            let mut response = Response::bytes(302, "text/plain", Vec::new());
            response.headers.push(("Location".into(), to));
            (response, None)
        }
        None => (super::rest::attachment(shared, request), pace),
    }
}

/// `n` bytes of a fixed pattern (`i % 251`: no run repeats at a power of
/// two, so a client that drops or repeats a block is caught).
pub fn generated_bytes(n: usize) -> Vec<u8> {
    // By whole periods: 25 MiB byte by byte holds the simulator's loop
    // (and its heartbeat ACKs) for most of a second in a debug build.
    let period: Vec<u8> = (0..251u8).collect();
    let mut bytes = Vec::with_capacity(n);
    while bytes.len() < n {
        let take = period.len().min(n - bytes.len());
        bytes.extend_from_slice(&period[..take]);
    }
    bytes
}

/// `POST /control/cdn`: `{"redirect_to": URL, "count": 1}` and/or
/// `{"bytes_per_sec": N}` (0 or null: full speed).
pub(crate) fn control(shared: &Shared, body: &Value) -> Result<Response, Response> {
    let mut applied = Vec::new();
    if let Some(to) = body.get("redirect_to").filter(|v| !v.is_null()) {
        let to = to
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| bad("field `redirect_to` must be a URL"))?;
        let count = match body.get("count") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad("field `count` must be a whole number"))?,
        };
        applied.push(CdnFault::Redirect {
            to: to.to_owned(),
            count,
        });
    }
    if let Some(rate) = body.get("bytes_per_sec") {
        let bytes_per_sec = match rate {
            Value::Null => None,
            v => Some(
                v.as_u64()
                    .ok_or_else(|| bad("field `bytes_per_sec` must be a whole number or null"))?,
            ),
        };
        applied.push(CdnFault::Bandwidth { bytes_per_sec });
    }
    if applied.is_empty() {
        return Err(bad("give `redirect_to` (and `count`) or `bytes_per_sec`"));
    }
    let mut state = shared.lock();
    for fault in applied {
        state.cdn.apply(fault);
    }
    Ok(Response::json(
        200,
        &json!({
            "redirect_to": state.cdn.redirect.as_ref().map(|(to, _)| to.clone()),
            "redirects_left": state.cdn.redirect.as_ref().map_or(0, |(_, n)| *n),
            "bytes_per_sec": state.cdn.bytes_per_sec,
        }),
    ))
}

/// `POST /control/dm-file`: `{"author_id", "author_name", "content",
/// "filename", "content_type", "size"}`: a DM with one attachment of
/// `size` generated bytes ([`generated_bytes`]) →
/// `{"message_id", "channel_id"}`.
pub(crate) fn dm_file(shared: &Shared, body: &Value) -> Result<Response, Response> {
    let author = id_field(body, "author_id")?;
    let name = str_field(body, "author_name", "user")?;
    let content = str_field(body, "content", "")?;
    let filename = str_field(body, "filename", "file.bin")?;
    let content_type = str_field(body, "content_type", "application/octet-stream")?;
    let size = body
        .get("size")
        .and_then(Value::as_u64)
        .filter(|&n| n <= MAX_GENERATED_BYTES)
        .ok_or_else(|| {
            bad(format!(
                "field `size` must be a number of bytes, at most {MAX_GENERATED_BYTES}"
            ))
        })?;
    let file = SimFile::new(filename, content_type, generated_bytes(size as usize));
    let (message_id, channel_id) = shared.send_dm_with_files(author, name, content, vec![file]);
    Ok(Response::json(
        200,
        &json!({"message_id": message_id, "channel_id": channel_id}),
    ))
}

/// The pause between two tenths of a paced body.
pub(crate) const PACE_TICK: Duration = Duration::from_millis(100);
