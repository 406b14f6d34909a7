//! What a user is shown of a reply: the text, without the bytes that are
//! not text.
//!
//! An agent is often a command-line tool, and tools print colours and
//! cursor moves (`ESC [ 31 m`), titles and clipboard writes (`ESC ] 52 ;
//! ...`), NUL padding, carriage returns for progress bars. Discord shows
//! none of them as meant: a coloured line arrives as `[31merror[0m`, and a
//! NUL or bell is at best invisible, at worst cuts the text in some client
//! or log. The same reply read later in a terminal (`reply.txt` saved, the
//! fallback command's log) would *run* the escapes. So every reply and
//! result passes through [`visible`] on its way out (delivery's `Plan::new`):
//! escape sequences go whole (CSI with its parameters, OSC up to its BEL or
//! ST, any other two-byte `ESC X`), and so does every other C0 and C1
//! control character and DEL, except the two that are text: line feed and
//! tab. Everything else (all printable Unicode, emoji, right-to-left text)
//! is kept as it is.

/// `text` without escape sequences and control characters, `\n` and `\t`
/// kept. One pass, no allocation when there is nothing to remove.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_removed) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            if !is_removed(c) {
                out.push(c);
            }
            continue;
        }
        match chars.next() {
            // CSI: parameter and intermediate bytes, then one final byte.
            Some('[') => {
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \).
            Some(']' | 'P' | 'X' | '^' | '_') => {
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            // Any other escape is ESC and one character.
            _ => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

fn is_removed(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_control_bytes_go_and_text_stays() {
        assert_eq!(
            visible("plain\ttext\nline ✓ שלום"),
            "plain\ttext\nline ✓ שלום"
        );
        assert!(matches!(visible("plain"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(visible("\u{1b}[1;31merror\u{1b}[0m: x"), "error: x");
        assert_eq!(visible("a\0b\u{7}c\r\n\u{7f}d\u{9b}e\u{85}"), "abc\nde");
        // A title change and a clipboard write, ended by BEL and by ST.
        assert_eq!(
            visible("\u{1b}]0;owned\u{7}x\u{1b}]52;c;aGk=\u{1b}\\y"),
            "xy"
        );
        assert_eq!(visible("\u{1b}7saved\u{1b}8\u{1b}c"), "saved");
        // Cut off mid-sequence: the rest is dropped, nothing panics.
        assert_eq!(visible("ok\u{1b}[12"), "ok");
        assert_eq!(visible("ok\u{1b}"), "ok");
        assert_eq!(visible("\0\u{1b}[2J\r"), "");
    }
}
