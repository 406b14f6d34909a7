//! Building the gateway connect URL.

/// `base` plus `?v=10&encoding=json` (and `&compress=zlib-stream`), keeping
/// any path the base has (the resume URL) and adding `/` when it has none.
pub fn gateway_connect_url(base: &str, compress: bool) -> String {
    let compress = if compress {
        "&compress=zlib-stream"
    } else {
        ""
    };
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
            gateway_connect_url("wss://gateway.discord.gg", false),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            gateway_connect_url("wss://gateway.discord.gg/", true),
            "wss://gateway.discord.gg/?v=10&encoding=json&compress=zlib-stream"
        );
        assert_eq!(
            gateway_connect_url("ws://127.0.0.1:9/resume", false),
            "ws://127.0.0.1:9/resume?v=10&encoding=json"
        );
        assert_eq!(
            gateway_connect_url("ws://h/x?a=1", false),
            "ws://h/x?a=1&v=10&encoding=json"
        );
    }
}
