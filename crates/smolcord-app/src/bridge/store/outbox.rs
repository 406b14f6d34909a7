//! The outbox: what the bridge has to send and how far it got, on disk, so
//! that a crash neither sends a reply twice nor loses it.
//!
//! ```text
//! outbox/reply-CHANNEL-MESSAGE.json  a reply on record: the agent's output
//!                                    (or the notice that it failed), written
//!                                    before its first part is sent
//! outbox/result-HASH.json            how far a spool result of more than one
//!                                    part got (its text stays in its file)
//! ```
//!
//! A record lists the parts already sent, and is saved (fsync'd, through
//! offload) after each part that has another after it, before that one goes
//! out. Each part carries a nonce derived from the record
//! ([`crate::bridge::store::nonce`]), so a part that went out just before a crash, but not
//! into the record, is not created again when it is sent again — within
//! Discord's nonce window of a few minutes. The record, not the nonce,
//! carries everything past that window.
//!
//! A reply record ends when its message is marked processed on disk
//! (`runtime.json`); a result record when the result is archived. Records
//! are bounded by the work in flight: one reply per channel being handled
//! (at most `MAX_JOBS` of the job queues) and one result per delivery worker;
//! what a crash leaves is finished (replies) or pruned (results) at the
//! next start.

use crate::bridge::store::nonce;
use crate::bridge::store::spool;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use smolcord::offload::{self, FileKind};
use smolcord::protocol::Snowflake;
use smolcord::rest::Nonce;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The outbox directory inside the state dir.
pub const OUTBOX_DIR: &str = "outbox";

/// A record larger than this is not read (a reply's text is at most the
/// agent's 1 MiB output cap; JSON escaping can grow it up to sixfold).
const MAX_RECORD_BYTES: u64 = 8 << 20;

/// The parts of a reply or result that went out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sent {
    /// The ids of the messages created (or edited), in part order.
    pub message_ids: Vec<Snowflake>,
    /// The reply was to go as a file, the upload was refused for good, and
    /// it goes as (at most `delivery`'s `MAX_FALLBACK_MESSAGES`) text
    /// messages instead: recorded before the first of them, so a restart
    /// goes on with the text, not with the file.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub as_text: bool,
}

impl Sent {
    /// How many parts went out.
    pub fn parts(&self) -> usize {
        self.message_ids.len()
    }
}

/// A record in the outbox.
pub(crate) trait Record: Serialize {
    /// Its file name in the outbox.
    fn file_name(&self) -> String;
    /// The nonce of part `part`.
    fn nonce(&self, part: usize) -> Nonce;
    /// The nonce of the notice that it could not be delivered.
    fn undelivered_nonce(&self) -> Nonce;
    /// What went out so far.
    fn sent(&mut self) -> &mut Sent;
    /// The message its first part replies to (Discord's reply, quoting
    /// it, no ping): in a DM and a server channel alike, so the chat itself
    /// records what was answered (the read-back's ledger, and several
    /// conversations sharing a server channel). None in its thread, which
    /// the message heads already.
    fn replies_to(&self) -> Option<Snowflake> {
        None
    }
}

/// A reply on record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReplyRecord {
    /// Where it goes.
    pub channel_id: Snowflake,
    /// The message it answers.
    pub message_id: Snowflake,
    /// The server of `channel_id`; absent for a DM. A reply in a server
    /// channel goes out as a Discord reply to `message_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<Snowflake>,
    /// Thread mode: the thread started from the message, where the reply
    /// goes instead of `channel_id` (the record stays named by the
    /// message's channel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliver_to: Option<Snowflake>,
    /// The agent's output, or the notice telling the user the agent failed.
    pub content: String,
    /// A last line about the reply itself (that it was cut, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `content` is a notice that the agent failed: no DM fallback for it.
    #[serde(default)]
    pub notice: bool,
    /// The "working…" message the first part replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<Snowflake>,
    /// What went out so far.
    #[serde(default)]
    pub sent: Sent,
}

