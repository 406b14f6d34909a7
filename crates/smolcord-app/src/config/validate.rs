//! Checks serde cannot express: ranges, non-empty argv, URLs (scheme, host, port). Each
//! refusal names the key (and the variable that can also set it).

use std::path::Path;

use super::{Config, ConfigError};

pub(super) fn check(config: &Config, origin: Option<&Path>) -> Result<(), ConfigError> {
    let source = match origin {
        Some(path) => format!("config {}", path.display()),
        None => "config (defaults and environment)".to_owned(),
    };
    let fail =
        |key: &str, what: String| Err(ConfigError::new(format!("{source}: key `{key}`: {what}")));

    let [id, count] = config.shard;
    if let Err(why) = smolcord::shard::ShardRange::new(id, id, count) {
        return fail("shard", format!("`[{id}, {count}]`: {why}"));
    }
    if let Some(url) = &config.gateway_url {
        if !(url.starts_with("ws://") || url.starts_with("wss://")) {
            return fail(
                "gateway_url",
                format!("{url:?} must start with ws:// or wss:// (also settable by SMOLCORD_GATEWAY_URL)"),
            );
        }
        if let Err(why) = check_authority(url) {
            return fail(
                "gateway_url",
                format!("{url:?}: {why} (also settable by SMOLCORD_GATEWAY_URL)"),
            );
        }
    }
    if let Some(url) = &config.identify_queue_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return fail(
                "identify_queue_url",
                format!("{url:?} must be an http:// or https:// URL (also settable by SMOLCORD_IDENTIFY_QUEUE_URL)"),
            );
        }
        if let Err(why) = check_authority(url) {
            return fail(
                "identify_queue_url",
                format!("{url:?}: {why} (also settable by SMOLCORD_IDENTIFY_QUEUE_URL)"),
            );
        }
    }
    let base = &config.api_base;
    if !(base.starts_with("http://") || base.starts_with("https://")) || base.contains('?') {
        return fail(
            "api_base",
            format!("{base:?} must be an http:// or https:// URL without a query (also settable by SMOLCORD_API_BASE)"),
        );
    }
    if let Err(why) = check_authority(base) {
        return fail(
            "api_base",
            format!("{base:?}: {why} (also settable by SMOLCORD_API_BASE)"),
        );
    }
    if let Some(feature) = config.compress.missing_feature() {
        return fail(
            "compress",
            format!("this build has no {feature} support (feature `{feature}`)"),
        );
    }
    for (key, argv) in [
        ("transcribe_cmd", &config.transcribe_cmd),
        ("agent_cmd", &config.agent_cmd),
        ("dm_fallback_cmd", &config.dm_fallback_cmd),
    ] {
        if let Some(argv) = argv {
            if argv.first().is_none_or(|program| program.trim().is_empty()) {
                return fail(key, "the argv array must start with a program name".into());
            }
        }
    }
    // Zero would mean a busy loop, a task that can never finish, or a
    // bridge that can never run anything: refuse rather than guess.
    for (key, value) in [
        ("transcribe_timeout_s", config.transcribe_timeout_s),
        ("agent_timeout_s", config.agent_timeout_s),
        ("dm_fallback_timeout_s", config.dm_fallback_timeout_s),
        ("results_poll_ms", config.results_poll_ms),
        ("max_attachment_bytes", config.max_attachment_bytes),
        ("max_result_bytes", config.max_result_bytes),
        ("agent_concurrency", config.agent_concurrency as u64),
        (
            "safe_mode_after_failures",
            u64::from(config.safe_mode_after_failures),
        ),
        ("journal_capacity", config.journal_capacity as u64),
    ] {
        if value == 0 {
            return fail(key, "must be at least 1".into());
        }
    }
    // Discord's own payloads need a few KiB at the very least; above
    // 256 MiB a small host would run out of memory before the limit helps.
    if let Some(bytes) = config.max_gateway_message_bytes {
        if !(4096..=256 << 20).contains(&bytes) {
            return fail(
                "max_gateway_message_bytes",
                format!("{bytes} is outside 4096..=268435456"),
            );
        }
    }
    if let Err(why) = super::channels::check(&config.channels) {
        return fail("channels", why);
    }
    if config.max_result_bytes > super::MAX_RESULT_BYTES_CAP {
        return fail(
            "max_result_bytes",
            format!(
                "{} is more than {} bytes, the most a delivery worker holds",
                config.max_result_bytes,
                super::MAX_RESULT_BYTES_CAP
            ),
        );
    }
    Ok(())
}

/// What a URL whose scheme was checked needs besides: no white space or
/// control character anywhere (`wss://exa mple.com` would be retried
/// forever), a host, and a port of 1..=65535 if one is given. Refused at
/// start, a typo costs a line of error instead of an endless reconnect.
fn check_authority(url: &str) -> Result<(), String> {
    if let Some(bad) = url.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "contains {bad:?}; a URL has no spaces or control characters"
        ));
    }
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    // user:password@ (an identify queue behind basic auth) is the URL's own business.
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let (addr, after) = v6
            .split_once(']')
            .ok_or("an IPv6 address must end with `]`")?;
        addr.parse::<std::net::Ipv6Addr>()
            .map_err(|_| format!("[{addr}] is not an IPv6 address"))?;
        match after {
            "" => (addr, None),
            _ => (
                addr,
                Some(
                    after
                        .strip_prefix(':')
                        .ok_or("expected `:PORT` after `]`")?,
                ),
            ),
        }
    } else {
        match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err("has no host".into());
    }
    if !host_port.starts_with('[')
        && !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Err(format!("{host:?} is not a host name"));
    }
    if let Some(port) = port {
        match port.parse::<u16>() {
            _ if !port.bytes().all(|b| b.is_ascii_digit()) => {
                return Err(format!("{port:?} is not a port (1..=65535)"))
            }
            Ok(port) if port > 0 => {}
            _ => return Err(format!("{port:?} is not a port (1..=65535)")),
        }
    }
    Ok(())
}
