//! `GET /attachments/…` as the CDN's faults have it (`state/cdn.rs`): a
//! pending redirect instead of the file, and the pace to send it at.

use super::routes;
use crate::state::shared::Shared;
use crate::wire::http::{Request, Response};

/// The answer to an attachment request and the pace to send it at (bytes
/// a second; `None`: at once).
pub(crate) fn attachment(shared: &Shared, request: &Request) -> (Response, Option<u64>) {
    let (redirect, pace) = {
        let mut state = shared.lock();
        (state.cdn.take_redirect(), state.cdn.bytes_per_sec())
    };
    match redirect {
        Some(to) => {
            log::info!("sim: CDN request {} redirected to {to}", request.path);
            let mut response = Response::bytes(302, "text/plain", Vec::new());
            response.headers.push(("Location".into(), to));
            (response, None)
        }
        None => (routes::attachment(shared, request), pace),
    }
}
