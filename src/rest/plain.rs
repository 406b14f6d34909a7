//! A plain `GET` outside Discord's API (no token, no rate limits): for
//! services beside the bot, such as an identify queue.

use super::client::USER_AGENT;
use std::time::Duration;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::Agent;

/// The most of a plain answer's body read (then dropped): only the status
/// matters.
const MAX_BODY: u64 = 4096;

/// `GET url` within `timeout`; the HTTP status, or what went wrong.
pub async fn plain_get(url: String, timeout: Duration) -> Result<u16, String> {
    crate::offload::unblock(move || {
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(USER_AGENT)
            .timeout_global(Some(timeout))
            .build();
        // The shared TLS connector: an https queue is trusted as the
        // gateway is (Mozilla's roots plus the operator's extra CA).
        let agent = Agent::with_parts(config, super::tls::connector(), DefaultResolver::default());
        // ureq blocks; this closure runs on the blocking pool.
        let mut response = agent
            .get(url.as_str())
            .call()
            .map_err(|err| format!("could not be reached: {err}"))?;
        let _ = response
            .body_mut()
            .with_config()
            .limit(MAX_BODY)
            .read_to_vec();
        Ok(response.status().as_u16())
    })
    .await
}
