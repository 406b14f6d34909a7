//! Files out: the regular files an agent leaves in its task's output
//! directory (`files/ID/out/`) go with its reply, as Discord takes them:
//! at most [`MAX_FILES`] files and [`GROUP_BYTES`] a message, each at most
//! [`MAX_FILE_BYTES`] (Discord's default upload limit, 20 MiB: what a
//! server without boosts takes, and a DM). What
//! does not fit one message goes in the next (at most
//! [`MAX_FILE_MESSAGES`]); what cannot go at all (a symbolic link, a
//! directory, a file over the limit, one past the last message) is named
//! in a notice after them, never dropped in silence.
//!
//! The plan is a function of the directory's listing alone (sorted by
//! name), so a delivery resumed after a restart cuts the same messages,
//! and each message goes under the nonce of its part: the outbox covers
//! the files as it covers the text. A file is streamed from disk (never
//! through a link, never held in memory: `rest::Upload::disk`) only while
//! its message goes out, on the blocking pool.

use smolcord::offload;
use smolcord::rest::{MAX_FILES, MAX_FILE_BYTES, MAX_REQUEST_BYTES};
use std::path::{Path, PathBuf};

/// Messages of files one reply takes at most: 30 files, three requests
/// against the channel's rate limit.
pub(crate) const MAX_FILE_MESSAGES: usize = 3;
/// Entries of an output directory looked at: those past it are only
/// counted, and named in the notice as a number.
pub(crate) const MAX_LISTED: usize = 256;
/// Bytes of files in one message: Discord's 25 MiB a request, less room
/// for the form's headers and the JSON.
pub(crate) const GROUP_BYTES: u64 = MAX_REQUEST_BYTES as u64 - 64 * 1024;
/// Files named one by one in the notice; the rest as a number.
const NAMED: usize = 10;

/// One file to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OutFile {
    pub path: PathBuf,
    /// The name Discord shows: the file's own, made plain.
    pub name: String,
    pub size: u64,
}

/// The files of a reply: the messages that carry them, and what is left
/// out with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Outgoing {
    pub groups: Vec<Vec<OutFile>>,
    pub left_out: Vec<(String, String)>,
    /// Entries past [`MAX_LISTED`], not looked at.
    pub unlisted: usize,
}

impl Outgoing {
    /// Messages it takes: one per group, and the notice.
    pub fn parts(&self) -> usize {
        self.groups.len() + usize::from(self.has_notice())
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && !self.has_notice()
    }

    fn has_notice(&self) -> bool {
        !self.left_out.is_empty() || self.unlisted > 0
    }

    /// The notice naming what was not sent, if anything was not.
    pub fn notice(&self) -> Option<String> {
        if !self.has_notice() {
            return None;
        }
        let mut named: Vec<String> = self
            .left_out
            .iter()
            .take(NAMED)
            .map(|(name, why)| format!("{name} ({why})"))
            .collect();
        let more = self.left_out.len().saturating_sub(NAMED) + self.unlisted;
        if more > 0 {
            named.push(format!("{more} more"));
        }
        Some(format!("Not sent with this reply: {}.", named.join(", ")))
    }
}

/// The reply's files from `dir` (missing: none).
pub(crate) async fn collect(dir: &Path) -> Outgoing {
    match offload::list_files(dir, MAX_LISTED).await {
        Ok(listed) => plan(&listed),
        Err(e) => {
            log::warn!("listing the agent's output files: {e}");
            Outgoing {
                left_out: vec![(
                    "its files".to_owned(),
                    "the output directory could not be read".to_owned(),
                )],
                ..Outgoing::default()
            }
        }
    }
}

/// Groups the listing into messages (pure; the listing is sorted).
pub(crate) fn plan(listed: &offload::DirFiles) -> Outgoing {
    let mut out = Outgoing {
        unlisted: listed.more,
        ..Outgoing::default()
    };
    let name_of = |path: &Path| {
        path.file_name()
            .map_or_else(|| "?".to_owned(), |n| n.to_string_lossy().into_owned())
    };
    let mut names = std::collections::HashSet::new();
    let mut group: Vec<OutFile> = Vec::new();
    let mut group_bytes = 0u64;
    for (path, size) in &listed.files {
        let shown = name_of(path);
        if *size > MAX_FILE_BYTES as u64 {
            let why = format!(
                "{}, larger than Discord's {} MiB upload limit",
                size_text(*size),
                MAX_FILE_BYTES >> 20
            );
            out.left_out.push((shown, why));
            continue;
        }
        let full = group.len() == MAX_FILES || group_bytes + size > GROUP_BYTES;
        if full && !group.is_empty() {
            out.groups.push(std::mem::take(&mut group));
            group_bytes = 0;
        }
        if out.groups.len() == MAX_FILE_MESSAGES {
            let why = format!("more than {} files", MAX_FILE_MESSAGES * MAX_FILES);
            out.left_out.push((shown, why));
            continue;
        }
        let mut name = upload_name(&shown);
        if !names.insert(name.clone()) {
            name = format!("{}-{name}", names.len());
            names.insert(name.clone());
        }
        group_bytes += size;
        group.push(OutFile {
            path: path.clone(),
            name,
            size: *size,
        });
    }
    if !group.is_empty() {
        out.groups.push(group);
    }
    for (path, kind) in &listed.others {
        out.left_out
            .push((name_of(path), format!("{kind}, not a file")));
    }
    out
}

/// Which file of a group Discord refused as too large (413, 40005) is
/// left out: Discord does not say which, but if any file is over the
/// limit where it goes, the largest is. Its index (the first of equals);
/// `None` for a group of one, which has nothing left to send.
pub(crate) fn refused_as_too_large(group: &[OutFile]) -> Option<usize> {
    if group.len() < 2 {
        return None;
    }
    let largest = group.iter().map(|f| f.size).max()?;
    group.iter().position(|f| f.size == largest)
}

