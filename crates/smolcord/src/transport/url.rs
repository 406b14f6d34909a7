//! Building the gateway connect URL.

use super::Compression;

/// `base` plus `?v=10&encoding=json` (and `&compress=zlib-stream` or
/// `zstd-stream`), keeping any path the base has (the resume URL) and adding
/// `/` when it has none.
pub fn gateway_connect_url(base: &str, compress: Compression) -> String {
    let compress = compress
        .query_value()
        .map(|value| format!("&compress={value}"))
        .unwrap_or_default();
    let params = format!("v={}&encoding=json{compress}", crate::protocol::API_VERSION);
    if base.contains('?') {
        return format!("{base}&{params}");
    }
    let after_scheme = base.split_once("://").map_or(base, |(_, rest)| rest);
    let slash = if after_scheme.contains('/') { "" } else { "/" };
    format!("{base}{slash}?{params}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_version_encoding_and_compression() {
        assert_eq!(
            gateway_connect_url("wss://gateway.discord.gg", Compression::None),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            gateway_connect_url("wss://gateway.discord.gg/", Compression::Zlib),
            "wss://gateway.discord.gg/?v=10&encoding=json&compress=zlib-stream"
        );
        assert_eq!(
            gateway_connect_url("wss://gateway.discord.gg/", Compression::Zstd),
            "wss://gateway.discord.gg/?v=10&encoding=json&compress=zstd-stream"
        );
        assert_eq!(
            gateway_connect_url("ws://127.0.0.1:9/resume", Compression::None),
            "ws://127.0.0.1:9/resume?v=10&encoding=json"
        );
        assert_eq!(
            gateway_connect_url("ws://h/x?a=1", Compression::None),
            "ws://h/x?a=1&v=10&encoding=json"
        );
    }
}
