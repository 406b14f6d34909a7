//! Pairing: how a stranger becomes an allowed user.
//!
//! A stranger who DMs the bot gets a one-time code and nothing else (no
//! owner, no user list, no hint of what the bot does). The operator approves
//! it on the host with `smolcord pair CODE`, which adds the user to
//! `access.json`; the running bridge notices and tells the user.
//!
//! Codes: 8 characters from an alphabet without look-alikes (no 0/O, 1/I/L),
//! valid 10 minutes, at most one live code per user. Rate limits: a user
//! gets at most one pairing reply per `reply_interval` (further DMs are
//! ignored silently), at most `codes_per_user` codes per `window`, and at
//! most `max_live_codes` codes are live at once (a crowd of strangers gets
//! silence, not a flood of replies).
//!
//! Codes live in `pairing.json` (written atomically with a backup) so the
//! `pair` command, another process, can check them.

use serde::{Deserialize, Serialize};
use smolcord::offload::{self, Fallback};
use smolcord::protocol::Snowflake;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::bridge::access::book;

/// The file name inside the state dir.
pub const PAIRING_FILE: &str = "pairing.json";
/// Characters a code is made of: no 0/O, 1/I/L look-alikes.
pub const CODE_ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPQRSTUVWXYZ";
/// Length of a code.
pub const CODE_LEN: usize = 8;

/// One live code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingCode {
    /// The code.
    pub code: String,
    /// Who asked.
    pub user_id: Snowflake,
    /// Where to tell them they were approved.
    pub channel_id: Snowflake,
    /// When it was issued (unix ms).
    pub issued_unix_ms: u64,
    /// When it stops working (unix ms).
    pub expires_unix_ms: u64,
}

/// A code that was approved and taken off the book (its user told), kept
/// a while so approving it again says what happened ([`approve_code`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsedCode {
    /// The code.
    pub code: String,
    /// Whose it was.
    pub user_id: Snowflake,
    /// When it was taken off the book (unix ms).
    pub used_unix_ms: u64,
}

/// Used codes kept at most (the newest): more than can be live at once
/// within a window under the default rules.
pub const USED_CODES_KEPT: usize = 64;

/// What `pairing.json` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairingFile {
    /// Codes issued and not yet used (expired ones are pruned lazily).
    #[serde(default)]
    pub codes: Vec<PairingCode>,
    /// Codes approved and taken off `codes`, for the rate-limit window
    /// (at least a command token's 15 minutes: a `/approve` run again
    /// after a crash finds its code here), at most [`USED_CODES_KEPT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub used: Vec<UsedCode>,
    /// Issue times per user inside the rate-limit window (unix ms).
    #[serde(default)]
    pub issued: BTreeMap<Snowflake, Vec<u64>>,
}

/// The pairing rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairingRules {
    /// How long a code is valid.
    pub ttl: Duration,
    /// At most one pairing reply per user per this long.
    pub reply_interval: Duration,
    /// Codes one user may get per `window`.
    pub codes_per_user: usize,
    /// The rate-limit window.
    pub window: Duration,
    /// Live codes at most, all users together.
    pub max_live_codes: usize,
}

impl Default for PairingRules {
    fn default() -> Self {
        PairingRules {
            ttl: Duration::from_secs(600),
            reply_interval: Duration::from_secs(60),
            codes_per_user: 3,
            window: Duration::from_secs(3600),
            max_live_codes: 20,
        }
    }
}

/// What to do with a stranger's DM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PairingDecision {
    /// A fresh code: save the book, then send it.
    Issue(String),
    /// Their live code again (the last reply was long enough ago).
    Remind(String),
    /// Say nothing.
    Silent(&'static str),
}

fn ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A fresh code from `pick(n)` returning `0..n`.
pub fn generate_code(mut pick: impl FnMut(usize) -> usize) -> String {
    (0..CODE_LEN)
        .map(|_| char::from(CODE_ALPHABET[pick(CODE_ALPHABET.len()) % CODE_ALPHABET.len()]))
        .collect()
}

/// What the operator typed, as a code: upper case, spaces and dashes gone.
pub fn normalize(input: &str) -> String {
    input
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .flat_map(char::to_uppercase)
        .collect()
}

/// The pairing state in the bridge: the file plus in-memory reply times.
#[derive(Debug, Default)]
pub(crate) struct PairingBook {
    pub file: PairingFile,
    last_reply: HashMap<Snowflake, u64>,
}

impl PairingBook {
    pub fn new(file: PairingFile) -> PairingBook {
        PairingBook {
            file,
            last_reply: HashMap::new(),
        }
    }

