//! split_message on realistic replies: Discord's 2000-character limit,
//! line boundaries kept, nothing lost.

use smolcord::rest::{split_message, MESSAGE_LIMIT};

/// 5000+ characters in lines of varying length, with multi-byte characters
/// so a byte-counting splitter would go wrong.
fn long_reply() -> String {
    let mut text = String::new();
    let mut n = 0;
    while text.chars().count() < 5000 {
        let width = 10 + (n * 37) % 90;
        text.push_str(&format!("{n:04} "));
        text.extend(std::iter::repeat_n(
            if n % 3 == 0 { 'é' } else { 'x' },
            width,
        ));
        text.push('\n');
        n += 1;
    }
    text.push_str("the end");
    text
}

#[test]
fn multi_line_reply_splits_on_line_boundaries() {
    let text = long_reply();
    assert!(text.chars().count() >= 5000);
    let chunks = split_message(&text, MESSAGE_LIMIT);
    assert_eq!(
        chunks.len(),
        3,
        "5000 chars of short lines fit in 3 messages"
    );
    for chunk in &chunks {
        let chars = chunk.chars().count();
        assert!(
            chars > 0 && chars <= MESSAGE_LIMIT,
            "chunk of {chars} chars"
        );
        assert!(!chunk.starts_with('\n') && !chunk.ends_with('\n'));
        // Every chunk starts at the beginning of a line.
        assert!(
            chunk[..4].bytes().all(|b| b.is_ascii_digit()),
            "{:?}",
            &chunk[..10]
        );
    }
    // All lines fit, so every cut is on a line boundary, whose one '\n' is
    // dropped: joining with '\n' gives the original back exactly.
    assert_eq!(chunks.join("\n"), text);
    // Greedy: each chunk could not have taken the next line too.
    for pair in chunks.windows(2) {
        let next_line = pair[1].split('\n').next().unwrap();
        assert!(pair[0].chars().count() + 1 + next_line.chars().count() > MESSAGE_LIMIT);
    }
}

#[test]
fn single_long_line_is_cut_at_char_boundaries() {
    let line: String = (0..4500)
        .map(|i| if i % 2 == 0 { 'ü' } else { 'a' })
        .collect();
    let chunks = split_message(&line, MESSAGE_LIMIT);
    let lengths: Vec<usize> = chunks.iter().map(|c| c.chars().count()).collect();
    assert_eq!(lengths, [2000, 2000, 500]);
    // A cut inside a line drops nothing.
    assert_eq!(chunks.concat(), line);
}

#[test]
fn long_line_between_short_ones() {
    let long = "y".repeat(4500);
    let text = format!("intro\n{long}\noutro");
    let chunks = split_message(&text, MESSAGE_LIMIT);
    assert_eq!(chunks[0], "intro");
    assert_eq!(chunks[1].chars().count(), 2000);
    assert_eq!(chunks[2].chars().count(), 2000);
    assert_eq!(chunks[3], format!("{}\noutro", "y".repeat(500)));
    assert!(chunks.iter().all(|c| c.chars().count() <= MESSAGE_LIMIT));
}
