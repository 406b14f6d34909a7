//! wire: a readable trace of every gateway frame, for a person learning the
//! protocol or debugging a gateway. Off unless asked for:
//!
//! ```text
//! RUST_LOG=info,smolcord::wire=trace smolcord run        # the client's side
//! RUST_LOG=info,smolcord::sim::wire=trace smolcord sim   # the simulator's side
//! ```
//!
//! One line per frame, with the connection, the time since it opened, the
//! direction (`->` sent, `<-` received, from the tracing side), the opcode
//! and event, the size, and the JSON:
//!
//! ```text
//! conn 1 +0.000s <- op 10 Hello (77 B) {"op":10,"d":{"heartbeat_interval":41250}}
//! conn 1 +0.002s -> op 2 Identify (283 B) {"op":2,"d":{"token":"<redacted>",...}}
//! ```
//!
//! Secrets never reach the line: the token (Identify and Resume `d.token`),
//! the session id (Resume and READY `d.session_id`), an interaction's
//! token (INTERACTION_CREATE `d.token`), and, as a second line
//! of defence, the known token wherever it appears. Frames over
//! [`ABBREVIATE_OVER`] bytes show their first [`HEAD_BYTES`] only.
//!
//! Nothing is formatted unless the target is enabled at trace level, so the
//! trace costs one level check per frame when it is off.

use crate::protocol::{Frame, OpCode};
use crate::token::Token;
use serde::Deserialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The client's log target.
pub const CLIENT_TARGET: &str = "smolcord::wire";
/// The simulator's log target.
pub const SERVER_TARGET: &str = "smolcord::sim::wire";
/// Frames larger than this (bytes of JSON) are abbreviated: a READY with
/// many guilds runs to megabytes, and a trace line should stay readable.
pub const ABBREVIATE_OVER: usize = 1024;
/// What an abbreviated frame keeps of its JSON.
pub const HEAD_BYTES: usize = 256;
/// What replaces a secret.
pub const REDACTED: &str = "<redacted>";

/// Client connection numbers, per process.
static NEXT_CLIENT_CONN: AtomicU64 = AtomicU64::new(1);

/// Which way a frame went, seen from the side that traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Direction {
    /// Received (`<-`).
    In,
    /// Sent (`->`).
    Out,
}

impl Direction {
    fn arrow(self) -> &'static str {
        match self {
            Direction::In => "<-",
            Direction::Out => "->",
        }
    }
}

/// The trace of one connection: its number, when it opened, the log target,
/// and the token to keep out of the lines.
#[derive(Clone)]
pub struct WireTrace {
    target: &'static str,
    conn: u64,
    opened: Instant,
    token: Option<Token>,
}

impl std::fmt::Debug for WireTrace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireTrace")
            .field("target", &self.target)
            .field("conn", &self.conn)
            .finish_non_exhaustive()
    }
}

impl WireTrace {
    /// The client's trace of a new connection (target `smolcord::wire`;
    /// connections numbered from 1 in each process), opened now.
    pub fn client(token: Option<Token>) -> WireTrace {
        WireTrace {
            target: CLIENT_TARGET,
            conn: NEXT_CLIENT_CONN.fetch_add(1, Ordering::Relaxed),
            opened: Instant::now(),
            token,
        }
    }

    /// The simulator's trace of its connection `conn` (target
    /// `smolcord::sim::wire`), opened now.
    pub fn server(conn: u64, token: Option<Token>) -> WireTrace {
        WireTrace {
            target: SERVER_TARGET,
            conn,
            opened: Instant::now(),
            token,
        }
    }

    /// The connection's number in the trace.
    pub fn conn(&self) -> u64 {
        self.conn
    }

    /// Whether lines are wanted at all.
    pub fn enabled(&self) -> bool {
        log::log_enabled!(target: self.target, log::Level::Trace)
    }

    /// A gateway message (JSON text, after any inflation) arrived.
    pub fn received(&self, text: &str) {
        self.frame(Direction::In, text);
    }

    /// A gateway message is being sent.
    pub fn sent(&self, text: &str) {
        self.frame(Direction::Out, text);
    }

