//! The spool: files through which a long-running agent takes tasks and
//! gives results.
//!
//! ```text
//! spool/tasks/ID.json      a task, written atomically by the bridge
//! spool/results/ID.json    {"channel_id": "...", "content": "..."} from the agent
//! spool/archive/ID.json    a result after delivery, with the outcome
//! spool/malformed/ID.json  a result file that is not a valid result, kept as is
//! spool/rejected/ID.json   a result file refused unread: larger than
//!                          `max_result_bytes`, or not a regular file (a
//!                          symbolic link is never followed)
//! ```
//!
//! Agents must write results atomically (write a temp file, then rename it
//! into `results/`): files whose names start with `.` or do not end in
//! `.json` are not picked up, so a half-written file is never delivered.

use serde::{Deserialize, Serialize};
use smolcord::offload;
use smolcord::protocol::{Attachment, Message, Snowflake};
use std::path::{Path, PathBuf};

/// The spool's directories.
#[derive(Clone, Debug)]
pub struct Spool {
    /// `spool/tasks`.
    pub tasks: PathBuf,
    /// `spool/results`.
    pub results: PathBuf,
    /// `spool/archive`.
    pub archive: PathBuf,
    /// `spool/malformed`.
    pub malformed: PathBuf,
    /// `spool/rejected`.
    pub rejected: PathBuf,
}

/// A message handed to the agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Task id (the message id).
    pub id: String,
    /// Where the message came from (and where the reply goes).
    pub channel_id: Snowflake,
    /// The server the channel belongs to; absent for a DM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guild_id: Option<Snowflake>,
    /// Thread mode: the thread started from the message, where the answer
    /// goes (a spooled result names it as its `channel_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<Snowflake>,
    /// The message.
    pub message_id: Snowflake,
    /// Who sent it.
    pub author: TaskAuthor,
    /// The text for the agent: the message text and the transcripts.
    pub text: String,
    /// The message text alone.
    pub content: String,
    /// Transcripts of voice notes.
    pub transcripts: Vec<Transcript>,
    /// Attachments: each downloaded to `path`, or `left_out` saying why
    /// not (the URLs are signed and expire).
    pub attachments: Vec<TaskAttachment>,
    /// When the bridge received it (unix ms).
    pub received_unix_ms: u64,
    /// Where the agent may leave files to send with its reply (the
    /// task's `out/` directory); absent if it could not be made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_dir: Option<String>,
    /// The message this one replies to, as Discord sent it along (its
    /// text is empty where Discord withholds it: see docs/agent.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replied_to: Option<ContextMessage>,
    /// The messages before this one in its channel, oldest first (the
    /// channel's `context_messages`; none by default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<ContextMessage>,
}

/// A message around the task's: the one it replies to, or one before it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextMessage {
    /// Message id.
    pub id: Snowflake,
    /// Who wrote it.
    pub author: TaskAuthor,
    /// Written by this bot (one of its own replies).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_bot: bool,
    /// Its text.
    pub content: String,
    /// Its attachments (the URLs are signed and expire).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<TaskAttachment>,
}

impl ContextMessage {
    /// `message` as context; `bot`: this bot's user id.
    pub fn new(message: &Message, bot: Option<Snowflake>) -> ContextMessage {
        ContextMessage {
            id: message.id,
            author: TaskAuthor::of(message),
            by_bot: bot == Some(message.author.id),
            content: message.content.clone(),
            attachments: message
                .attachments
                .iter()
                .map(TaskAttachment::from)
                .collect(),
        }
    }
}

impl TaskAuthor {
    /// The author of `message`.
    pub fn of(message: &Message) -> TaskAuthor {
        TaskAuthor {
            id: message.author.id,
            username: message.author.username.clone(),
            global_name: message.author.global_name.clone(),
        }
    }
}

/// The author of a task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAuthor {
    /// User id.
    pub id: Snowflake,
    /// User name.
    pub username: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_name: Option<String>,
}

/// One transcript.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    /// The attachment it came from.
    pub attachment_id: Snowflake,
    /// The text.
    pub text: String,
}

/// An attachment, as the agent sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskAttachment {
    /// Attachment id.
    pub id: Snowflake,
    /// File name.
    pub filename: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Size in bytes.
    pub size: u64,
    /// CDN URL.
    pub url: String,
    /// The downloaded file, when it was downloaded (an absolute path in
    /// the task's `in/` directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Why it was not downloaded, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
}

