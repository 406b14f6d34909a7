//! Where an attachment download may go, decided before each request: the
//! URL a message carries and every redirect it takes. An attachment URL
//! is data a message brings, so the client must not fetch whatever it (or
//! a server on the way) names: a redirect to `http://169.254.169.254/` or
//! to a host on the bot's own network is refused before it is requested.
//!
//! Allowed: `https` on Discord's CDN hosts ([`CDN_HOSTS`], where Discord's
//! attachment URLs point), or exactly the API's own scheme, host and port
//! (a simulator or a self-hosted server, which serve attachments beside
//! their API). Redirects are followed by hand, at most
//! [`MAX_REDIRECTS`], each hop checked by the same rule.
//!
//! ```
//! use smolcord::rest::download_allowed;
//!
//! let api = "https://discord.com/api/v10";
//! assert!(download_allowed("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1", api).is_ok());
//! let refused = download_allowed("http://169.254.169.254/latest/meta-data", api).unwrap_err();
//! assert_eq!(refused, "http://169.254.169.254");
//! ```

/// Hosts attachments are downloaded from (`https` only), besides the API's own.
pub const CDN_HOSTS: [&str; 2] = ["cdn.discordapp.com", "media.discordapp.net"];

/// Redirects a download follows at most (each one checked).
pub const MAX_REDIRECTS: u32 = 3;

/// Whether `url` may be downloaded by a client of `api_base`: `https` on
/// [`CDN_HOSTS`], or the API's own scheme, host and port. `Err` is the
/// URL's origin as it can be shown (`scheme://host[:port]`, never its path
/// or query, which carry the CDN's signature), or `"(not an http(s) URL)"`.
pub fn download_allowed(url: &str, api_base: &str) -> Result<(), String> {
    let Some((scheme, authority)) = origin(url) else {
        return Err("(not an http(s) URL)".to_owned());
    };
    if scheme == "https" && CDN_HOSTS.contains(&authority.as_str()) {
        return Ok(());
    }
    match origin(api_base) {
        Some(api) if api == (scheme.clone(), authority.clone()) => Ok(()),
        _ => Err(format!("{scheme}://{authority}")),
    }
}

/// `(scheme, host[:port])` of an http(s) URL, lowercased, the default
/// https port dropped; `None` for anything else (user info included:
/// `https://cdn.discordapp.com@evil.example`).
fn origin(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?.to_ascii_lowercase();
    if authority.is_empty() || authority.contains('@') || authority.contains('\\') {
        return None;
    }
    let authority = match (scheme.as_str(), authority.strip_suffix(":443")) {
        ("https", Some(host)) => host.to_owned(),
        _ => match (scheme.as_str(), authority.strip_suffix(":80")) {
            ("http", Some(host)) => host.to_owned(),
            _ => authority,
        },
    };
    Some((scheme, authority))
}

/// The URL a redirect's `Location` names, resolved against the URL that
/// answered (RFC 3986 §5.2 for what servers send: absolute,
/// scheme-relative `//host/path`, absolute path `/path`, or a path relative
/// to the answering one). `None` for an empty or unusable `Location`.
pub(crate) fn resolve_location(base: &str, location: &str) -> Option<String> {
    let location = location.trim();
    if location.is_empty() {
        return None;
    }
    let (scheme, rest) = base.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, base_path) = rest.split_at(authority_end);
    if let Some(after) = location.strip_prefix("//") {
        return Some(format!("{scheme}://{after}"));
    }
    if has_scheme(location) {
        return Some(location.to_owned());
    }
    if location.starts_with('/') {
        return Some(format!("{scheme}://{authority}{location}"));
    }
    // A query or fragment alone, or a relative path: against the base's path.
    let path = base_path.split(['?', '#']).next().unwrap_or("");
    if location.starts_with('?') || location.starts_with('#') {
        let path = if path.is_empty() { "/" } else { path };
        return Some(format!("{scheme}://{authority}{path}{location}"));
    }
    let dir = match path.rfind('/') {
        Some(at) => &path[..=at],
        None => "/",
    };
    Some(format!("{scheme}://{authority}{dir}{location}"))
}

/// Whether `reference` starts with a URI scheme (`ALPHA *( ALPHA / DIGIT
/// / "+" / "-" / "." ) ":"`).
fn has_scheme(reference: &str) -> bool {
    let Some((scheme, _)) = reference.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_discords_cdn_and_the_apis_own_host_are_downloaded() {
        let api = "http://127.0.0.1:4000/api/v10";
        let ok = |url: &str| download_allowed(url, api).is_ok();
        assert!(ok("https://cdn.discordapp.com/attachments/1/2/a.png?ex=1"));
        assert!(ok("https://MEDIA.discordapp.net:443/attachments/1/2/a.png"));
        assert!(ok("http://127.0.0.1:4000/attachments/1/2/a.png"));
        assert!(!ok("http://cdn.discordapp.com/attachments/1/2/a.png"));
        assert!(!ok("https://cdn.discordapp.com.evil.example/a.png"));
        assert!(!ok("https://cdn.discordapp.com@evil.example/a.png"));
        assert!(!ok("https://evil.example\\@cdn.discordapp.com/a.png"));
        assert!(!ok("http://127.0.0.1:4001/attachments/a.png"));
        assert!(!ok("https://127.0.0.1:4000/attachments/a.png"));
        assert!(!ok("file:///etc/passwd"));
        assert!(!ok("http://169.254.169.254/latest/meta-data"));
        assert_eq!(
            download_allowed("https://x.example:8443/a?sig=secret", api).unwrap_err(),
            "https://x.example:8443",
            "the origin only: the query carries the CDN's signature"
        );
        assert_eq!(
            download_allowed("file:///etc/passwd", api).unwrap_err(),
            "(not an http(s) URL)"
        );
        assert!(download_allowed("http://localhost/a", "http://localhost:80/api").is_ok());
    }

    #[test]
    fn a_location_is_resolved_against_the_url_that_answered() {
        let base = "https://cdn.discordapp.com/attachments/1/2/a.png?ex=1&hm=2";
        let resolved = |location: &str| resolve_location(base, location);
        assert_eq!(
            resolved("https://media.discordapp.net/x/b.png").as_deref(),
            Some("https://media.discordapp.net/x/b.png")
        );
        assert_eq!(
            resolved("//evil.example/b.png").as_deref(),
            Some("https://evil.example/b.png")
        );
        assert_eq!(
            resolved("/attachments/3/4/b.png?ex=5").as_deref(),
            Some("https://cdn.discordapp.com/attachments/3/4/b.png?ex=5")
        );
        assert_eq!(
            resolved("b.png").as_deref(),
            Some("https://cdn.discordapp.com/attachments/1/2/b.png")
        );
        assert_eq!(
            resolved("?ex=9").as_deref(),
            Some("https://cdn.discordapp.com/attachments/1/2/a.png?ex=9")
        );
        assert_eq!(
            resolved("HTTP://127.0.0.1:9/x").as_deref(),
            Some("HTTP://127.0.0.1:9/x")
        );
        assert_eq!(resolved("  "), None);
        assert_eq!(
            resolve_location("http://127.0.0.1:4000", "x").as_deref(),
            Some("http://127.0.0.1:4000/x")
        );
    }
}