impl Record for ReplyRecord {
    fn replies_to(&self) -> Option<Snowflake> {
        // In its thread, the message heads the thread already.
        self.deliver_to.is_none().then_some(self.message_id)
    }

    fn file_name(&self) -> String {
        reply_file_name(self.channel_id, self.message_id)
    }

    fn nonce(&self, part: usize) -> Nonce {
        nonce::reply_part(self.message_id, part)
    }

    fn undelivered_nonce(&self) -> Nonce {
        nonce::notice(self.message_id, nonce::Notice::Undelivered)
    }

    fn sent(&mut self) -> &mut Sent {
        &mut self.sent
    }
}

/// How far a spool result got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ResultRecord {
    /// The result's file name in `spool/results/`.
    pub file: String,
    /// The [`nonce::fingerprint`] of its name, channel and content: the
    /// record applies to that result only, not to a later file of the same
    /// name.
    pub fingerprint: u64,
    /// The message its first part replies to: the task's, for a result
    /// named after a task of a server channel (absent in records written
    /// before replies, which go on as plain messages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<Snowflake>,
    /// What went out so far.
    #[serde(default)]
    pub sent: Sent,
}

impl ResultRecord {
    /// A record for the result in `file`, nothing sent yet.
    pub fn new(file: &str, channel: Snowflake, content: &str) -> ResultRecord {
        ResultRecord {
            file: file.to_owned(),
            fingerprint: nonce::fingerprint(&[
                file.as_bytes(),
                channel.to_string().as_bytes(),
                content.as_bytes(),
            ]),
            reply_to: None,
            sent: Sent::default(),
        }
    }
}

impl Record for ResultRecord {
    fn replies_to(&self) -> Option<Snowflake> {
        self.reply_to
    }

    fn file_name(&self) -> String {
        result_file_name(&self.file)
    }

    fn nonce(&self, part: usize) -> Nonce {
        nonce::result_part(self.fingerprint, part)
    }

    fn undelivered_nonce(&self) -> Nonce {
        nonce::result_undelivered(self.fingerprint)
    }

    fn sent(&mut self) -> &mut Sent {
        &mut self.sent
    }
}

fn reply_file_name(channel: Snowflake, message: Snowflake) -> String {
    format!("reply-{channel}-{message}.json")
}

fn result_file_name(file: &str) -> String {
    // Result names are the agent's (any length): hashed to a safe one.
    format!(
        "result-{:016x}.json",
        nonce::fingerprint(&[file.as_bytes()])
    )
}

/// A reply record's channel and message, from its file name.
fn parse_reply_name(name: &OsStr) -> Option<(Snowflake, Snowflake)> {
    let rest = name
        .to_str()?
        .strip_prefix("reply-")?
        .strip_suffix(".json")?;
    let (channel, message) = rest.split_once('-')?;
    Some((channel.parse().ok()?, message.parse().ok()?))
}

fn is_reply_name(name: &OsStr) -> bool {
    parse_reply_name(name).is_some()
}

fn is_result_name(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.starts_with("result-") && n.ends_with(".json"))
}

/// The outbox directory and its records.
#[derive(Clone, Debug)]
pub(crate) struct Outbox {
    dir: PathBuf,
}

impl Outbox {
    /// The outbox under `state_dir`.
    pub fn new(state_dir: &Path) -> Outbox {
        Outbox {
            dir: state_dir.join(OUTBOX_DIR),
        }
    }

    pub async fn create_dir(&self) -> Result<(), offload::Error> {
        offload::create_dir_all(&self.dir).await
    }

    /// Writes `record` atomically and fsync'd.
    pub async fn save<R: Record>(&self, record: &R) -> Result<(), offload::Error> {
        offload::write_json_atomic(&self.dir.join(record.file_name()), record).await
    }

    /// The reply on record for `message`, if any.
    pub async fn reply(
        &self,
        channel: Snowflake,
        message: Snowflake,
    ) -> Result<Option<ReplyRecord>, offload::Error> {
        self.read(&reply_file_name(channel, message)).await
    }

