//! Who may reach the agent: `access.json` (owner + allowed users), merged
//! with the config's `owner_id` / `allowed_user_ids`.
//!
//! Every write keeps a backup (`access.json.bak`, through
//! [`offload::write_json_atomic_with_backup`]). Before any access decision
//! after start-up or READY the file is read with the *restore rule*: if
//! `access.json` cannot be read or parsed (missing, empty, corrupt) but the
//! backup holds somebody, the backup is written back and used. A wiped or
//! half-restored state dir must never boot into pairing or TOFU with the
//! owner de-authorised. A file that parses is the operator's word, even
//! when it allows nobody (a revoke, the owner coming from the config): the
//! backup, one write older, may still hold the revoked user. A corrupt file
//! with no usable backup keeps the config's users only and turns TOFU off
//! until an operator fixes it.

use serde::{Deserialize, Serialize};
use smolcord::offload::{self, Fallback};
use smolcord::protocol::Snowflake;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The file name inside the state dir.
pub const ACCESS_FILE: &str = "access.json";

/// What `access.json` holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessFile {
    /// The owner (may `!restart`; the only one answered in safe mode).
    #[serde(default)]
    pub owner_id: Option<Snowflake>,
    /// Other users allowed to reach the agent.
    #[serde(default)]
    pub allowed_user_ids: BTreeSet<Snowflake>,
}

impl AccessFile {
    /// Nobody is in it.
    pub fn is_empty(&self) -> bool {
        self.owner_id.is_none() && self.allowed_user_ids.is_empty()
    }
}

/// How one of the two files read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FileRead {
    Missing,
    /// Zero bytes or only white space (a torn restore, a `> access.json`).
    Blank,
    Corrupt(String),
    Good(AccessFile),
}

/// What to do with the primary and backup readings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// Use the primary as it is.
    Primary(AccessFile),
    /// Write the backup back over the primary, then use it.
    Restore(AccessFile),
    /// Nothing usable and nothing lost: start empty.
    Fresh,
    /// The primary is corrupt and there is no usable backup: keep the
    /// config's users only, no TOFU, never overwrite the file.
    Unreadable(String),
}

/// The restore rule (pure).
pub(crate) fn choose(primary: FileRead, backup: FileRead) -> Choice {
    let backup_people = match backup {
        FileRead::Good(file) if !file.is_empty() => Some(file),
        _ => None,
    };
    match (primary, backup_people) {
        (FileRead::Good(file), _) => Choice::Primary(file),
        (_, Some(backup)) => Choice::Restore(backup),
        (FileRead::Missing | FileRead::Blank, None) => Choice::Fresh,
        (FileRead::Corrupt(why), None) => Choice::Unreadable(why),
    }
}

pub(crate) fn classify(path: &Path, bytes: Option<Vec<u8>>) -> FileRead {
    let Some(bytes) = bytes else {
        return FileRead::Missing;
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return FileRead::Blank;
    }
    match serde_json::from_slice::<AccessFile>(&bytes) {
        Ok(file) => FileRead::Good(file),
        Err(e) => FileRead::Corrupt(format!("{}: {e}", path.display())),
    }
}

/// `state_dir/access.json`.
pub fn access_path(state_dir: &Path) -> PathBuf {
    state_dir.join(ACCESS_FILE)
}

fn backup_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    PathBuf::from(name)
}

