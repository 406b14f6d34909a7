//! Splitting a long reply into Discord-sized messages.
//!
//! Discord refuses `content` over 2000 characters, and a reply cut in the
//! middle of a line reads badly, so whole lines are packed greedily and only
//! a line that alone is too long is cut — between graphemes (what a reader
//! sees as one character: a Devanagari syllable with its vowel sign, a
//! flag, a ZWJ family emoji), never inside one. A code block (a ```
//! fence) cut across messages is closed at the end of one and opened again,
//! with its language, at the start of the next, so every part renders as
//! code.

use unicode_segmentation::UnicodeSegmentation;

/// Discord's limit on message `content`, in characters.
pub const MESSAGE_LIMIT: usize = 2000;

/// What closes a code block cut at the end of a chunk.
const FENCE_CLOSE: &str = "\n```";

/// Splits `text` into chunks of at most `limit` characters (`char`s, not
/// bytes), preferring line boundaries, cutting an over-long line only
/// between graphemes (one grapheme longer than the chunk is cut between
/// `char`s, the one case left).
///
/// Exactly: joining the chunks gives back `text`, except that
/// - where a chunk ends on a line boundary, the one `'\n'` at the cut is
///   dropped (so for text whose lines all fit, `chunks.join("\n") == text`);
/// - where an over-long line is cut, nothing is dropped (for a single long
///   line, `chunks.concat() == text`);
/// - where a cut falls inside a code block, the chunk before ends with
///   `"\n```"` and the one after starts with the block's opening line (with
///   its language) and `'\n'`;
/// - a chunk that would hold only white space is left out (Discord refuses
///   empty content), so empty or blank `text` gives no chunks at all.
///
/// A `limit` of 0 is treated as 1.
///
/// ```
/// use smolcord::rest::split_message;
/// let chunks = split_message("one\ntwo\nthree", 8);
/// assert_eq!(chunks, ["one\ntwo", "three"]);
/// let code = split_message("```rust\nlet a = 1;\nlet b = 2;\n```", 30);
/// assert_eq!(code, ["```rust\nlet a = 1;\n```", "```rust\nlet b = 2;\n```"]);
/// ```
pub fn split_message(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    let mut out = Splitter {
        limit,
        chunks: Vec::new(),
        current: String::new(),
        chars: 0,
        started: false,
        fence: None,
    };
    for line in text.split('\n') {
        out.line(line);
    }
    out.finish()
}

struct Splitter {
    limit: usize,
    chunks: Vec<String>,
    current: String,
    chars: usize,
    /// `current` holds a line (the next one joins with `'\n'`).
    started: bool,
    /// The opening line of the code block open after `current`'s lines.
    fence: Option<String>,
}

impl Splitter {
    fn line(&mut self, line: &str) {
        let line_chars = line.chars().count();
        let fence_after = fence_after(self.fence.as_deref(), line);
        // Room kept to close the block if the chunk ends inside it.
        let reserve = if fence_after.is_some() {
            FENCE_CLOSE.len()
        } else {
            0
        };
        if self.started && self.chars + 1 + line_chars + reserve <= self.limit {
            self.current.push('\n');
            self.current.push_str(line);
            self.chars += 1 + line_chars;
            self.fence = fence_after;
            return;
        }
        if self.started {
            self.cut();
        }
        // A fresh chunk: after the block's opening line, if one is open.
        let joined = self.started;
        self.started = true;
        if joined && self.chars + 1 + line_chars + reserve <= self.limit {
            self.current.push('\n');
            self.current.push_str(line);
            self.chars += 1 + line_chars;
            self.fence = fence_after;
            return;
        }
        if !joined && line_chars + reserve <= self.limit {
            self.current.push_str(line);
            self.chars = line_chars;
            self.fence = fence_after;
            return;
        }
        // An over-long line (no fence marker: one that long is text):
        // full pieces go out now, the tail stays for following lines.
        let mut rest = line;
        loop {
            let prefix = usize::from(!self.current.is_empty());
            let room = self
                .limit
                .saturating_sub(self.chars + prefix + reserve)
                .max(1);
            let cut = grapheme_cut(rest, room);
            if cut >= rest.len() {
                break;
            }
            if prefix == 1 {
                self.current.push('\n');
            }
            self.current.push_str(&rest[..cut]);
            self.chars += prefix + rest[..cut].chars().count();
            rest = &rest[cut..];
            self.cut();
        }
        if !self.current.is_empty() {
            self.current.push('\n');
            self.chars += 1;
        }
        self.current.push_str(rest);
        self.chars += rest.chars().count();
        self.started = true;
        self.fence = fence_after;
    }