    /// A close frame went `direction` with `code`, or (`None`) the
    /// connection ended without one.
    pub fn closed(&self, direction: Direction, code: Option<u16>) {
        if self.enabled() {
            let line = format_close(self.conn, direction, self.opened.elapsed(), code);
            log::trace!(target: self.target, "{line}");
        }
    }

    /// The connection opened to (or, on the server, for) `url`.
    pub fn connected(&self, url: &str) {
        if self.enabled() {
            let url = self.redact_known(url);
            log::trace!(target: self.target, "conn {} +0.000s open {url}", self.conn);
        }
    }

    fn frame(&self, direction: Direction, text: &str) {
        if self.enabled() {
            let line = format_frame(
                self.conn,
                direction,
                self.opened.elapsed(),
                text,
                self.token.as_ref(),
            );
            log::trace!(target: self.target, "{line}");
        }
    }

    fn redact_known(&self, text: &str) -> String {
        match &self.token {
            Some(token) => token.redact(text),
            None => text.to_owned(),
        }
    }
}

/// One trace line for a gateway message: `conn N +S.SSSs -> op 2 Identify
/// (283 B) {json}`, secrets redacted, large payloads abbreviated.
pub fn format_frame(
    conn: u64,
    direction: Direction,
    since_open: Duration,
    text: &str,
    token: Option<&Token>,
) -> String {
    let frame = Frame::decode(text.as_bytes()).ok();
    let mut secrets = frame.as_ref().map(secrets_in).unwrap_or_default();
    secrets.extend(token.map(|token| token.expose().to_owned()));
    let mut shown = redact_strings(text, &secrets);
    if let Some(token) = token {
        // Second line of defence: the token inside a longer string.
        shown = token.redact(&shown);
    }
    let what = match &frame {
        Some(frame) => describe(frame),
        None => "not a gateway frame".to_owned(),
    };
    let size = text.len();
    let body = if size > ABBREVIATE_OVER {
        let head = head(&shown, HEAD_BYTES);
        format!(
            "{head}... ({} more bytes not shown)",
            shown.len() - head.len()
        )
    } else {
        shown
    };
    format!(
        "conn {conn} +{:.3}s {} {what} ({size} B) {body}",
        since_open.as_secs_f64(),
        direction.arrow()
    )
}

/// One trace line for the end of a connection.
pub fn format_close(
    conn: u64,
    direction: Direction,
    since_open: Duration,
    code: Option<u16>,
) -> String {
    // A received code is named; a sent one is ours to choose (smolcord
    // sends 4000, which Discord calls "unknown error", to keep the session).
    let what = match (code, direction) {
        (Some(code), Direction::In) => format!(
            "close {code} ({})",
            crate::protocol::CloseCode(code).description()
        ),
        (Some(code), Direction::Out) => format!("close {code}"),
        (None, _) => "connection ended without a close frame".to_owned(),
    };
    format!(
        "conn {conn} +{:.3}s {} {what}",
        since_open.as_secs_f64(),
        direction.arrow()
    )
}

/// `op 0 MESSAGE_CREATE s=5`, `op 10 Hello`, `op 42`.
fn describe(frame: &Frame) -> String {
    let op = frame.raw_opcode();
    let mut out = match frame.opcode() {
        Some(OpCode::Dispatch) => format!("op {op}"),
        Some(known) => format!("op {op} {known:?}"),
        None => format!("op {op} (unknown)"),
    };
    if let Some(name) = frame.event_name() {
        out.push(' ');
        out.push_str(name);
    }
    if let Some(seq) = frame.sequence() {
        out.push_str(&format!(" s={seq}"));
    }
    out
}