/// Reads access with the restore rule, writing the backup back when it is
/// used. Returns the file (or why it is unreadable) and the primary's bytes
/// as they now are on disk (for change detection).
pub(crate) async fn load_with_restore(
    state_dir: &Path,
) -> Result<(Result<AccessFile, String>, Option<Vec<u8>>), offload::Error> {
    let path = access_path(state_dir);
    let primary_bytes = offload::read_bytes(&path).await?;
    let backup = classify(
        &backup_of(&path),
        offload::read_bytes(&backup_of(&path)).await?,
    );
    let primary = classify(&path, primary_bytes.clone());
    match choose(primary, backup) {
        Choice::Primary(file) => Ok((Ok(file), primary_bytes)),
        Choice::Fresh => Ok((Ok(AccessFile::default()), primary_bytes)),
        Choice::Restore(file) => {
            log::warn!(
                "{} is missing, empty or cannot be parsed but its backup names the owner/allowed users: restoring it from {}",
                path.display(),
                backup_of(&path).display()
            );
            // Plain write: a "with backup" write would copy the bad primary
            // over the good backup if it happened to be valid JSON (`{}`).
            offload::write_json_atomic(&path, &file).await?;
            let bytes = offload::read_bytes(&path).await?;
            Ok((Ok(file), bytes))
        }
        Choice::Unreadable(why) => Ok((Err(why), primary_bytes)),
    }
}

/// Writes access state atomically, keeping the previous file as the backup.
pub(crate) async fn save(state_dir: &Path, file: &AccessFile) -> Result<(), offload::Error> {
    offload::write_json_atomic_with_backup(&access_path(state_dir), file).await
}