impl From<&Attachment> for TaskAttachment {
    fn from(a: &Attachment) -> Self {
        TaskAttachment {
            id: a.id,
            filename: a.filename.clone(),
            content_type: a.content_type.clone(),
            size: a.size,
            url: a.url.clone(),
            path: None,
            left_out: None,
        }
    }
}

/// The text the agent gets: the message text, then each transcript.
pub fn task_text(content: &str, transcripts: &[Transcript]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if !content.trim().is_empty() {
        parts.push(content.trim());
    }
    parts.extend(
        transcripts
            .iter()
            .map(|t| t.text.trim())
            .filter(|t| !t.is_empty()),
    );
    parts.join("\n\n")
}

impl Task {
    /// A task for `message` with its transcripts.
    pub fn new(message: &Message, transcripts: Vec<Transcript>, received_unix_ms: u64) -> Task {
        Task {
            id: message.id.to_string(),
            channel_id: message.channel_id,
            guild_id: message.guild_id,
            thread_id: None,
            message_id: message.id,
            author: TaskAuthor::of(message),
            text: task_text(&message.content, &transcripts),
            content: message.content.clone(),
            transcripts,
            attachments: message
                .attachments
                .iter()
                .map(TaskAttachment::from)
                .collect(),
            received_unix_ms,
            output_dir: None,
            replied_to: None,
            context: Vec::new(),
        }
    }
}

/// A result file's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpoolResult {
    /// Where to send it.
    pub channel_id: Snowflake,
    /// What to send.
    pub content: String,
}

/// How a reply or result ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Delivered to the channel.
    Delivered,
    /// Delivery failed for good; the DM fallback command succeeded.
    FallbackOk,
    /// Delivery failed for good; the DM fallback command failed too.
    FallbackFailed,
    /// Delivery failed for good and no DM fallback is configured.
    Undelivered,
}

/// What `spool/archive/ID.json` holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArchiveEntry {
    /// The result (or reply) id.
    pub id: String,
    /// Where it went to.
    pub channel_id: Snowflake,
    /// What it said.
    pub content: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Why delivery or the fallback failed, if they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Messages created (chunks delivered before a failure included).
    #[serde(default)]
    pub delivered_message_ids: Vec<Snowflake>,
    /// When archived (unix ms).
    pub archived_unix_ms: u64,
}

/// Why a result file could not be used.
#[derive(Debug)]
pub enum BadResult {
    /// Not JSON of the right shape (moved to `malformed/`): why, and the
    /// channel it names if that much can be read (its user is told).
    Malformed(String, Option<Snowflake>),
    /// Refused unread: too large, or not a regular file (moved to `rejected/`).
    Rejected(String),
    /// Gone before it was read: delivered and archived already (a scan can
    /// list a file just before its delivery removes it), or taken back by
    /// the agent. Nothing to do.
    Vanished,
    /// Could not be read at all (left in place, retried).
    Io(offload::Error),
}

/// Where [`Spool::set_aside`] puts a result file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aside {
    /// `malformed/`.
    Malformed,
    /// `rejected/`.
    Rejected,
}

impl Spool {
    /// The spool under `state_dir`.
    pub fn new(state_dir: &Path) -> Spool {
        let root = state_dir.join("spool");
        Spool {
            tasks: root.join("tasks"),
            results: root.join("results"),
            archive: root.join("archive"),
            malformed: root.join("malformed"),
            rejected: root.join("rejected"),
        }
    }

    /// Creates the directories.
    pub async fn create_dirs(&self) -> Result<(), offload::Error> {
        for dir in [
            &self.tasks,
            &self.results,
            &self.archive,
            &self.malformed,
            &self.rejected,
        ] {
            offload::create_dir_all(dir).await?;
        }
        Ok(())
    }

    /// Writes `task` to `tasks/ID.json` atomically.
    pub async fn write_task(&self, task: &Task) -> Result<PathBuf, offload::Error> {
        let path = self.tasks.join(format!("{}.json", task.id));
        offload::write_json_atomic(&path, task).await?;
        Ok(path)
    }

