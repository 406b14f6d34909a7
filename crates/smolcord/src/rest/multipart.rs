//! `multipart/form-data` bodies for file uploads, as Discord takes them: a
//! `payload_json` part with the JSON body, then one `files[n]` part per
//! file (RFC 7578). The boundary is random and checked against the content,
//! so no file can end its own part early.

/// Discord's default limit per uploaded file (boosts raise it; a bot cannot
/// count on that).
pub const MAX_FILE_BYTES: usize = 10 * 1024 * 1024;
/// Discord's limit on files per message.
pub const MAX_FILES: usize = 10;
/// Discord's limit on a whole request.
pub const MAX_REQUEST_BYTES: usize = 25 * 1024 * 1024;

/// One file to upload.
#[derive(Clone, Copy, Debug)]
pub struct Upload<'a> {
    /// The file name shown in Discord (plain ASCII, no quotes or slashes).
    pub filename: &'a str,
    /// Its MIME type.
    pub content_type: &'a str,
    /// Its content.
    pub bytes: &'a [u8],
}

/// The `Content-Type` header value and the body.
pub(crate) fn form(payload_json: &[u8], files: &[Upload<'_>]) -> (String, Vec<u8>) {
    let boundary = loop {
        let candidate: String = std::iter::repeat_with(fastrand::alphanumeric)
            .take(32)
            .collect();
        let clashes = |data: &[u8]| {
            data.windows(candidate.len())
                .any(|w| w == candidate.as_bytes())
        };
        if !clashes(payload_json) && !files.iter().any(|f| clashes(f.bytes)) {
            break candidate;
        }
    };
    let size = payload_json.len() + files.iter().map(|f| f.bytes.len() + 200).sum::<usize>();
    let mut body = Vec::with_capacity(size + 200);
    let mut part = |head: String, data: &[u8]| {
        body.extend_from_slice(format!("--{boundary}\r\n{head}\r\n\r\n").as_bytes());
        body.extend_from_slice(data);
        body.extend_from_slice(b"\r\n");
    };
    part(
        "Content-Disposition: form-data; name=\"payload_json\"\r\nContent-Type: application/json"
            .to_owned(),
        payload_json,
    );
    for (index, file) in files.iter().enumerate() {
        part(
            format!(
                "Content-Disposition: form-data; name=\"files[{index}]\"; filename=\"{}\"\r\nContent-Type: {}",
                file.filename, file.content_type
            ),
            file.bytes,
        );
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
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
        let (content_type, body) = form(
            br#"{"content":"hi"}"#,
            &[Upload {
                filename: "reply.txt",
                content_type: "text/plain; charset=utf-8",
                bytes: text,
            }],
        );
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
    fn file_names_are_checked() {
        assert!(plain_filename("reply.txt"));
        assert!(!plain_filename("a\"b.txt"));
        assert!(!plain_filename("../x"));
        assert!(!plain_filename(""));
    }
}
