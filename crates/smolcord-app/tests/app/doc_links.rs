//! Every relative link in the documentation resolves: a reader who follows
//! one from README.md, docs/ or scripts/compat/README.md lands on a file
//! that exists (and, for `file.md#anchor` or `#anchor`, on a heading that
//! exists). A file path named in backticks — in the Markdown, in a Rust
//! comment or doc comment, or in a `#` comment of a script, the Dockerfile,
//! the unit or a TOML file — must exist too, so a file moved into a folder
//! (`driver.rs` → `driver/connection.rs`) cannot leave a stale
//! pointer behind. Rustdoc's own links are checked by rustdoc:
//! `#![deny(rustdoc::broken_intra_doc_links)]` in `src/lib.rs` makes
//! `cargo doc` fail on one that does not resolve.
#![allow(clippy::disallowed_methods)] // a test reads files

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};

fn root() -> &'static Path {
    smolcord_testkit::repo_root()
}

/// Directories never searched: build output, VCS, fuzzing corpora.
const SKIP_DIRS: &[&str] = &["target", ".git", "corpus", "artifacts"];

/// Every file under `dir` (relative to the repository root) whose name
/// satisfies `wanted`, skipping [`SKIP_DIRS`].
fn files_under(dir: &str, wanted: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root().join(dir)];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if !SKIP_DIRS.contains(&name.to_string_lossy().as_ref()) {
                    stack.push(path);
                }
            } else if wanted(&path) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The Markdown files whose links a reader follows.
fn markdown_files() -> Vec<PathBuf> {
    let is_md = |p: &Path| p.extension().is_some_and(|e| e == "md");
    let mut files = vec![root().join("README.md")];
    files.extend(files_under("docs", &is_md));
    files.extend(files_under("scripts", &is_md));
    files
}

/// Lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// `line` with inline code spans blanked out (so `[a](b)` inside backticks
/// is not a link), and the code spans themselves.
fn split_code_spans(line: &str) -> (String, Vec<&str>) {
    let mut prose = String::with_capacity(line.len());
    let mut spans = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let delimiter = &rest[start..start + ticks];
        let after = &rest[start + ticks..];
        let Some(end) = after.find(delimiter) else {
            break;
        };
        prose.push_str(&rest[..start]);
        prose.push_str(&" ".repeat(ticks * 2 + end));
        spans.push(after[..end].trim());
        rest = &after[end + ticks..];
    }
    prose.push_str(rest);
    (prose, spans)
}