    /// Up to `limit` result files ready to deliver whose names come after
    /// `after`, oldest name first, and whether more are waiting. However
    /// many files an agent drops in, one scan holds at most `limit` names.
    pub async fn pending_results(
        &self,
        after: Option<std::ffi::OsString>,
        limit: usize,
    ) -> Result<(Vec<PathBuf>, bool), offload::Error> {
        offload::list_dir_page(&self.results, after, limit, is_result_name).await
    }

    /// Reads and parses one result file on the blocking pool: at most
    /// `max_bytes`, never through a symbolic link.
    pub async fn read_result(&self, path: &Path, max_bytes: u64) -> Result<SpoolResult, BadResult> {
        let read = offload::read_capped(path, max_bytes, offload::FileKind::Regular, |bytes| {
            parse_result(&bytes).map_err(|why| (why, channel_named(&bytes)))
        });
        match read.await {
            Ok(Some(parsed)) => parsed.map_err(|(why, channel)| BadResult::Malformed(why, channel)),
            Ok(None) => Err(BadResult::Vanished),
            Err(offload::Error::TooLarge { limit, .. }) => Err(BadResult::Rejected(format!(
                "larger than max_result_bytes ({limit} bytes)"
            ))),
            Err(offload::Error::NotRegular { what, .. }) => {
                Err(BadResult::Rejected(format!("{what}, not a regular file")))
            }
            Err(e) => Err(BadResult::Io(e)),
        }
    }

    /// Archives `entry` as `archive/ID.json` (a new name if taken), then
    /// removes `source` if given. Archive first: a crash in between
    /// delivers again rather than losing the result.
    pub async fn archive(
        &self,
        entry: &ArchiveEntry,
        source: Option<&Path>,
    ) -> Result<PathBuf, offload::Error> {
        let mut path = self.archive.join(format!("{}.json", entry.id));
        if offload::exists(&path).await? {
            path = self
                .archive
                .join(format!("{}.{}.json", entry.id, entry.archived_unix_ms));
        }
        offload::write_json_atomic(&path, entry).await?;
        if let Some(source) = source {
            offload::remove_file(source).await?;
        }
        Ok(path)
    }

    /// Moves a bad result file to `malformed/` or `rejected/` (never
    /// deleted; a symbolic link is moved as the link).
    pub async fn set_aside(
        &self,
        path: &Path,
        aside: Aside,
        now: u64,
    ) -> Result<PathBuf, offload::Error> {
        let dir = match aside {
            Aside::Malformed => &self.malformed,
            Aside::Rejected => &self.rejected,
        };
        let name = path.file_name().map_or_else(
            || "result.json".into(),
            |n| n.to_string_lossy().into_owned(),
        );
        let mut target = dir.join(&name);
        if offload::exists(&target).await? {
            target = dir.join(format!("{now}.{name}"));
        }
        offload::rename_durable(path, &target).await?;
        Ok(target)
    }
}