    /// Ends the current chunk (closing an open block) and starts the next
    /// (opening it again).
    fn cut(&mut self) {
        let mut chunk = std::mem::take(&mut self.current);
        self.chars = 0;
        self.started = false;
        if let Some(open) = self.fence.as_deref() {
            let open_chars = open.chars().count();
            // Reopened only where it leaves room for text.
            if open_chars + 1 + FENCE_CLOSE.len() < self.limit / 2 {
                chunk.push_str(FENCE_CLOSE);
                self.current.push_str(open);
                self.chars = open_chars;
                self.started = true;
            }
        }
        if !chunk.trim().is_empty() {
            self.chunks.push(chunk);
        }
    }

    fn finish(mut self) -> Vec<String> {
        if self.started || !self.current.is_empty() {
            // Ends as the text does: a block left open stays open.
            self.fence = None;
            self.cut();
        }
        self.chunks
    }
}

/// The code block open after `line`, given the one open before it: a line
/// starting with three backticks opens one (keeping the line, language
/// and all) or closes the open one.
fn fence_after(open: Option<&str>, line: &str) -> Option<String> {
    let marker = line.trim_start().starts_with("```");
    match (open, marker) {
        (Some(_), true) => None,
        (None, true) => Some(line.trim().to_owned()),
        (open, false) => open.map(str::to_owned),
    }
}

/// The byte index at which to cut `text` so the head holds at most `room`
/// characters and ends between graphemes (the whole text if it fits; at
/// least one `char` when even the first grapheme is longer than `room`).
fn grapheme_cut(text: &str, room: usize) -> usize {
    let mut chars = 0;
    let mut cut = 0;
    for (index, grapheme) in text.grapheme_indices(true) {
        let n = grapheme.chars().count();
        if chars + n > room {
            if cut == 0 {
                // One grapheme longer than the room: cut it between chars.
                return text.char_indices().nth(room).map_or(text.len(), |(i, _)| i);
            }
            return cut;
        }
        chars += n;
        cut = index + grapheme.len();
    }
    text.len()
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

    #[test]
    fn graphemes_are_never_cut() {
        // A Devanagari syllable with its vowel sign (2 chars), a flag (2
        // regional indicators), a ZWJ family (5 chars).
        let (ki, flag, family) = ("कि", "🇫🇷", "👨\u{200d}👩\u{200d}👧");
        for (unit, n) in [(ki, 2), (flag, 2), (family, 5)] {
            // Each limit that does not divide the unit lands inside one.
            let text = format!("a{}", unit.repeat(4));
            for limit in n..=3 * n {
                let chunks = split_message(&text, limit);
                assert_eq!(chunks.concat(), text, "{unit} at {limit}");
                for chunk in &chunks {
                    assert!(chunk.chars().count() <= limit, "{chunk} at {limit}");
                    let rest = chunk.strip_prefix('a').unwrap_or(chunk);
                    assert_eq!(
                        rest.replace(unit, ""),
                        "",
                        "{unit} cut at {limit}: {chunks:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_grapheme_longer_than_the_limit_is_cut_between_chars() {
        let family = "👨\u{200d}👩\u{200d}👧";
        let chunks = split_message(family, 2);
        assert_eq!(chunks.concat(), family);
        assert!(chunks.iter().all(|c| c.chars().count() <= 2));
    }

    #[test]
    fn code_blocks_are_closed_and_opened_again_across_parts() {
        let body: Vec<String> = (0..40).map(|n| format!("let x{n} = {n};")).collect();
        let text = format!("Here:\n```rust\n{}\n```\nDone.", body.join("\n"));
        let chunks = split_message(&text, 120);
        assert!(chunks.len() > 3, "{chunks:?}");
        for chunk in &chunks {
            assert!(chunk.chars().count() <= 120, "{chunk}");
            // Every part has balanced fences: it renders on its own.
            let fences = chunk
                .lines()
                .filter(|l| l.trim_start().starts_with("```"))
                .count();
            assert_eq!(fences % 2, 0, "unbalanced: {chunk:?}");
        }
        assert!(chunks[1].starts_with("```rust\n"), "{chunks:?}");
        // Without the added fences, the text comes back.
        let joined = chunks.join("\n");
        let restored = joined.replace("\n```\n```rust\n", "\n");
        assert_eq!(restored, text);
        assert!(chunks.last().unwrap().ends_with("Done."));
    }

    #[test]
    fn text_without_fences_is_split_as_before() {
        let text: String = (0..300).map(|n| format!("line {n}\n")).collect();
        let chunks = split_message(&text, 100);
        assert_eq!(chunks.join("\n"), text);
        assert!(chunks.iter().all(|c| c.chars().count() <= 100));
    }
}