    /// The progress of the result in `file` with this content, if any (a
    /// record of another result by that name is no progress of this one).
    pub async fn result(
        &self,
        file: &str,
        channel: Snowflake,
        content: &str,
    ) -> Result<ResultRecord, offload::Error> {
        let fresh = ResultRecord::new(file, channel, content);
        let on_disk: Option<ResultRecord> = self.read(&fresh.file_name()).await?;
        Ok(on_disk
            .filter(|r| r.file == fresh.file && r.fingerprint == fresh.fingerprint)
            .unwrap_or(fresh))
    }

    /// Removes `record`'s file (missing is fine).
    pub async fn remove<R: Record>(&self, record: &R) -> Result<(), offload::Error> {
        offload::remove_file(&self.dir.join(record.file_name())).await
    }

    /// Removes the reply record of `message` (missing is fine).
    pub async fn remove_reply(
        &self,
        channel: Snowflake,
        message: Snowflake,
    ) -> Result<(), offload::Error> {
        offload::remove_file(&self.dir.join(reply_file_name(channel, message))).await
    }

    /// Renames the (unreadable) reply record of `message` to `….json.bad`,
    /// kept for the operator and no longer taken for a record.
    pub async fn set_aside_reply(
        &self,
        channel: Snowflake,
        message: Snowflake,
    ) -> Result<PathBuf, offload::Error> {
        let name = reply_file_name(channel, message);
        let aside = self.dir.join(format!("{name}.bad"));
        offload::rename_durable(&self.dir.join(name), &aside).await?;
        Ok(aside)
    }

    /// The replies on record (channel, message), at most `limit`, oldest
    /// name first, and whether more are left.
    pub async fn replies(
        &self,
        limit: usize,
    ) -> Result<(Vec<(Snowflake, Snowflake)>, bool), offload::Error> {
        let (paths, more) = offload::list_dir_page(&self.dir, None, limit, is_reply_name).await?;
        let replies = paths
            .iter()
            .filter_map(|p| p.file_name().and_then(parse_reply_name))
            .collect();
        Ok((replies, more))
    }

    /// Removes result records whose result is gone from `results` (it was
    /// archived, or taken back by the agent, just before a crash), at most
    /// `limit` per call; returns how many.
    pub async fn prune_results(
        &self,
        results: &Path,
        limit: usize,
    ) -> Result<usize, offload::Error> {
        let (paths, _) = offload::list_dir_page(&self.dir, None, limit, is_result_name).await?;
        let mut pruned = 0;
        for path in paths {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let record: Option<ResultRecord> = match self.read(&name).await {
                Ok(record) => record,
                Err(e) => {
                    log::warn!("{e}; removing it");
                    None
                }
            };
            let keep = match &record {
                Some(r) if spool::is_result_name(r.file.as_ref()) => {
                    offload::exists(&results.join(&r.file)).await?
                }
                _ => false,
            };
            if !keep {
                offload::remove_file(&path).await?;
                pruned += 1;
            }
        }
        Ok(pruned)
    }