/// The id of a result: its file stem.
pub fn result_id(path: &Path) -> String {
    path.file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

/// Whether a file name in `results/` is a result to deliver.
pub(crate) fn is_result_name(name: &std::ffi::OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    !name.starts_with('.') && name.ends_with(".json") && name.len() > ".json".len()
}

/// Parses a result; the error says what is wrong (no content echoed).
/// JSON is UTF-8 (RFC 8259); a leading byte order mark, which Windows
/// tools and PowerShell write, is skipped, and UTF-16 marked by one is
/// decoded: what an agent meant is plain, so it is taken. Any other
/// encoding is refused naming it.
pub fn parse_result(bytes: &[u8]) -> Result<SpoolResult, String> {
    let text = decode(bytes)?;
    // serde takes a struct from an array too (`["5", "hi"]`): the
    // contract (docs/result.schema.json) is an object, and only that.
    if text.chars().find(|c| !c.is_whitespace()) != Some('{') {
        return Err("not a result object: a JSON object `{…}` is expected".into());
    }
    let result: SpoolResult =
        serde_json::from_str(&text).map_err(|e| format!("not a result object: {e}"))?;
    if result.content.trim().is_empty() {
        return Err("`content` is empty".into());
    }
    Ok(result)
}

/// The text of a result file (see [`parse_result`]).
fn decode(bytes: &[u8]) -> Result<std::borrow::Cow<'_, str>, String> {
    let utf16 = |bytes: &[u8], unit: fn([u8; 2]) -> u16| {
        if bytes.len() % 2 != 0 {
            return Err("UTF-16 with an odd number of bytes".to_owned());
        }
        let units: Vec<u16> = bytes.chunks_exact(2).map(|c| unit([c[0], c[1]])).collect();
        String::from_utf16(&units)
            .map(std::borrow::Cow::Owned)
            .map_err(|_| "not valid UTF-16".to_owned())
    };
    match bytes {
        [0xEF, 0xBB, 0xBF, rest @ ..] => std::str::from_utf8(rest)
            .map(std::borrow::Cow::Borrowed)
            .map_err(|e| format!("not valid UTF-8 after its byte order mark: {e}")),
        [0x00, 0x00, 0xFE, 0xFF, ..] | [0xFF, 0xFE, 0x00, 0x00, ..] => {
            Err("UTF-32, not UTF-8: write the result as UTF-8".into())
        }
        [0xFE, 0xFF, rest @ ..] => utf16(rest, u16::from_be_bytes),
        [0xFF, 0xFE, rest @ ..] => utf16(rest, u16::from_le_bytes),
        _ => std::str::from_utf8(bytes)
            .map(std::borrow::Cow::Borrowed)
            .map_err(|e| format!("not UTF-8 ({e}): write the result as UTF-8")),
    }
}