    /// Drops codes expired for longer than the window (until then they stay,
    /// so `smolcord pair` can say "expired" rather than "unknown") and issue
    /// times outside the window. Returns whether anything was dropped.
    pub fn prune(&mut self, now: u64, rules: &PairingRules) -> bool {
        let before = (
            self.file.codes.len(),
            self.file.issued.len(),
            self.file.used.len(),
        );
        let window = ms(rules.window);
        self.file
            .codes
            .retain(|c| now.saturating_sub(c.expires_unix_ms) < window);
        self.file
            .used
            .retain(|c| now.saturating_sub(c.used_unix_ms) < window);
        let mut changed = false;
        self.file.issued.retain(|_, times| {
            let n = times.len();
            times.retain(|&t| now.saturating_sub(t) < window);
            changed |= times.len() != n;
            !times.is_empty()
        });
        let interval = ms(rules.reply_interval);
        self.last_reply
            .retain(|_, &mut t| now.saturating_sub(t) < interval);
        let after = (
            self.file.codes.len(),
            self.file.issued.len(),
            self.file.used.len(),
        );
        changed || before != after
    }

    /// Codes not yet expired.
    pub fn live_codes(&self, now: u64) -> usize {
        self.file
            .codes
            .iter()
            .filter(|c| c.expires_unix_ms > now)
            .count()
    }

    pub fn live_code(&self, user: Snowflake, now: u64) -> Option<&PairingCode> {
        self.file
            .codes
            .iter()
            .find(|c| c.user_id == user && c.expires_unix_ms > now)
    }

    /// Decides what a stranger's DM gets (pure but for `pick`).
    pub fn on_stranger(
        &mut self,
        user: Snowflake,
        channel: Snowflake,
        now: u64,
        rules: &PairingRules,
        pick: impl FnMut(usize) -> usize,
    ) -> PairingDecision {
        self.prune(now, rules);
        if let Some(&last) = self.last_reply.get(&user) {
            if now.saturating_sub(last) < ms(rules.reply_interval) {
                return PairingDecision::Silent("replied to this user recently");
            }
        }
        if let Some(code) = self.live_code(user, now) {
            let code = code.code.clone();
            self.last_reply.insert(user, now);
            return PairingDecision::Remind(code);
        }
        if self.file.issued.get(&user).map_or(0, Vec::len) >= rules.codes_per_user {
            return PairingDecision::Silent("this user has had enough codes for now");
        }
        if self.live_codes(now) >= rules.max_live_codes {
            return PairingDecision::Silent("too many pairing codes are live");
        }
        let mut pick = pick;
        let code = loop {
            let candidate = generate_code(&mut pick);
            if !self.file.codes.iter().any(|c| c.code == candidate) {
                break candidate;
            }
        };
        self.file.codes.push(PairingCode {
            code: code.clone(),
            user_id: user,
            channel_id: channel,
            issued_unix_ms: now,
            expires_unix_ms: now.saturating_add(ms(rules.ttl)),
        });
        self.file.issued.entry(user).or_default().push(now);
        self.last_reply.insert(user, now);
        PairingDecision::Issue(code)
    }

    /// Removes the codes of users for whom `allowed` holds (at `now`, unix
    /// ms: they are kept as used); returns one per such user (the newest),
    /// to tell them.
    pub fn take_approved(
        &mut self,
        now: u64,
        allowed: impl Fn(Snowflake) -> bool,
    ) -> Vec<PairingCode> {
        let (mut approved, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.file.codes)
            .into_iter()
            .partition(|c| allowed(c.user_id));
        self.file.codes = rest;
        self.file.used.extend(approved.iter().map(|c| UsedCode {
            code: c.code.clone(),
            user_id: c.user_id,
            used_unix_ms: now,
        }));
        let over = self.file.used.len().saturating_sub(USED_CODES_KEPT);
        self.file.used.drain(..over);
        approved.sort_by_key(|c| (c.user_id, std::cmp::Reverse(c.issued_unix_ms)));
        approved.dedup_by_key(|c| c.user_id);
        approved
    }
}

/// The text a stranger gets: the code and how to use it, nothing else.
pub fn code_message(code: &str, ttl: Duration) -> String {
    let minutes = ttl.as_secs().div_ceil(60).max(1);
    format!(
        "This bot only talks to people its operator has approved. To be approved, ask the operator to run:\n`smolcord pair {code}`\n(the code works for {minutes} minute{}).",
        if minutes == 1 { "" } else { "s" }
    )
}

/// The text a user gets once approved.
pub const APPROVED_MESSAGE: &str = "You have been approved: messages you send now reach the agent.";

/// `state_dir/pairing.json`.
pub fn pairing_path(state_dir: &Path) -> PathBuf {
    state_dir.join(PAIRING_FILE)
}