    async fn read<T: DeserializeOwned + Send + 'static>(
        &self,
        name: &str,
    ) -> Result<Option<T>, offload::Error> {
        let path = self.dir.join(name);
        let shown = path.clone();
        let parsed = offload::read_capped(&path, MAX_RECORD_BYTES, FileKind::Regular, |bytes| {
            serde_json::from_slice::<T>(&bytes)
        });
        match parsed.await? {
            None => Ok(None),
            Some(Ok(record)) => Ok(Some(record)),
            Some(Err(source)) => Err(offload::Error::BadJson {
                path: shown,
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(channel: u64, message: u64) -> ReplyRecord {
        ReplyRecord {
            guild_id: None,
            deliver_to: None,
            channel_id: Snowflake::new(channel),
            message_id: Snowflake::new(message),
            content: "hello".into(),
            note: None,
            notice: false,
            placeholder: None,
            sent: Sent::default(),
        }
    }

    #[test]
    fn replies_are_saved_listed_read_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new(dir.path());
        smol::block_on(async {
            outbox.create_dir().await.unwrap();
            let mut record = reply(7, 100);
            outbox.save(&record).await.unwrap();
            record.sent.message_ids.push(Snowflake::new(555));
            outbox.save(&record).await.unwrap();
            outbox.save(&reply(8, 200)).await.unwrap();
            let (listed, more) = outbox.replies(10).await.unwrap();
            assert_eq!(
                listed,
                [
                    (Snowflake::new(7), Snowflake::new(100)),
                    (Snowflake::new(8), Snowflake::new(200))
                ]
            );
            assert!(!more);
            let back = outbox.reply(Snowflake::new(7), Snowflake::new(100));
            assert_eq!(back.await.unwrap(), Some(record.clone()));
            let (one, more) = outbox.replies(1).await.unwrap();
            assert_eq!((one.len(), more), (1, true));
            outbox.remove(&record).await.unwrap();
            let gone = outbox.reply(Snowflake::new(7), Snowflake::new(100));
            assert_eq!(gone.await.unwrap(), None);
            assert_eq!(outbox.replies(10).await.unwrap().0.len(), 1);
        });
    }

    #[test]
    fn a_result_record_applies_to_its_own_result_only_and_is_pruned_when_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new(dir.path());
        let results = dir.path().join("results");
        let channel = Snowflake::new(5);
        smol::block_on(async {
            outbox.create_dir().await.unwrap();
            offload::create_dir_all(&results).await.unwrap();
            let mut record = outbox.result("a.json", channel, "one").await.unwrap();
            assert_eq!(record.sent.parts(), 0);
            record.sent.message_ids.push(Snowflake::new(1));
            outbox.save(&record).await.unwrap();
            assert_eq!(
                outbox.result("a.json", channel, "one").await.unwrap(),
                record
            );
            // Another result under the same name starts from nothing.
            let other = outbox.result("a.json", channel, "two").await.unwrap();
            assert_eq!(other.sent.parts(), 0);
            assert_ne!(other.nonce(0), record.nonce(0));

            // Its file still waiting: kept. Gone: pruned.
            offload::write_bytes_atomic(&results.join("a.json"), b"{}".to_vec())
                .await
                .unwrap();
            assert_eq!(outbox.prune_results(&results, 10).await.unwrap(), 0);
            offload::remove_file(&results.join("a.json")).await.unwrap();
            assert_eq!(outbox.prune_results(&results, 10).await.unwrap(), 1);
            assert_eq!(
                outbox
                    .result("a.json", channel, "one")
                    .await
                    .unwrap()
                    .sent
                    .parts(),
                0
            );
        });
    }

    #[test]
    fn the_switch_to_text_is_on_record_and_absent_from_older_records() {
        let mut record = reply(7, 100);
        assert!(!serde_json::to_string(&record).unwrap().contains("as_text"));
        record.sent.as_text = true;
        let text = serde_json::to_string(&record).unwrap();
        let back: ReplyRecord = serde_json::from_str(&text).unwrap();
        assert!(back.sent.as_text);
        // A record written before the field existed reads as "not switched".
        let old =
            r#"{"channel_id":"7","message_id":"100","content":"x","sent":{"message_ids":["1"]}}"#;
        let old: ReplyRecord = serde_json::from_str(old).unwrap();
        assert!(!old.sent.as_text);
    }

    #[test]
    fn a_bad_record_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let outbox = Outbox::new(dir.path());
        smol::block_on(async {
            outbox.create_dir().await.unwrap();
            let path = dir.path().join(OUTBOX_DIR).join("reply-1-2.json");
            offload::write_bytes_atomic(&path, b"{oops".to_vec())
                .await
                .unwrap();
            let e = outbox
                .reply(Snowflake::new(1), Snowflake::new(2))
                .await
                .unwrap_err();
            assert!(e.to_string().contains("reply-1-2.json"), "{e}");
        });
    }
}