/// The secret strings a frame carries: Identify's token, Resume's token
/// and session id, READY's session id, an interaction's token (it answers
/// and edits as the application for 15 minutes).
fn secrets_in(frame: &Frame) -> Vec<String> {
    #[derive(Deserialize)]
    struct Secrets {
        token: Option<String>,
        session_id: Option<String>,
    }
    let carries_secrets = matches!(frame.opcode(), Some(OpCode::Identify | OpCode::Resume))
        || matches!(frame.event_name(), Some("READY" | "INTERACTION_CREATE"));
    if !carries_secrets {
        return Vec::new();
    }
    match frame.data::<Secrets>() {
        Ok(secrets) => [secrets.token, secrets.session_id]
            .into_iter()
            .flatten()
            .filter(|secret| !secret.is_empty())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// `text` with every JSON string literal whose value is one of `secrets`
/// replaced by `"<redacted>"`. Whole strings only (a one-letter id must not
/// blank out the rest of the frame), compared after unescaping (`\/` is
/// `/`), and the text is otherwise left as it was on the wire.
fn redact_strings(text: &str, secrets: &[String]) -> String {
    if secrets.is_empty() {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < bytes.len() && bytes[i] != b'"' {
            // Skip the escaped byte (always ASCII in JSON), so `\"` does not end it.
            i += if bytes[i] == b'\\' { 2 } else { 1 };
        }
        if i >= bytes.len() {
            break; // an unterminated string: nothing more to match
        }
        let end = i + 1;
        // Quotes are ASCII, so both ends are character boundaries.
        let literal = &text[start..end];
        let value = if literal.contains('\\') {
            serde_json::from_str::<String>(literal).ok()
        } else {
            Some(literal[1..literal.len() - 1].to_owned())
        };
        if value.is_some_and(|value| secrets.contains(&value)) {
            out.push_str(&text[copied..start]);
            out.push('"');
            out.push_str(REDACTED);
            out.push('"');
            copied = end;
        }
        i = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// The first `max` bytes of `text`, cut at a character boundary.
fn head(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GhIjKl.secret-token-value";
    const SESSION: &str = "3f1c0e5a9b7d4e2f8a6b1c3d5e7f9a0b";

    fn line(direction: Direction, text: &str) -> String {
        let token = Token::new(TOKEN).unwrap();
        format_frame(
            7,
            direction,
            Duration::from_millis(1234),
            text,
            Some(&token),
        )
    }

    #[test]
    fn an_interactions_token_is_redacted() {
        let text = r#"{"op":0,"s":9,"t":"INTERACTION_CREATE","d":{"id":"5","type":2,"token":"aW50ZXJhY3Rpb24.secret-interaction","data":{"name":"status"}}}"#;
        let shown = line(Direction::In, text);
        assert!(!shown.contains("secret-interaction"), "{shown}");
        assert!(shown.contains(r#""token":"<redacted>""#), "{shown}");
        assert!(shown.contains("status"), "the rest stays: {shown}");
    }

    fn assert_clean(line: &str) {
        assert!(!line.contains(TOKEN), "token in {line}");
        assert!(!line.contains(SESSION), "session id in {line}");
        assert!(
            !line.contains("secret-token"),
            "part of the token in {line}"
        );
    }

    #[test]
    fn identify_resume_and_ready_lose_their_secrets() {
        let identify = format!(
            r#"{{"op":2,"d":{{"token":"{TOKEN}","intents":4096,"properties":{{"os":"linux"}}}}}}"#
        );
        let out = line(Direction::Out, &identify);
        assert_clean(&out);
        assert_eq!(
            out,
            format!(
                r#"conn 7 +1.234s -> op 2 Identify ({} B) {{"op":2,"d":{{"token":"<redacted>","intents":4096,"properties":{{"os":"linux"}}}}}}"#,
                identify.len()
            )
        );
        let resume =
            format!(r#"{{"op":6,"d":{{"token":"{TOKEN}","session_id":"{SESSION}","seq":42}}}}"#);
        let out = line(Direction::Out, &resume);
        assert_clean(&out);
        assert!(
            out.contains(r#""session_id":"<redacted>","seq":42"#),
            "{out}"
        );
        let ready = format!(
            r#"{{"op":0,"t":"READY","s":1,"d":{{"v":10,"session_id":"{SESSION}","resume_gateway_url":"wss://x"}}}}"#
        );
        let out = line(Direction::In, &ready);
        assert_clean(&out);
        assert!(
            out.starts_with("conn 7 +1.234s <- op 0 READY s=1 ("),
            "{out}"
        );
        assert!(out.contains(r#""resume_gateway_url":"wss://x""#), "{out}");
    }

    #[test]
    fn the_token_is_redacted_wherever_it_appears() {
        // Echoed in a place no rule knows, and in a frame that does not parse.
        let odd = format!(r#"{{"op":0,"t":"X","s":2,"d":{{"note":"Bot {TOKEN} (echo)"}}}}"#);
        assert_clean(&line(Direction::In, &odd));
        let broken = format!(r#"{{"op":2,"d":{{"token":"{TOKEN}""#);
        let out = line(Direction::Out, &broken);
        assert_clean(&out);
        assert!(out.contains("not a gateway frame"), "{out}");
        // Escaped JSON (`\/`) still matches the decoded secret.
        let escaped = r#"{"op":6,"d":{"token":"a\/b","session_id":"s\/1","seq":1}}"#;
        let out = format_frame(1, Direction::Out, Duration::ZERO, escaped, None);
        assert!(!out.contains(r"a\/b") && !out.contains(r"s\/1"), "{out}");
    }

    #[test]
    fn a_secret_never_blanks_unrelated_text() {
        // A one-letter session id only replaces the whole string equal to it.
        let resume = r#"{"op":6,"d":{"token":"t","session_id":"a","seq":1,"note":"banana"}}"#;
        let out = format_frame(1, Direction::Out, Duration::ZERO, resume, None);
        assert!(out.contains(r#""note":"banana""#), "{out}");
        assert!(out.contains(r#""session_id":"<redacted>""#), "{out}");
    }

    #[test]
    fn large_payloads_keep_their_envelope_and_first_bytes() {
        let padding = "é".repeat(1000);
        let big = format!(
            r#"{{"op":0,"t":"GUILD_CREATE","s":9,"d":{{"token_like":"{TOKEN}","pad":"{padding}"}}}}"#
        );
        let out = line(Direction::In, &big);
        assert_clean(&out);
        let expected_head =
            r#"{"op":0,"t":"GUILD_CREATE","s":9,"d":{"token_like":"<redacted>","pad":""#;
        assert!(
            out.starts_with(&format!(
                "conn 7 +1.234s <- op 0 GUILD_CREATE s=9 ({} B) {expected_head}",
                big.len()
            )),
            "{out}"
        );
        assert!(out.ends_with(" more bytes not shown)"), "{out}");
        // Header + 256 bytes of JSON + the note: bounded, whatever the frame.
        assert!(out.len() < 400, "{} bytes: {out}", out.len());
        // Exactly at the limit: shown whole.
        let exact = format!(r#"{{"op":1,"d":"{}"}}"#, "x".repeat(ABBREVIATE_OVER - 15));
        assert_eq!(exact.len(), ABBREVIATE_OVER);
        assert!(line(Direction::Out, &exact).ends_with(&exact));
    }

    #[test]
    fn describes_ops_events_and_closes() {
        let out = line(Direction::In, r#"{"op":11}"#);
        assert_eq!(
            out,
            r#"conn 7 +1.234s <- op 11 HeartbeatAck (9 B) {"op":11}"#
        );
        let out = line(Direction::In, r#"{"op":9,"d":false}"#);
        assert!(out.contains("<- op 9 InvalidSession (18 B)"), "{out}");
        let out = line(Direction::In, r#"{"op":99}"#);
        assert!(out.contains("op 99 (unknown)"), "{out}");
        assert_eq!(
            format_close(2, Direction::Out, Duration::from_millis(5), Some(4000)),
            "conn 2 +0.005s -> close 4000"
        );
        assert_eq!(
            format_close(2, Direction::In, Duration::ZERO, Some(4009)),
            "conn 2 +0.000s <- close 4009 (session timed out)"
        );
        assert_eq!(
            format_close(2, Direction::In, Duration::ZERO, None),
            "conn 2 +0.000s <- connection ended without a close frame"
        );
    }

    #[test]
    fn client_connections_are_numbered() {
        let a = WireTrace::client(None);
        let b = WireTrace::client(None);
        assert!(b.conn() > a.conn());
        assert_eq!(WireTrace::server(5, None).conn(), 5);
        assert!(!format!("{:?}", WireTrace::client(Token::new(TOKEN))).contains(TOKEN));
    }
}
