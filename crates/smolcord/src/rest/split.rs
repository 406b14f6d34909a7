//! Splitting a long reply into Discord-sized messages.
//!
//! Discord refuses `content` over 2000 characters, and a reply cut in the
//! middle of a line reads badly, so whole lines are packed greedily and only
//! a line that alone is too long is cut (at a `char` boundary).

/// Discord's limit on message `content`, in characters.
pub const MESSAGE_LIMIT: usize = 2000;

/// Splits `text` into chunks of at most `limit` characters (`char`s, not
/// bytes), preferring line boundaries.
///
/// Exactly: joining the chunks gives back `text`, except that
/// - where a chunk ends on a line boundary, the one `'\n'` at the cut is
///   dropped (so for text whose lines all fit, `chunks.join("\n") == text`);
/// - where an over-long line is cut, nothing is dropped (for a single long
///   line, `chunks.concat() == text`);
/// - a chunk that would hold only white space is left out (Discord refuses
///   empty content), so empty or blank `text` gives no chunks at all.
///
/// A `limit` of 0 is treated as 1.
///
/// ```
/// use smolcord::rest::split_message;
/// let chunks = split_message("one\ntwo\nthree", 8);
/// assert_eq!(chunks, ["one\ntwo", "three"]);
/// ```
pub fn split_message(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut chunks = Vec::new();
    let mut current = String::new();
    let mut current_chars = 0;
    let mut started = false;
    for line in text.split('\n') {
        let line_chars = line.chars().count();
        if started && current_chars + 1 + line_chars <= limit {
            current.push('\n');
            current.push_str(line);
            current_chars += 1 + line_chars;
            continue;
        }
        if started {
            push_chunk(&mut chunks, std::mem::take(&mut current));
        }
        started = true;
        if line_chars <= limit {
            current.push_str(line);
            current_chars = line_chars;
            continue;
        }
        // An over-long line: full pieces go out now, the tail starts the
        // next chunk so following short lines can join it.
        let mut rest = line;
        let mut rest_chars = line_chars;
        while rest_chars > limit {
            let cut = rest
                .char_indices()
                .nth(limit)
                .map_or(rest.len(), |(index, _)| index);
            push_chunk(&mut chunks, rest[..cut].to_owned());
            rest = &rest[cut..];
            rest_chars -= limit;
        }
        current.push_str(rest);
        current_chars = rest_chars;
    }
    if started {
        push_chunk(&mut chunks, current);
    }
    chunks
}

fn push_chunk(chunks: &mut Vec<String>, chunk: String) {
    if !chunk.trim().is_empty() {
        chunks.push(chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_chunk() {
        assert_eq!(split_message("hello", 2000), ["hello"]);
    }

    #[test]
    fn blank_text_gives_nothing() {
        assert!(split_message("", 2000).is_empty());
        assert!(split_message("\n \n", 2).is_empty());
    }

    #[test]
    fn counts_chars_not_bytes() {
        let text = "é".repeat(5);
        let chunks = split_message(&text, 2);
        assert_eq!(chunks, ["éé", "éé", "é"]);
    }

    #[test]
    fn tail_of_long_line_joins_next_line() {
        assert_eq!(split_message("abcdefg\nhi", 5), ["abcde", "fg\nhi"]);
    }

    #[test]
    fn zero_limit_does_not_loop() {
        assert_eq!(split_message("ab", 0), ["a", "b"]);
    }
}