/// Reads access for a read-modify-write outside the bridge (`smolcord
/// pair`): the restore rule applies, and a corrupt file without backup is an
/// error (never overwritten).
pub(crate) async fn load_for_update(state_dir: &Path) -> Result<AccessFile, String> {
    match load_with_restore(state_dir).await {
        Ok((Ok(file), _)) => Ok(file),
        Ok((Err(why), _)) => Err(format!(
            "access state is unreadable ({why}) and has no usable backup; fix or remove it first"
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Reads `access.json` as it is, with the backup as a fall-back (for tools).
pub async fn read_access(state_dir: &Path) -> Result<Option<AccessFile>, offload::Error> {
    offload::read_json(&access_path(state_dir), Fallback::Backup).await
}

/// Someone's standing with the bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The owner.
    Owner,
    /// An allowed user.
    Allowed,
    /// Everybody else.
    Stranger,
}

/// The access state in memory: the file merged with the config.
#[derive(Clone, Debug)]
pub(crate) struct Access {
    pub file: AccessFile,
    config_owner: Option<Snowflake>,
    config_allowed: BTreeSet<Snowflake>,
    /// TOFU is off: the file was unreadable.
    pub tofu_blocked: bool,
    /// The primary's bytes when last read (change detection).
    last_bytes: Option<Vec<u8>>,
}

impl Access {
    pub fn new(config_owner: Option<Snowflake>, config_allowed: BTreeSet<Snowflake>) -> Access {
        Access {
            file: AccessFile::default(),
            config_owner,
            config_allowed,
            tofu_blocked: false,
            last_bytes: None,
        }
    }

    /// Applies a [`load_with_restore`] result.
    pub fn apply_load(&mut self, loaded: Result<AccessFile, String>, bytes: Option<Vec<u8>>) {
        match loaded {
            Ok(file) => {
                self.file = file;
                self.tofu_blocked = false;
            }
            Err(why) => {
                log::error!(
                    "access state unreadable and no usable backup ({why}); answering only the configured users, TOFU off, until it is fixed"
                );
                self.file = AccessFile::default();
                self.tofu_blocked = true;
            }
        }
        self.last_bytes = bytes;
    }

    /// Re-reads the primary if its bytes changed (`smolcord pair`, an
    /// operator's edit). A missing or bad file keeps the state in memory:
    /// the last good state wins until READY applies the restore rule.
    /// Returns whether anything changed.
    pub fn apply_reread(&mut self, path: &Path, bytes: Option<Vec<u8>>) -> bool {
        if bytes == self.last_bytes {
            return false;
        }
        match classify(path, bytes.clone()) {
            FileRead::Good(file) => {
                self.last_bytes = bytes;
                let changed = file != self.file;
                self.file = file;
                self.tofu_blocked = false;
                if changed {
                    log::info!("access state changed on disk: {}", self.summary());
                }
                changed
            }
            other => {
                log::warn!(
                    "{} changed but is not usable ({other:?}); keeping the access state in memory",
                    path.display()
                );
                self.last_bytes = bytes;
                false
            }
        }
    }

    /// Who is in, config and file merged: "owner set (config.json), 2
    /// allowed user(s)".
    pub fn summary(&self) -> String {
        let owner = match (self.config_owner, self.file.owner_id) {
            (Some(_), _) => "owner set (config.json)",
            (None, Some(_)) => "owner set (access.json)",
            (None, None) => "owner unset",
        };
        let allowed = self
            .config_allowed
            .union(&self.file.allowed_user_ids)
            .count();
        format!("{owner}, {allowed} allowed user(s)")
    }

    /// Everyone answered: the owner first, then the allowed users.
    pub fn answered_users(&self) -> Vec<Snowflake> {
        let allowed = self.config_allowed.union(&self.file.allowed_user_ids);
        self.owner().into_iter().chain(allowed.copied()).collect()
    }

    pub fn owner(&self) -> Option<Snowflake> {
        self.config_owner.or(self.file.owner_id)
    }

    pub fn role(&self, user: Snowflake) -> Role {
        if self.config_owner == Some(user) || self.file.owner_id == Some(user) {
            Role::Owner
        } else if self.config_allowed.contains(&user) || self.file.allowed_user_ids.contains(&user)
        {
            Role::Allowed
        } else {
            Role::Stranger
        }
    }

    /// TOFU may make someone the owner now.
    pub fn tofu_open(&self, tofu: bool) -> bool {
        tofu && !self.tofu_blocked && self.owner().is_none()
    }

    pub fn remember_written(&mut self, bytes: Option<Vec<u8>>) {
        self.last_bytes = bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn people(owner: u64) -> AccessFile {
        AccessFile {
            owner_id: Some(Snowflake::new(owner)),
            allowed_user_ids: BTreeSet::new(),
        }
    }

    #[test]
    fn restore_rule() {
        let good = FileRead::Good(people(1));
        let other = FileRead::Good(people(2));
        let nobody = FileRead::Good(AccessFile::default());
        // A good primary wins over the backup.
        assert_eq!(
            choose(good.clone(), other.clone()),
            Choice::Primary(people(1))
        );
        // Missing, blank or corrupt primary + a backup with people: restore.
        for primary in [
            FileRead::Missing,
            FileRead::Blank,
            FileRead::Corrupt("x".into()),
        ] {
            assert_eq!(choose(primary, other.clone()), Choice::Restore(people(2)));
        }
        // A primary that validly allows nobody is the operator's choice
        // (a revoke): the backup, one write older, is not brought back.
        assert_eq!(
            choose(nobody.clone(), other.clone()),
            Choice::Primary(AccessFile::default())
        );
        // No usable backup.
        assert_eq!(choose(FileRead::Missing, FileRead::Missing), Choice::Fresh);
        assert_eq!(choose(FileRead::Blank, FileRead::Blank), Choice::Fresh);
        assert_eq!(
            choose(nobody.clone(), FileRead::Corrupt("b".into())),
            Choice::Primary(AccessFile::default())
        );
        assert_eq!(
            choose(FileRead::Corrupt("x".into()), nobody),
            Choice::Unreadable("x".into())
        );
    }

    #[test]
    fn classify_files() {
        let p = Path::new("access.json");
        assert_eq!(classify(p, None), FileRead::Missing);
        assert_eq!(classify(p, Some(b" \n".to_vec())), FileRead::Blank);
        assert!(
            matches!(classify(p, Some(b"{\"owner_id\":".to_vec())), FileRead::Corrupt(m) if m.contains("access.json"))
        );
        assert!(matches!(
            classify(p, Some(b"{\"bogus\":1}".to_vec())),
            FileRead::Corrupt(_)
        ));
        assert_eq!(
            classify(
                p,
                Some(br#"{"owner_id":"5","allowed_user_ids":["6"]}"#.to_vec())
            ),
            FileRead::Good(AccessFile {
                owner_id: Some(Snowflake::new(5)),
                allowed_user_ids: [Snowflake::new(6)].into(),
            })
        );
    }

    #[test]
    fn roles_merge_config_and_file() {
        let mut access = Access::new(Some(Snowflake::new(1)), [Snowflake::new(2)].into());
        access.apply_load(
            Ok(AccessFile {
                owner_id: None,
                allowed_user_ids: [Snowflake::new(3)].into(),
            }),
            None,
        );
        assert_eq!(access.role(Snowflake::new(1)), Role::Owner);
        assert_eq!(access.role(Snowflake::new(2)), Role::Allowed);
        assert_eq!(access.role(Snowflake::new(3)), Role::Allowed);
        assert_eq!(access.role(Snowflake::new(4)), Role::Stranger);
        assert!(!access.tofu_open(true), "config owner set");
        let mut open = Access::new(None, BTreeSet::new());
        open.apply_load(Ok(AccessFile::default()), None);
        assert!(open.tofu_open(true));
        assert!(!open.tofu_open(false));
        open.apply_load(Err("bad".into()), None);
        assert!(!open.tofu_open(true), "unreadable state blocks TOFU");
    }

    #[test]
    fn the_summary_counts_the_config_owner_and_users() {
        // The owner from config.json, access.json with allowed users only
        // (what `smolcord pair` writes): the owner is set.
        let mut access = Access::new(Some(Snowflake::new(1)), [Snowflake::new(2)].into());
        let file = AccessFile {
            owner_id: None,
            allowed_user_ids: [Snowflake::new(2), Snowflake::new(3)].into(),
        };
        assert!(access.apply_reread(
            Path::new("access.json"),
            Some(serde_json::to_vec(&file).unwrap())
        ));
        assert_eq!(
            access.summary(),
            "owner set (config.json), 2 allowed user(s)"
        );
        let mut tofu = Access::new(None, BTreeSet::new());
        tofu.apply_load(Ok(people(5)), None);
        assert_eq!(tofu.summary(), "owner set (access.json), 0 allowed user(s)");
        assert_eq!(
            Access::new(None, BTreeSet::new()).summary(),
            "owner unset, 0 allowed user(s)"
        );
    }

    #[test]
    fn reread_keeps_last_good_state() {
        let p = Path::new("access.json");
        let mut access = Access::new(None, BTreeSet::new());
        access.apply_load(Ok(people(1)), Some(b"old".to_vec()));
        assert!(!access.apply_reread(p, Some(b"old".to_vec())));
        assert!(!access.apply_reread(p, None));
        assert_eq!(access.role(Snowflake::new(1)), Role::Owner);
        let new = serde_json::to_vec(&AccessFile {
            owner_id: Some(Snowflake::new(1)),
            allowed_user_ids: [Snowflake::new(9)].into(),
        })
        .unwrap();
        assert!(access.apply_reread(p, Some(new)));
        assert_eq!(access.role(Snowflake::new(9)), Role::Allowed);
    }

    #[test]
    fn load_restores_a_wiped_primary_from_the_backup() {
        let dir = tempfile::tempdir().unwrap();
        smol::block_on(async {
            save(dir.path(), &people(7)).await.unwrap();
            // Second write: the first becomes the backup.
            save(dir.path(), &people(7)).await.unwrap();
            offload::write_bytes_atomic(&access_path(dir.path()), Vec::new())
                .await
                .unwrap();
            let (file, bytes) = load_with_restore(dir.path()).await.unwrap();
            assert_eq!(file, Ok(people(7)));
            let on_disk: AccessFile = serde_json::from_slice(&bytes.unwrap()).unwrap();
            assert_eq!(on_disk, people(7));
        });
    }
}
