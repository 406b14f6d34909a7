//! Reading the journal back: every kept file, oldest first, one entry per
//! line, tolerant of what a crash leaves behind.
//!
//! A last line without its newline is a write cut short (the writer appends
//! each line in one `write` ending in `\n`): it is skipped and a notice says
//! so. Any other line that is not an entry is skipped with a notice naming
//! the file and line. The reader never fails on content, only on I/O.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use smolcord::offload;

/// The journal's file name inside the state dir.
pub const FILE_NAME: &str = "failures.jsonl";

/// `STATE_DIR/failures.jsonl`.
pub fn journal_path(state_dir: &Path) -> PathBuf {
    state_dir.join(FILE_NAME)
}

/// `<path>.<n>`: the n-th newest rotated file.
pub(crate) fn rotated_path(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// One journal line, as read back. `kind` stays text so a journal written
/// by a newer version (with kinds this one does not know) still reads.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct JournalEntry {
    /// When (RFC 3339, UTC).
    #[serde(default)]
    pub time: String,
    /// What kind of thing failed (`rest`, `agent`, ...).
    pub kind: String,
    /// Where.
    #[serde(default)]
    pub place: String,
    /// HTTP status, exit code or close code.
    #[serde(default)]
    pub status: Option<i64>,
    /// The short message.
    #[serde(default)]
    pub message: String,
    /// The end of a failed command's stderr, if it said anything.
    #[serde(default)]
    pub stderr: Option<String>,
}

impl JournalEntry {
    /// One readable line (no trailing newline); a failed command's stderr
    /// follows on a second, indented line, shown from its end.
    pub fn render(&self) -> String {
        let mut out = format!("{}  {:<14} {}", self.time, self.kind, self.place);
        if let Some(status) = self.status {
            let _ = write!(out, " [{status}]");
        }
        if !self.message.is_empty() {
            let _ = write!(out, ": {}", self.message);
        }
        if let Some(stderr) = self.stderr.as_deref().filter(|s| !s.is_empty()) {
            let _ = write!(out, "\n    stderr: {stderr}");
        }
        out
    }
}

/// What [`read_journal`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JournalContents {
    /// The entries, oldest first.
    pub entries: Vec<JournalEntry>,
    /// Lines skipped and why (a torn last line, a corrupt line), one each.
    pub notices: Vec<String>,
}

/// Reads `path` and its rotated files (`path.N` .. `path.1`, then `path`).
/// A missing journal reads as empty.
pub async fn read_journal(path: &Path) -> Result<JournalContents, offload::Error> {
    let mut contents = JournalContents::default();
    for file in journal_files(path).await? {
        // A file rotated away between listing and reading is simply gone.
        if let Some(bytes) = offload::read_bytes(&file).await? {
            let label = file.file_name().map_or_else(
                || file.display().to_string(),
                |name| name.to_string_lossy().into_owned(),
            );
            parse_into(&label, &bytes, &mut contents);
        }
    }
    Ok(contents)
}

/// The rotated files, oldest (highest number) first, then `path` itself.
async fn journal_files(path: &Path) -> Result<Vec<PathBuf>, offload::Error> {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Ok(vec![path.to_path_buf()]);
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let prefix = format!("{name}.");
    let mut rotated: Vec<(u64, PathBuf)> = offload::list_dir(dir)
        .await?
        .into_iter()
        .filter_map(|file| {
            let file_name = file.file_name()?.to_str()?;
            let n = file_name.strip_prefix(&prefix)?.parse().ok()?;
            Some((n, file))
        })
        .collect();
    rotated.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    let mut files: Vec<PathBuf> = rotated.into_iter().map(|(_, file)| file).collect();
    files.push(path.to_path_buf());
    Ok(files)
}

/// Parses one file's bytes into `out`; `label` names the file in notices.
pub(crate) fn parse_into(label: &str, bytes: &[u8], out: &mut JournalContents) {
    let terminated = bytes.is_empty() || bytes.ends_with(b"\n");
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if terminated {
        lines.pop(); // the empty piece after the final newline
    }
    let count = lines.len();
    for (index, line) in lines.into_iter().enumerate() {
        let number = index + 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<JournalEntry>(line) {
            Ok(entry) => out.entries.push(entry),
            Err(_) if !terminated && number == count => out.notices.push(format!(
                "{label}: skipped a torn last line (line {number}, {} bytes, no newline): \
                 a write was cut short, most likely by a crash",
                line.len()
            )),
            Err(e) => out.notices.push(format!(
                "{label}: skipped line {number}: not a journal entry ({e})"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"time":"2024-01-01T00:00:00.000Z","kind":"rest","place":"POST /x","status":429,"message":"slow down"}"#;

    #[test]
    fn a_torn_last_line_is_skipped_with_a_notice_and_a_complete_one_kept() {
        let mut out = JournalContents::default();
        let bytes = format!("{GOOD}\n{GOOD}\n{{\"time\":\"2024-01-0");
        parse_into("failures.jsonl", bytes.as_bytes(), &mut out);
        assert_eq!(out.entries.len(), 2);
        assert_eq!(out.notices.len(), 1);
        assert!(
            out.notices[0].contains("torn last line (line 3"),
            "{:?}",
            out.notices
        );

        // Complete but unterminated: all the data is there; keep it.
        let mut out = JournalContents::default();
        parse_into("f", format!("{GOOD}\n{GOOD}").as_bytes(), &mut out);
        assert_eq!((out.entries.len(), out.notices.len()), (2, 0));
    }

    #[test]
    fn a_bad_middle_line_and_blank_lines_are_skipped() {
        let mut out = JournalContents::default();
        let bytes = format!("{GOOD}\n\nnot json\n{{\"kind\":\"agent\"}}\n");
        parse_into("failures.jsonl.1", bytes.as_bytes(), &mut out);
        assert_eq!(out.entries.len(), 2);
        assert_eq!(out.entries[1].kind, "agent");
        assert_eq!(out.notices.len(), 1);
        assert!(out.notices[0].starts_with("failures.jsonl.1: skipped line 3: not a journal entry"));
    }

    #[test]
    fn render_is_one_readable_line() {
        let entry: JournalEntry = serde_json::from_str(GOOD).unwrap();
        assert_eq!(
            entry.render(),
            "2024-01-01T00:00:00.000Z  rest           POST /x [429]: slow down"
        );
        let failed = r#"{"time":"t","kind":"agent","place":"agent.sh","status":3,"message":"exited with code 3","stderr":"… ⏎ model not found"}"#;
        let entry: JournalEntry = serde_json::from_str(failed).unwrap();
        assert_eq!(
            entry.render(),
            "t  agent          agent.sh [3]: exited with code 3\n    stderr: … ⏎ model not found"
        );
    }

    #[test]
    fn rotated_names_append_the_number() {
        assert_eq!(
            rotated_path(Path::new("/s/failures.jsonl"), 2),
            Path::new("/s/failures.jsonl.2")
        );
    }
}