/// Reads the pairing book (the backup if the file is bad); empty if none.
pub async fn read_pairing(state_dir: &Path) -> Result<PairingFile, offload::Error> {
    Ok(
        offload::read_json(&pairing_path(state_dir), Fallback::Backup)
            .await?
            .unwrap_or_default(),
    )
}

/// Writes the pairing book atomically with a backup.
pub(crate) async fn save(state_dir: &Path, file: &PairingFile) -> Result<(), offload::Error> {
    offload::write_json_atomic_with_backup(&pairing_path(state_dir), file).await
}

/// An approved code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    /// The user now allowed.
    pub user_id: Snowflake,
    /// They were allowed already (the code was approved before).
    pub already_allowed: bool,
}

/// Why a code was not approved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PairError {
    /// No such code is pending.
    Unknown(String),
    /// The code expired.
    Expired {
        /// The code.
        code: String,
        /// How long ago.
        ago: Duration,
    },
    /// State could not be read or written.
    State(String),
}

impl std::fmt::Display for PairError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairError::Unknown(code) => write!(
                f,
                "no pending pairing code `{code}` (check the spelling; the user can DM the bot again for a fresh code)"
            ),
            PairError::Expired { code, ago } => write!(
                f,
                "pairing code `{code}` expired {} s ago; ask the user to DM the bot again for a fresh code",
                ago.as_secs()
            ),
            PairError::State(detail) => write!(f, "{detail}"),
        }
    }
}

impl std::error::Error for PairError {}

