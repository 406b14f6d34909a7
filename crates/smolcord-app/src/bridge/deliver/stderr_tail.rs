//! The end of a command's stderr, made fit for the operator's eyes: the
//! log's warning and the failure journal.
//!
//! An agent or a transcriber that fails usually says why in its last line
//! ("model not found"), after pages of progress: so the *end* is kept
//! ([`CAPTURED`] bytes captured, [`SHOWN`] shown). It is a program's text
//! going into a terminal and a JSON file, so escape sequences and control
//! characters go ([`visible`]), its lines are joined on one line with
//! ` ⏎ ` (a log line stays one line), and anything shaped like a Discord
//! bot token is replaced: the agent never gets the token in its
//! environment, but it might read a `token_file` or print one of its own.

use crate::bridge::deliver::shown::visible;

/// Bytes of stderr kept while the command runs (its end): a few lines more
/// than are shown, so escapes and blank lines removed still leave
/// [`SHOWN`] bytes of text.
pub(crate) const CAPTURED: usize = 4096;
/// Bytes of it shown at most in a warning and a failure record.
pub(crate) const SHOWN: usize = 1024;
/// What joins its lines.
const LINE_BREAK: &str = " ⏎ ";
/// What a token-shaped word becomes.
const REDACTED: &str = "<redacted>";

/// The end of `stderr` for the log and the journal, `None` when it says
/// nothing (empty, or only blanks and escapes). `truncated`: its start was
/// dropped while capturing (the text then starts with `…`).
pub(crate) fn operator_tail(stderr: &[u8], truncated: bool) -> Option<String> {
    // A capture cut at its start may begin inside a character.
    let start = if truncated {
        stderr
            .iter()
            .position(|b| b & 0xC0 != 0x80)
            .unwrap_or(stderr.len())
    } else {
        0
    };
    let text = String::from_utf8_lossy(&stderr[start..]);
    let text = visible(&text);
    let lines: Vec<String> = text
        .lines()
        .map(|line| redact_tokens(line.trim()))
        .filter(|line| !line.is_empty())
        .collect();
    if lines.is_empty() {
        return None;
    }
    let joined = lines.join(LINE_BREAK).replace('\t', " ");
    let cut = joined.len() > SHOWN;
    let tail = end_of(&joined, SHOWN);
    Some(if cut || truncated {
        format!("…{tail}")
    } else {
        tail.to_owned()
    })
}

/// The last (at most) `max` bytes of `text`, starting on a character.
fn end_of(text: &str, max: usize) -> &str {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// `line` with every word shaped like a Discord bot token replaced.
fn redact_tokens(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if looks_like_token(word) {
            out.push_str(REDACTED);
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in line.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// A bot token is three base64 parts joined by dots, the first the bot's
/// user id in decimal (`MTEw…` is `110…`): that is what marks it, not its
/// length (which Discord has changed before).
fn looks_like_token(word: &str) -> bool {
    let word = word.trim_matches('.');
    let parts: Vec<&str> = word.split('.').collect();
    if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
        return false;
    }
    let first = parts[0].trim_end_matches('=');
    // A snowflake is 17 to 20 digits, 24 to 28 base64 characters; shorter
    // ids (tests, the simulator's) are still ids.
    if first.len() < 4 {
        return false;
    }
    match decode_base64(first) {
        Some(bytes) => !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit),
        None => false,
    }
}

/// Unpadded standard or URL-safe base64, `None` if it is not that.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    };
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.as_bytes().chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_survives_and_lines_are_joined() {
        let stderr = b"loading...\n\x1b[31merror:\x1b[0m model not found\n\n";
        assert_eq!(
            operator_tail(stderr, false).as_deref(),
            Some("loading... ⏎ error: model not found")
        );
        assert_eq!(operator_tail(b"", false), None);
        assert_eq!(operator_tail(b"\n \x1b[2J\r\n", false), None);
    }

    #[test]
    fn a_long_stderr_is_cut_at_its_start() {
        let mut stderr: Vec<u8> = "é".repeat(3000).into_bytes();
        stderr.extend_from_slice(b"\nmodel not found\n");
        let tail = operator_tail(&stderr[1..], true).unwrap();
        assert!(tail.starts_with('…'), "{tail}");
        assert!(tail.ends_with(" ⏎ model not found"), "{tail}");
        assert!(tail.len() <= SHOWN + '…'.len_utf8(), "{}", tail.len());
    }

    #[test]
    fn token_shaped_words_are_redacted() {
        let sim = "MTEwMDAwMDAwMDAwMDAwMDAwMQ.HDdKgA.c21vbGNvcmQtc2ltdWxhdG9yLW5vLXNlY3JldA";
        let line = format!("auth failed for Bot {sim}, retrying");
        assert_eq!(
            operator_tail(line.as_bytes(), false).as_deref(),
            Some("auth failed for Bot <redacted>, retrying")
        );
        let short = "token=MTEwMDAw.trace-level-secret.DoNotLogMe";
        let tail = operator_tail(short.as_bytes(), false).unwrap();
        assert!(!tail.contains("DoNotLogMe"), "{tail}");
        // File names and versions are not tokens.
        for plain in ["ggml-base.en.bin", "v1.2.3", "model.q5_0.gguf"] {
            assert_eq!(
                operator_tail(plain.as_bytes(), false).as_deref(),
                Some(plain)
            );
        }
    }
}