/// The destinations of inline links `[text](dest)` / `[text](dest "title")`
/// and reference definitions `[label]: dest` in a line of prose.
fn link_destinations(prose: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = prose;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        // Up to the matching `)` (destinations may hold balanced parentheses).
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else { break };
        let inner = after[..end].trim();
        let dest = inner.split_whitespace().next().unwrap_or("");
        out.push(
            dest.trim_start_matches('<')
                .trim_end_matches('>')
                .to_string(),
        );
        rest = &after[end..];
    }
    let trimmed = prose.trim_start();
    if trimmed.starts_with('[') {
        if let Some(close) = trimmed.find("]:") {
            if let Some(dest) = trimmed[close + 2..].split_whitespace().next() {
                out.push(dest.to_string());
            }
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (but `-`
/// and `_`), spaces to hyphens; a repeated heading gets `-1`, `-2`, ….
fn slug(heading: &str) -> String {
    // Backticks and other punctuation drop out; code spans keep their text.
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading.trim());
        let n = seen.entry(base.clone()).or_insert(0);
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// Resolves `dest` (a relative link) against the directory of `from`;
/// `None` when it climbs out of the repository.
fn resolve(from: &Path, dest: &str) -> Option<PathBuf> {
    let mut out = from.parent()?.to_path_buf();
    for part in Path::new(dest).components() {
        match part {
            Component::ParentDir => {
                if !out.pop() || !out.starts_with(root()) {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

fn is_external(dest: &str) -> bool {
    dest.contains("://") || dest.starts_with("mailto:") || dest.starts_with("//")
}

/// What is wrong with one relative link from `from`, if anything.
fn check_link(from: &Path, dest: &str) -> Option<String> {
    if dest.is_empty() || is_external(dest) {
        return None;
    }
    let (path, anchor) = match dest.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (dest, None),
    };
    let target = if path.is_empty() {
        from.to_path_buf()
    } else {
        match resolve(from, path) {
            Some(t) => t,
            None => return Some(format!("{dest}: points outside the repository")),
        }
    };
    if !target.exists() {
        return Some(format!("{dest}: no such file ({})", relative(&target)));
    }
    if let Some(anchor) = anchor {
        if target.extension().is_some_and(|e| e == "md") {
            let text = std::fs::read_to_string(&target).unwrap_or_default();
            if !anchors(&text).contains(anchor) {
                return Some(format!(
                    "{dest}: {} has no heading with the anchor #{anchor}",
                    relative(&target)
                ));
            }
        }
    }
    None
}

/// The repository's top-level directories: a backticked path that starts
/// with one of them and names a file (it has an extension) is a claim that
/// the file exists.
fn top_dirs() -> BTreeSet<String> {
    std::fs::read_dir(root())
        .expect("the repository root")
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !SKIP_DIRS.contains(&name.as_str()))
        .collect()
}

/// Whether a code span is a path into the repository that must exist:
/// `docs/budget.md`, `src/shard/driver/mod.rs`, `scripts/compat/` — not a
/// pattern (`<target>`, `*`), a command line, or a path at run time.
fn repo_path(span: &str, top: &BTreeSet<String>) -> Option<String> {
    let span = span.trim_start_matches("./");
    if span.is_empty() || span.contains(|c: char| c.is_whitespace() || "<>*{}$|[]".contains(c)) {
        return None;
    }
    let (first, rest) = span.split_once('/')?;
    if !top.contains(first) {
        return None;
    }
    let names_file = Path::new(rest).extension().is_some() || span.ends_with('/');
    names_file.then(|| span.trim_end_matches('/').to_string())
}

#[test]
fn every_relative_link_in_the_markdown_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).expect("readable Markdown");
        for (n, line) in prose_lines(&text) {
            let (prose, _) = split_code_spans(line);
            for dest in link_destinations(&prose) {
                checked += 1;
                if let Some(why) = check_link(&file, &dest) {
                    broken.push(format!("{}:{n}: {why}", relative(&file)));
                }
            }
        }
    }
    assert!(
        checked > 10,
        "only {checked} links found: is the parser broken?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_repository_path_named_in_the_markdown_exists() {
    let top = top_dirs();
    let mut missing = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).expect("readable Markdown");
        for (n, line) in text.lines().enumerate() {
            for span in split_code_spans(line).1 {
                if let Some(path) = repo_path(span, &top) {
                    if !root().join(&path).exists() {
                        missing.push(format!("{}:{}: `{path}`", relative(&file), n + 1));
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not in the repository:\n{}",
        missing.join("\n")
    );
}

/// The comment text of a line in a Rust file (`//`, `///`, `//!`) or in a
/// script, Dockerfile, unit or TOML file (`#`), if it has one.
fn comment(line: &str, rust: bool) -> Option<&str> {
    let trimmed = line.trim_start();
    if rust {
        trimmed.strip_prefix("//")
    } else {
        trimmed.strip_prefix('#')
    }
}

#[test]
fn every_repository_path_named_in_a_comment_exists() {
    let top = top_dirs();
    let is = |exts: &'static [&'static str]| {
        move |p: &Path| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            exts.iter().any(|e| name.ends_with(e))
        }
    };
    let mut files: Vec<(PathBuf, bool)> = Vec::new();
    for dir in ["src", "tests", "examples", "fuzz"] {
        files.extend(
            files_under(dir, &is(&[".rs"]))
                .into_iter()
                .map(|p| (p, true)),
        );
    }
    for dir in ["scripts", "contrib", ".cargo"] {
        let hashed = is(&[".sh", ".service", ".toml", ".py"]);
        files.extend(files_under(dir, &hashed).into_iter().map(|p| (p, false)));
    }
    for name in ["Dockerfile", "Cargo.toml", "clippy.toml"] {
        files.push((root().join(name), false));
    }
    let mut missing = Vec::new();
    let mut relative_links = Vec::new();
    for (file, rust) in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            let Some(comment) = comment(line, rust) else {
                continue;
            };
            let (prose, spans) = split_code_spans(comment);
            for span in spans {
                if let Some(path) = repo_path(span, &top) {
                    if !root().join(&path).exists() {
                        missing.push(format!("{}:{}: `{path}`", relative(&file), n + 1));
                    }
                }
            }
            // A doc comment's link to a file (not an intra-doc path such as
            // `crate::shard`): rustdoc resolves it against the generated
            // page, where a source file is not, so it would be dead there.
            if rust {
                for dest in link_destinations(&prose) {
                    if !is_external(dest.as_str())
                        && (dest.contains('/') || dest.ends_with(".md") || dest.ends_with(".rs"))
                    {
                        relative_links.push(format!("{}:{}: ({dest})", relative(&file), n + 1));
                    }
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not in the repository:\n{}",
        missing.join("\n")
    );
    assert!(
        relative_links.is_empty(),
        "a relative link to a file in a doc comment is dead in rustdoc (name the path in backticks, or link an item):\n{}",
        relative_links.join("\n")
    );
}

#[test]
fn every_crate_denies_broken_intra_doc_links() {
    for krate in ["smolcord", "smolcord-sim", "smolcord-app"] {
        let path = root().join("crates").join(krate).join("src/lib.rs");
        let lib = std::fs::read_to_string(&path).expect("a crate's lib.rs");
        assert!(
            lib.contains("#![deny(rustdoc::broken_intra_doc_links)]"),
            "{} must deny broken intra-doc links, so `cargo doc` fails on one",
            path.display()
        );
    }
}

#[test]
fn the_parsers_find_what_they_should() {
    assert_eq!(
        link_destinations("see [a](docs/a.md#x) and [b](<b c.md> \"t\")"),
        ["docs/a.md#x", "b"]
    );
    let (prose, spans) = split_code_spans("a `[c](d)` b ``x`y``");
    assert!(link_destinations(&prose).is_empty());
    assert_eq!(spans, ["[c](d)", "x`y"]);
    assert_eq!(link_destinations("[label]: ../x.md"), ["../x.md"]);
    let text = "# Signals and exit codes\n## `smolcord status` (JSON)\n```\n# not a heading\n```\n# Signals and exit codes\n";
    let found = anchors(text);
    assert!(found.contains("signals-and-exit-codes"), "{found:?}");
    assert!(found.contains("signals-and-exit-codes-1"), "{found:?}");
    assert!(found.contains("smolcord-status-json"), "{found:?}");
    assert!(!found.contains("not-a-heading"), "{found:?}");
    let top: BTreeSet<String> = ["docs", "src"].map(String::from).into();
    assert_eq!(
        repo_path("src/shard/driver.rs", &top).as_deref(),
        Some("src/shard/driver.rs")
    );
    assert_eq!(repo_path("docs/", &top).as_deref(), Some("docs"));
    assert_eq!(repo_path("src/a/<target>.txt", &top), None);
    assert_eq!(repo_path("spool/tasks/ID.json", &top), None);
    assert_eq!(repo_path("examples/bot", &top), None);
    assert_eq!(repo_path("src/x.rs --flag", &top), None);
}