/// The text of the message that carries a group's other files when `file`
/// was left out of it by [`refused_as_too_large`].
pub(crate) fn refused_note(file: &OutFile) -> String {
    format!(
        "Not sent: {} ({}): Discord refused it as too large (the upload limit here is below that; its default is {} MiB a file).",
        file.name,
        size_text(file.size),
        MAX_FILE_BYTES >> 20
    )
}

/// A size as the user reads it: bytes below 1 MiB, else MiB to a tenth,
/// rounded up (so a file over a limit never reads as at it).
pub(crate) fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    if bytes < MIB {
        return format!("{bytes} bytes");
    }
    let tenths = (bytes * 10).div_ceil(MIB);
    format!("{}.{} MiB", tenths / 10, tenths % 10)
}

/// A name Discord takes in a form (1 to 100 of `[A-Za-z0-9._-]`).
fn upload_name(name: &str) -> String {
    let plain: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let plain = plain.trim_start_matches('.');
    let mut plain = if plain.is_empty() { "file" } else { plain }.to_owned();
    if plain.len() > 90 {
        let ext = plain
            .rsplit_once('.')
            .map(|(_, e)| e.to_owned())
            .filter(|e| e.len() <= 16)
            .unwrap_or_default();
        plain = format!("{}.{ext}", &plain[..90 - ext.len() - 1]);
    }
    plain
}

/// A file's MIME type by its extension (Discord shows images inline by
/// their type); anything else is plain bytes.
pub(crate) fn content_type(name: &str) -> &'static str {
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("svg") => "image/svg+xml",
        Some("pdf") => "application/pdf",
        Some("txt" | "log" | "md" | "csv") => "text/plain; charset=utf-8",
        Some("json") => "application/json",
        Some("mp3") => "audio/mpeg",
        Some("ogg") => "audio/ogg",
        Some("mp4") => "video/mp4",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(
        files: &[(&str, u64)],
        others: &[(&str, &'static str)],
        more: usize,
    ) -> offload::DirFiles {
        offload::DirFiles {
            files: files
                .iter()
                .map(|(n, s)| (PathBuf::from(format!("/o/{n}")), *s))
                .collect(),
            others: others
                .iter()
                .map(|(n, k)| (PathBuf::from(format!("/o/{n}")), *k))
                .collect(),
            more,
        }
    }

    #[test]
    fn ten_files_a_message_within_the_request_limit_and_the_rest_named() {
        let names: Vec<String> = (0..200).map(|n| format!("f{n:03}.txt")).collect();
        let files: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 10)).collect();
        let out = plan(&listing(&files, &[("link.png", "a symbolic link")], 0));
        assert_eq!(out.groups.len(), 3);
        assert!(out.groups.iter().all(|g| g.len() == 10));
        assert_eq!(out.groups[2][9].name, "f029.txt");
        assert_eq!(out.left_out.len(), 171);
        assert_eq!(out.parts(), 4);
        let notice = out.notice().unwrap();
        assert!(
            notice.starts_with("Not sent with this reply: f030.txt (more than 30 files), "),
            "{notice}"
        );
        assert!(notice.ends_with(", 161 more."), "{notice}");

        // By size: two 10 MiB files fit one 25 MiB request, a third does
        // not; a file at Discord's 20 MiB goes, one byte more does not.
        let ten = 10 << 20;
        let big = MAX_FILE_BYTES as u64;
        let out = plan(&listing(
            &[
                ("a.bin", ten),
                ("b.bin", ten),
                ("c.bin", ten),
                ("d.bin", big),
                ("e.bin", big + 1),
            ],
            &[],
            0,
        ));
        let sizes: Vec<usize> = out.groups.iter().map(Vec::len).collect();
        assert_eq!(sizes, [2, 1, 1]);
        assert_eq!(
            out.left_out,
            [(
                "e.bin".to_owned(),
                "20.1 MiB, larger than Discord's 20 MiB upload limit".to_owned()
            )]
        );

        assert!(plan(&listing(&[], &[], 0)).is_empty());
        let link = plan(&listing(&[], &[("x", "a symbolic link")], 3));
        assert_eq!(
            link.notice().unwrap(),
            "Not sent with this reply: x (a symbolic link, not a file), 3 more."
        );
    }

    #[test]
    fn a_group_refused_as_too_large_leaves_out_its_largest_file() {
        let file = |name: &str, size| OutFile {
            path: PathBuf::from(name),
            name: name.to_owned(),
            size,
        };
        let group = [file("a", 10), file("b", 5000), file("c", 5000)];
        assert_eq!(refused_as_too_large(&group), Some(1));
        assert_eq!(refused_as_too_large(&group[..1]), None);
        assert_eq!(
            refused_note(&group[1]),
            "Not sent: b (5000 bytes): Discord refused it as too large (the upload limit here is below that; its default is 20 MiB a file)."
        );
        assert_eq!(size_text(15 << 20), "15.0 MiB");
        assert_eq!(size_text((1 << 20) + 1), "1.1 MiB");
    }

    #[test]
    fn upload_names_are_plain_and_distinct() {
        let out = plan(&listing(
            &[("chart 1.png", 1), ("chart_1.png", 1), (".env", 1)],
            &[],
            0,
        ));
        let names: Vec<&str> = out.groups[0].iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["chart_1.png", "1-chart_1.png", "env"]);
        assert_eq!(content_type("A.PNG"), "image/png");
        assert_eq!(content_type("x"), "application/octet-stream");
    }
}
