//! What each message the bridge sends is called: its nonce, derived from
//! what it answers, never random.
//!
//! Discord creates nothing new for a nonce it saw from us in the past few
//! minutes (`enforce_nonce`), so a message sent again after a crash and a
//! restart — the same reply part, the same notice about the same message —
//! is not posted twice as long as it comes within that window. Every nonce
//! fits Discord's 25 characters: a letter for the kind, the message id (at
//! most 20 digits) or a 16-digit hash, and a small part number.

use smolcord::protocol::Snowflake;
use smolcord::rest::Nonce;

/// What a notice about a message says (one of each per message at most;
/// [`Notice::Transcription`] once per voice note).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notice {
    /// "You are now this bot's owner".
    Owner,
    /// A pairing code, or a reminder of it.
    Pairing,
    /// "Only the owner can restart the bridge."
    RestartRefused,
    /// "Restarting…" (for the owner's `!restart`).
    Restarting,
    /// "Back online" (for the `!restart` that caused it).
    BackOnline,
    /// The task could not be spooled.
    SpoolFailed,
    /// The n-th voice note of the message could not be transcribed.
    Transcription(usize),
    /// The reply could not be delivered (in full).
    Undelivered,
    /// Messages up to this one, sent in a gap, were not answered (the
    /// read-back's bounds).
    Skipped,
    /// The history of the channel (this id) could not be read back at
    /// all before its gap aged out.
    Unread,
    /// Some of its attachments were not handed to the agent.
    FilesLeftOut,
    /// The owner is told a server channel refused the reply to this message.
    ChannelRefused,
    /// The owner is told a server channel (this id) refused the read-back
    /// of its history.
    HistoryRefused,
    /// The owner is told a server channel's history read back empty though
    /// the channel has a newer message (this id): Read Message History is
    /// missing.
    HistoryWithheld,
    /// The answer to an owner's command (this interaction id), sent as a
    /// message when the interaction can no longer be answered.
    CommandAnswer,
}

/// Part `part` of the reply to `message`.
pub(crate) fn reply_part(message: Snowflake, part: usize) -> Nonce {
    derived(format!("r{message}.{part}"))
}

/// The "working…" placeholder for `message`.
pub(crate) fn placeholder(message: Snowflake) -> Nonce {
    derived(format!("p{message}"))
}

/// A notice about `message`.
pub(crate) fn notice(message: Snowflake, notice: Notice) -> Nonce {
    let text = match notice {
        Notice::Owner => format!("o{message}"),
        Notice::Pairing => format!("c{message}"),
        Notice::RestartRefused => format!("x{message}"),
        Notice::Restarting => format!("k{message}"),
        Notice::BackOnline => format!("b{message}"),
        Notice::SpoolFailed => format!("f{message}"),
        Notice::Transcription(n) => format!("t{message}.{n}"),
        Notice::Undelivered => format!("u{message}"),
        Notice::Skipped => format!("g{message}"),
        Notice::Unread => format!("h{message}"),
        Notice::FilesLeftOut => format!("a{message}"),
        Notice::ChannelRefused => format!("m{message}"),
        Notice::HistoryRefused => format!("v{message}"),
        Notice::HistoryWithheld => format!("w{message}"),
        Notice::CommandAnswer => format!("i{message}"),
    };
    derived(text)
}

/// Part `part` of a spool result whose name, channel and content have the
/// [`fingerprint`] `print`.
pub(crate) fn result_part(print: u64, part: usize) -> Nonce {
    derived(format!("s{print:016x}.{part}"))
}

/// The notice that the spool result with [`fingerprint`] `print` could not
/// be delivered (in full).
pub(crate) fn result_undelivered(print: u64) -> Nonce {
    derived(format!("n{print:016x}"))
}

/// The notice that the spool result file with [`fingerprint`] `print`
/// (of its name) could not be used.
pub(crate) fn result_unusable(print: u64) -> Nonce {
    derived(format!("e{print:016x}"))
}

/// A stable 64-bit fingerprint (FNV-1a) of `fields`, each ended by a zero
/// byte so that ("ab", "c") and ("a", "bc") differ. Stable across builds
/// and versions (unlike `std`'s hasher): it names things on disk and in
/// Discord's nonce window.
pub(crate) fn fingerprint(fields: &[&[u8]]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash = OFFSET;
    for field in fields {
        for &byte in field.iter().chain(&[0]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(PRIME);
        }
    }
    hash
}

fn derived(text: String) -> Nonce {
    // Every shape above is at most 25 tame characters for any u64 id and
    // any part count the bridge sends (a few); a longer one would be a bug
    // here, and a random nonce still keeps the REST client's retries safe.
    Nonce::new(text).unwrap_or_else(|| {
        debug_assert!(false, "a derived nonce does not fit");
        Nonce::random()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One nonce of every kind, about `id` (or the result `print`), part
    /// or voice note `part`.
    fn one_of_each(id: Snowflake, print: u64, part: usize) -> Vec<Nonce> {
        let mut all = vec![reply_part(id, part), placeholder(id)];
        all.extend(
            [
                Notice::Owner,
                Notice::Pairing,
                Notice::RestartRefused,
                Notice::Restarting,
                Notice::BackOnline,
                Notice::SpoolFailed,
                Notice::Transcription(part),
                Notice::Undelivered,
                Notice::Skipped,
                Notice::Unread,
                Notice::FilesLeftOut,
                Notice::ChannelRefused,
                Notice::HistoryRefused,
                Notice::HistoryWithheld,
                Notice::CommandAnswer,
            ]
            .map(|kind| notice(id, kind)),
        );
        all.extend([
            result_part(print, part),
            result_undelivered(print),
            result_unusable(print),
        ]);
        all
    }

    #[test]
    fn nonces_are_stable_distinct_and_fit() {
        let largest = Snowflake::new(u64::MAX);
        for part in [0, 99] {
            let all = one_of_each(largest, u64::MAX, part);
            for (i, a) in all.iter().enumerate() {
                assert!(a.as_str().len() <= smolcord::rest::NONCE_MAX_CHARS, "{a:?}");
                for b in &all[i + 1..] {
                    assert_ne!(a, b);
                }
            }
        }
        assert_eq!(reply_part(Snowflake::new(42), 1).as_str(), "r42.1");
        assert_ne!(
            reply_part(Snowflake::new(4), 21),
            reply_part(Snowflake::new(42), 1)
        );
    }

    #[test]
    fn each_kind_of_nonce_has_a_letter_of_its_own() {
        // A decimal id and a hexadecimal print may spell the same digits
        // (a 16-digit id, a print without a-f): only the letter keeps two
        // kinds apart in Discord's nonce window.
        let kinds = one_of_each(Snowflake::new(1), 1, 0);
        let letters: Vec<char> = kinds
            .iter()
            .map(|n| n.as_str().chars().next().unwrap())
            .collect();
        for (i, a) in letters.iter().enumerate() {
            assert!(
                !letters[i + 1..].contains(a),
                "two kinds of nonce start with {a:?}: {kinds:?}"
            );
        }
    }

    #[test]
    fn fingerprints_are_fnv1a_and_separate_fields() {
        // FNV-1a 64 of the empty input and of "a" (with our field end: 0).
        assert_eq!(fingerprint(&[]), 0xcbf2_9ce4_8422_2325);
        assert_ne!(fingerprint(&[b"ab", b"c"]), fingerprint(&[b"a", b"bc"]));
        assert_eq!(fingerprint(&[b"x", b"y"]), fingerprint(&[b"x", b"y"]));
    }
}
