//! `smolcord failures [--last N]`: print the failure journal, oldest first;
//! skipped lines (a torn last line after a crash) are noted on stderr.

use crate::config::{Config, Env};
use crate::recorder::{self, JournalContents};
use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

/// Prints the journal in the configured state dir (all of it, or the last
/// `last` entries). Exit 0 whenever it could be read, empty or not.
pub async fn run(
    last: Option<usize>,
    config: Option<&Path>,
    env: Env<'_>,
) -> Result<ExitCode, String> {
    let config = Config::load(config, env).await.map_err(|e| e.to_string())?;
    let path = recorder::journal_path(&config.state_dir);
    let contents = recorder::read_journal(&path)
        .await
        .map_err(|e| e.to_string())?;
    say_raw!("{}", render(&path, &contents, last));
    for notice in &contents.notices {
        eprintln!("smolcord: note: {notice}");
    }
    Ok(ExitCode::SUCCESS)
}

fn render(path: &Path, contents: &JournalContents, last: Option<usize>) -> String {
    let total = contents.entries.len();
    if total == 0 {
        return format!("no failures recorded in {}\n", path.display());
    }
    let shown = last.map_or(total, |n| n.min(total));
    let mut out = if shown == total {
        format!("{total} failure(s) in {} (oldest first):\n", path.display())
    } else {
        format!(
            "last {shown} of {total} failures in {} (oldest first):\n",
            path.display()
        )
    };
    for entry in &contents.entries[total - shown..] {
        let _ = writeln!(out, "  {}", entry.render());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::JournalEntry;

    fn entry(n: usize) -> JournalEntry {
        JournalEntry {
            time: format!("2024-01-01T00:00:0{n}.000Z"),
            kind: "agent".into(),
            place: "agent_cmd".into(),
            status: Some(1),
            message: format!("exit {n}"),
            stderr: None,
        }
    }

    #[test]
    fn last_n_shows_the_newest_oldest_first() {
        let contents = JournalContents {
            entries: (1..=4).map(entry).collect(),
            notices: vec![],
        };
        let text = render(Path::new("s/failures.jsonl"), &contents, Some(2));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "last 2 of 4 failures in s/failures.jsonl (oldest first):"
        );
        assert_eq!(lines.len(), 3);
        assert!(
            lines[1].contains("exit 3") && lines[2].contains("exit 4"),
            "{text}"
        );

        let all = render(Path::new("f"), &contents, Some(10));
        assert!(all.starts_with("4 failure(s) in f"), "{all}");
    }

    #[test]
    fn an_empty_journal_says_so() {
        let text = render(Path::new("f"), &JournalContents::default(), None);
        assert_eq!(text, "no failures recorded in f\n");
    }
}
