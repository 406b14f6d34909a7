//! `multipart/form-data` bodies for file uploads, as Discord takes them: a
//! `payload_json` part with the JSON body, then one `files[n]` part per
//! file (RFC 7578). The boundary is random and checked against the content,
//! so no file can end its own part early.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Discord's default limit per uploaded file: 20 MiB. discord-api-docs,
/// `developers/reference.mdx`, "Uploading Files": "The file upload size
/// limit applies to each file in a request. The default limit is `20 MiB`
/// for all users", raised from 10 MiB on 2026-09-03 (the change log; the
/// 10 MiB of 2025-01-16 is gone). Nitro and a server's boosts raise it; a
/// bot cannot count on that. The simulator's `DEFAULT_UPLOAD_LIMIT` is the
/// same figure (a test checks they agree).
pub const MAX_FILE_BYTES: usize = 20 * 1024 * 1024;
/// Discord's limit on files per message.
pub const MAX_FILES: usize = 10;
/// Discord's limit on a whole request.
pub const MAX_REQUEST_BYTES: usize = 25 * 1024 * 1024;

/// One file to upload: its name and type, and where its bytes are.
#[derive(Clone, Copy, Debug)]
pub struct Upload<'a> {
    /// The file name shown in Discord (plain ASCII, no quotes or slashes).
    pub filename: &'a str,
    /// Its MIME type.
    pub content_type: &'a str,
    /// Its content.
    pub source: FileSource<'a>,
}

/// Where an [`Upload`]'s bytes come from.
#[non_exhaustive]
#[derive(Clone, Copy, Debug)]
pub enum FileSource<'a> {
    /// Bytes in memory.
    Bytes(&'a [u8]),
    /// A file on disk, streamed from it while the request is sent (on the
    /// blocking pool; never held in memory). `len` is its size, as the
    /// caller listed it: the request declares it, and a file that changed
    /// size meanwhile fails the request rather than sending other bytes.
    /// Opened without following a symbolic link.
    Disk {
        /// The file.
        path: &'a Path,
        /// Its size in bytes.
        len: u64,
    },
}

impl<'a> Upload<'a> {
    /// A file whose bytes are in memory.
    pub fn bytes(filename: &'a str, content_type: &'a str, bytes: &'a [u8]) -> Upload<'a> {
        Upload {
            filename,
            content_type,
            source: FileSource::Bytes(bytes),
        }
    }

    /// A file streamed from disk (see [`FileSource::Disk`]).
    pub fn disk(filename: &'a str, content_type: &'a str, path: &'a Path, len: u64) -> Upload<'a> {
        Upload {
            filename,
            content_type,
            source: FileSource::Disk { path, len },
        }
    }

    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        match self.source {
            FileSource::Bytes(bytes) => bytes.len() as u64,
            FileSource::Disk { len, .. } => len,
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A piece of a request body: bytes, or a file read when it is sent.
#[derive(Clone, Debug)]
pub(crate) enum Segment {
    Bytes(Arc<[u8]>),
    File { path: PathBuf, len: u64 },
}

impl Segment {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Segment::Bytes(bytes) => bytes.len() as u64,
            Segment::File { len, .. } => *len,
        }
    }
}

/// The `Content-Type` header value and the body, as segments: the form's
/// own text with in-memory files copied in, and each file on disk as a
/// segment of its own, read only when the request is sent.
///
/// The boundary is 32 random letters and digits, checked against the
/// payload and the in-memory files. A file on disk is not read to check
/// it (that would read it twice): a file that holds the boundary by
/// chance has odds of 62^-32 (2^-190), and no one can plant it, since it is
/// drawn after the file is written.
pub(crate) fn form(payload_json: &[u8], files: &[Upload<'_>]) -> (String, Vec<Segment>) {
    let boundary = loop {
        let candidate: String = std::iter::repeat_with(fastrand::alphanumeric)
            .take(32)
            .collect();
        let clashes = |data: &[u8]| {
            data.windows(candidate.len())
                .any(|w| w == candidate.as_bytes())
        };
        let in_memory = files.iter().filter_map(|f| match f.source {
            FileSource::Bytes(bytes) => Some(bytes),
            FileSource::Disk { .. } => None,
        });
        if !clashes(payload_json) && !in_memory.clone().any(clashes) {
            break candidate;
        }
    };
    let mut segments = Vec::new();
    let mut text = Vec::with_capacity(payload_json.len() + 512);
    let head = |text: &mut Vec<u8>, head: String| {
        text.extend_from_slice(format!("--{boundary}\r\n{head}\r\n\r\n").as_bytes());
    };
    head(
        &mut text,
        "Content-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json"
            .to_owned(),
    );
    text.extend_from_slice(payload_json);
    text.extend_from_slice(b"\r\n");
    for (index, file) in files.iter().enumerate() {
        head(
            &mut text,
            format!(
                "Content-Disposition: form-data; name=\"files[{index}]\"; filename=\"{}\"\r\nContent-Type: {}",
                file.filename, file.content_type
            ),
        );
        match file.source {
            FileSource::Bytes(bytes) => text.extend_from_slice(bytes),
            FileSource::Disk { path, len } => {
                segments.push(Segment::Bytes(std::mem::take(&mut text).into()));
                segments.push(Segment::File {
                    path: path.to_owned(),
                    len,
                });
            }
        }
        text.extend_from_slice(b"\r\n");
    }
    text.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    segments.push(Segment::Bytes(text.into()));
    (
        format!("multipart/form-data; boundary={boundary}"),
        segments,
    )
}

/// Whether `name` is safe inside a quoted `filename="…"` parameter.
pub(crate) fn plain_filename(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_then_files_with_a_boundary_not_in_the_content() {
        let text = b"line one\r\n--not-the-boundary\r\n";
        let (content_type, segments) = form(
            br#"{"content":"hi"}"#,
            &[Upload::bytes(
                "reply.txt",
                "text/plain; charset=utf-8",
                text,
            )],
        );
        let [Segment::Bytes(body)] = segments.as_slice() else {
            panic!("one segment: {segments:?}");
        };
        let body = body.to_vec();
        let boundary = content_type
            .strip_prefix("multipart/form-data; boundary=")
            .unwrap();
        assert_eq!(boundary.len(), 32);
        let body = String::from_utf8(body).unwrap();
        assert!(body.starts_with(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"payload_json\""
        )));
        assert!(body.contains("{\"content\":\"hi\"}\r\n"));
        assert!(body.contains("name=\"files[0]\"; filename=\"reply.txt\"\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nline one\r\n--not-the-boundary\r\n\r\n"));
        assert!(body.ends_with(&format!("--{boundary}--\r\n")));
        assert_eq!(body.matches(boundary).count(), 3);
    }

    #[test]
    fn a_file_on_disk_is_a_segment_of_its_own_between_its_headers() {
        let path = Path::new("/nonexistent/chart.png");
        let (_, segments) = form(b"{}", &[Upload::disk("chart.png", "image/png", path, 7)]);
        match segments.as_slice() {
            [Segment::Bytes(head), Segment::File { path: p, len: 7 }, Segment::Bytes(tail)] => {
                assert!(String::from_utf8_lossy(head).ends_with("Content-Type: image/png\r\n\r\n"));
                assert_eq!(p, path);
                assert!(String::from_utf8_lossy(tail).starts_with("\r\n--"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn file_names_are_checked() {
        assert!(plain_filename("reply.txt"));
        assert!(!plain_filename("a\"b.txt"));
        assert!(!plain_filename("../x"));
        assert!(!plain_filename(""));
    }
}