/// Approves `code` (as typed: case and dashes do not matter) at `now`
/// (unix ms): adds its user to `access.json` (atomic, with backup, restore
/// rule applied first). The running bridge picks the change up by itself.
pub async fn approve_code(state_dir: &Path, code: &str, now: u64) -> Result<Approval, PairError> {
    let wanted = normalize(code);
    let book = read_pairing(state_dir)
        .await
        .map_err(|e| PairError::State(e.to_string()))?;
    let Some(entry) = book.codes.iter().find(|c| c.code == wanted) else {
        // Approved before and taken off the book (its user told): say so
        // while they are still allowed; a revoked user's code stays used.
        let used = book.used.iter().find(|c| c.code == wanted);
        if let Some(used) = used {
            let file = book::load_for_update(state_dir)
                .await
                .map_err(PairError::State)?;
            if file.owner_id == Some(used.user_id) || file.allowed_user_ids.contains(&used.user_id)
            {
                return Ok(Approval {
                    user_id: used.user_id,
                    already_allowed: true,
                });
            }
        }
        return Err(PairError::Unknown(wanted));
    };
    if entry.expires_unix_ms <= now {
        return Err(PairError::Expired {
            code: wanted,
            ago: Duration::from_millis(now - entry.expires_unix_ms),
        });
    }
    let mut file = book::load_for_update(state_dir)
        .await
        .map_err(PairError::State)?;
    let already_allowed =
        file.owner_id == Some(entry.user_id) || !file.allowed_user_ids.insert(entry.user_id);
    if !already_allowed {
        book::save(state_dir, &file)
            .await
            .map_err(|e| PairError::State(e.to_string()))?;
    }
    Ok(Approval {
        user_id: entry.user_id,
        already_allowed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: Snowflake = Snowflake::new(10);
    const C: Snowflake = Snowflake::new(20);

    fn counter() -> impl FnMut(usize) -> usize {
        let mut n = 0;
        move |len| {
            n += 1;
            n % len
        }
    }

    #[test]
    fn codes_use_the_unambiguous_alphabet() {
        let code = generate_code(|n| fastrand::usize(..n));
        assert_eq!(code.len(), CODE_LEN);
        assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)), "{code}");
        for ambiguous in ["0", "O", "1", "I", "L"] {
            assert!(!std::str::from_utf8(CODE_ALPHABET)
                .unwrap()
                .contains(ambiguous));
        }
        assert_eq!(normalize(" ab-cd ef\n"), "ABCDEF");
    }

    #[test]
    fn one_live_code_per_user_and_reply_rate_limit() {
        let rules = PairingRules::default();
        let mut book = PairingBook::default();
        let mut pick = counter();
        let PairingDecision::Issue(code) = book.on_stranger(U, C, 1_000, &rules, &mut pick) else {
            panic!("first DM gets a code");
        };
        // Within the reply interval: silence, and no second code.
        assert!(matches!(
            book.on_stranger(U, C, 2_000, &rules, &mut pick),
            PairingDecision::Silent(_)
        ));
        assert_eq!(book.file.codes.len(), 1);
        // After it: the same code again.
        assert_eq!(
            book.on_stranger(U, C, 1_000 + 61_000, &rules, &mut pick),
            PairingDecision::Remind(code.clone())
        );
        assert_eq!(book.file.codes.len(), 1);
        // After expiry: a new code.
        let later = 1_000 + 601_000;
        let PairingDecision::Issue(second) = book.on_stranger(U, C, later, &rules, &mut pick)
        else {
            panic!("expired code is replaced");
        };
        assert_ne!(second, code);
        // The expired code stays (so `pair` can say "expired") until the
        // window has passed; only one is live.
        assert_eq!(book.file.codes.len(), 2);
        assert_eq!(book.live_codes(later), 1);
        book.prune(later + 600_000 + 3_600_000, &rules);
        assert!(book.file.codes.is_empty());
        // Approval: one notice per user, all their codes gone.
        book.on_stranger(U, C, 10_000_000, &rules, &mut pick);
        book.file.codes.push(PairingCode {
            code: "OLD".into(),
            user_id: U,
            channel_id: C,
            issued_unix_ms: 1,
            expires_unix_ms: 9_999_999,
        });
        let approved = book.take_approved(10_000_001, |u| u == U);
        assert_eq!(approved.len(), 1);
        assert_ne!(approved[0].code, "OLD");
        assert!(book.file.codes.is_empty());
        // Kept as used for the window, then forgotten.
        assert_eq!(book.file.used.len(), 2);
        assert!(book.file.used.iter().all(|c| c.user_id == U));
        book.prune(10_000_001 + 3_600_000, &rules);
        assert!(book.file.used.is_empty());
    }

    #[test]
    fn codes_per_user_and_live_codes_are_capped() {
        let rules = PairingRules {
            ttl: Duration::from_secs(1),
            reply_interval: Duration::ZERO,
            codes_per_user: 2,
            window: Duration::from_secs(3600),
            max_live_codes: 2,
        };
        let mut book = PairingBook::default();
        let mut pick = counter();
        assert!(matches!(
            book.on_stranger(U, C, 0, &rules, &mut pick),
            PairingDecision::Issue(_)
        ));
        assert!(matches!(
            book.on_stranger(U, C, 2_000, &rules, &mut pick),
            PairingDecision::Issue(_)
        ));
        assert_eq!(
            book.on_stranger(U, C, 4_000, &rules, &mut pick),
            PairingDecision::Silent("this user has had enough codes for now")
        );
        // The window passes: allowed again.
        assert!(matches!(
            book.on_stranger(U, C, 3_700_000, &rules, &mut pick),
            PairingDecision::Issue(_)
        ));
        // Live cap across users.
        let now = 3_700_100;
        assert!(matches!(
            book.on_stranger(Snowflake::new(11), C, now, &rules, &mut pick),
            PairingDecision::Issue(_)
        ));
        assert_eq!(
            book.on_stranger(Snowflake::new(12), C, now, &rules, &mut pick),
            PairingDecision::Silent("too many pairing codes are live")
        );
    }

    #[test]
    fn code_message_discloses_only_the_code() {
        let text = code_message("ABCDEFGH", Duration::from_secs(600));
        assert!(text.contains("smolcord pair ABCDEFGH"), "{text}");
        assert!(text.contains("10 minutes"), "{text}");
    }

    #[test]
    fn approve_adds_the_user_and_refuses_wrong_or_expired_codes() {
        let dir = tempfile::tempdir().unwrap();
        smol::block_on(async {
            let rules = PairingRules::default();
            let mut book = PairingBook::default();
            let PairingDecision::Issue(code) = book.on_stranger(U, C, 1_000, &rules, counter())
            else {
                panic!()
            };
            save(dir.path(), &book.file).await.unwrap();
            assert!(matches!(
                approve_code(dir.path(), "ZZZZZZZZ", 2_000).await,
                Err(PairError::Unknown(_))
            ));
            let expired = approve_code(dir.path(), &code, 1_000 + 600_000 + 5_000).await;
            assert!(
                matches!(&expired, Err(PairError::Expired { ago, .. }) if ago.as_secs() == 5),
                "{expired:?}"
            );
            let typed = format!("{}-{}", &code[..4], code[4..].to_lowercase());
            let ok = approve_code(dir.path(), &typed, 2_000).await.unwrap();
            assert_eq!(
                ok,
                Approval {
                    user_id: U,
                    already_allowed: false
                }
            );
            let access = book::read_access(dir.path()).await.unwrap().unwrap();
            assert!(access.allowed_user_ids.contains(&U));
            let again = approve_code(dir.path(), &code, 3_000).await.unwrap();
            assert!(again.already_allowed);
        });
    }
}