/// The channel a result that cannot be used names, if that much of it
/// can be read.
fn channel_named(bytes: &[u8]) -> Option<Snowflake> {
    #[derive(Deserialize)]
    struct Channel {
        channel_id: Snowflake,
    }
    // Lossy: a Latin-1 file still names its channel in ASCII.
    let text = decode(bytes).map_or_else(
        |_| String::from_utf8_lossy(bytes).into_owned(),
        std::borrow::Cow::into_owned,
    );
    serde_json::from_str::<Channel>(&text)
        .ok()
        .map(|c| c.channel_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_encodings_are_decoded_when_plain_else_refused_naming_them() {
        let json = r#"{"channel_id":"5","content":"héllo"}"#;
        let bom: Vec<u8> = [&[0xEF, 0xBB, 0xBF][..], json.as_bytes()].concat();
        assert_eq!(parse_result(&bom).unwrap().content, "héllo");
        let le: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain(json.encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        assert_eq!(parse_result(&le).unwrap().content, "héllo");
        let be: Vec<u8> = [0xFE, 0xFF]
            .into_iter()
            .chain(json.encode_utf16().flat_map(u16::to_be_bytes))
            .collect();
        assert_eq!(parse_result(&be).unwrap().content, "héllo");
        // Latin-1: refused, saying so; the channel is still found.
        let latin1: Vec<u8> = json.chars().map(|c| c as u8).collect();
        let why = parse_result(&latin1).unwrap_err();
        assert!(why.contains("not UTF-8"), "{why}");
        assert_eq!(channel_named(&latin1), Some(Snowflake::new(5)));
        assert_eq!(channel_named(b"\xff\xfe{oops"), None);
        let utf32 = [0xFF, 0xFE, 0x00, 0x00, b'{', 0, 0, 0];
        assert!(parse_result(&utf32).unwrap_err().contains("UTF-32"));
        assert!(parse_result(&[0xFF, 0xFE, b'{'])
            .unwrap_err()
            .contains("odd"));
        let empty = br#"{"channel_id":"7","content":""}"#;
        assert_eq!(channel_named(empty), Some(Snowflake::new(7)));
    }

    #[test]
    fn result_files_and_parsing() {
        let is_result = |name: &str| is_result_name(name.as_ref());
        assert!(is_result("1.json"));
        assert!(!is_result(".1.json"));
        assert!(!is_result("1.json.tmp"));
        assert!(!is_result(".json"));
        assert_eq!(result_id(Path::new("r/abc.json")), "abc");
        // Extra fields (a task id, say) are tolerated.
        assert!(parse_result(br#"{"channel_id":"5","content":"hi","task_id":"1"}"#).is_ok());
        let ok = parse_result(br#"{"channel_id":"5","content":"hi"}"#).unwrap();
        assert_eq!(ok.channel_id, Snowflake::new(5));
        assert!(parse_result(b"{").unwrap_err().contains("line 1"));
        assert!(parse_result(br#"["5","hi"]"#).is_err());
        assert!(parse_result(br#"{"channel_id":"x","content":"hi"}"#).is_err());
        assert!(parse_result(br#"{"channel_id":"5","content":"  "}"#).is_err());
    }

    #[test]
    fn task_text_joins_content_and_transcripts() {
        let t = |s: &str| Transcript {
            attachment_id: Snowflake::new(1),
            text: s.into(),
        };
        assert_eq!(
            task_text("hi ", &[t("one"), t(" "), t("two")]),
            "hi\n\none\n\ntwo"
        );
        assert_eq!(task_text("", &[t("only")]), "only");
        assert_eq!(task_text("", &[]), "");
    }

    #[test]
    fn archive_and_move_aside_never_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        smol::block_on(async {
            spool.create_dirs().await.unwrap();
            let entry = ArchiveEntry {
                id: "7".into(),
                channel_id: Snowflake::new(1),
                content: "x".into(),
                outcome: Outcome::Delivered,
                error: None,
                delivered_message_ids: vec![],
                archived_unix_ms: 42,
            };
            let first = spool.archive(&entry, None).await.unwrap();
            let second = spool.archive(&entry, None).await.unwrap();
            assert_ne!(first, second);
            let bad = spool.results.join("b.json");
            offload::write_bytes_atomic(&bad, b"{".to_vec())
                .await
                .unwrap();
            let aside = spool.set_aside(&bad, Aside::Malformed, 1).await.unwrap();
            assert_eq!(aside, spool.malformed.join("b.json"));
            offload::write_bytes_atomic(&bad, b"[".to_vec())
                .await
                .unwrap();
            let aside = spool.set_aside(&bad, Aside::Malformed, 2).await.unwrap();
            assert_eq!(aside, spool.malformed.join("2.b.json"));
            offload::write_bytes_atomic(&bad, b"[".to_vec())
                .await
                .unwrap();
            let aside = spool.set_aside(&bad, Aside::Rejected, 3).await.unwrap();
            assert_eq!(aside, spool.rejected.join("b.json"));
            assert!(spool.pending_results(None, 10).await.unwrap().0.is_empty());
        });
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // the test makes its files directly
    fn results_are_read_capped_and_never_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path());
        let ok = spool.results.join("ok.json");
        let big = spool.results.join("big.json");
        let link = spool.results.join("link.json");
        let fifo = spool.results.join("fifo.json");
        smol::block_on(async {
            spool.create_dirs().await.unwrap();
            let result = br#"{"channel_id":"5","content":"hi"}"#;
            std::fs::write(&ok, result).unwrap();
            let mut padded = result.to_vec();
            padded.resize(result.len() + 1, b' ');
            std::fs::write(&big, &padded).unwrap();
            std::os::unix::fs::symlink(&ok, &link).unwrap();
            rustix::fs::mknodat(
                rustix::fs::CWD,
                &fifo,
                rustix::fs::FileType::Fifo,
                rustix::fs::Mode::from_raw_mode(0o600),
                0,
            )
            .unwrap();
            let max = result.len() as u64;
            assert_eq!(spool.read_result(&ok, max).await.unwrap().content, "hi");
            let why = |r: Result<SpoolResult, BadResult>| match r {
                Err(BadResult::Rejected(why)) => why,
                other => panic!("not rejected: {other:?}"),
            };
            assert!(why(spool.read_result(&big, max).await).contains("max_result_bytes"));
            assert!(why(spool.read_result(&link, max).await).contains("symbolic link"));
            // A FIFO without a writer would block an open without O_NONBLOCK.
            assert!(why(spool.read_result(&fifo, max).await).contains("FIFO"));
            let gone = spool.results.join("gone.json");
            assert!(matches!(
                spool.read_result(&gone, max).await,
                Err(BadResult::Vanished)
            ));
            // Set aside, the link is moved as a link: its target stays.
            let aside = spool.set_aside(&link, Aside::Rejected, 1).await.unwrap();
            assert!(std::fs::symlink_metadata(aside).unwrap().is_symlink());
            assert!(ok.exists());
        });
    }
}
