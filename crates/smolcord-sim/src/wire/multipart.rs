//! `multipart/form-data` bodies, as Discord takes file uploads:
//! a `payload_json` part plus `files[n]` parts.

/// One part of a multipart body.
#[derive(Debug, PartialEq)]
pub(crate) struct Part {
    pub(crate) name: String,
    pub(crate) filename: Option<String>,
    pub(crate) content_type: Option<String>,
    pub(crate) data: Vec<u8>,
}

fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').find_map(|param| {
        let (key, value) = param.trim().split_once('=')?;
        key.eq_ignore_ascii_case("boundary")
            .then(|| value.trim_matches('"').to_owned())
    })
}

/// Reads `name="x"` style parameters of a Content-Disposition value.
fn disposition_param(value: &str, key: &str) -> Option<String> {
    value.split(';').find_map(|param| {
        let (k, v) = param.trim().split_once('=')?;
        k.eq_ignore_ascii_case(key)
            .then(|| v.trim().trim_matches('"').to_owned())
    })
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Splits a multipart body into its parts.
pub(crate) fn parse(content_type: &str, body: &[u8]) -> Result<Vec<Part>, String> {
    let boundary = boundary(content_type)
        .filter(|b| !b.is_empty())
        .ok_or("multipart/form-data without a boundary")?;
    let delimiter = format!("--{boundary}");
    let delimiter = delimiter.as_bytes();
    let mut pos =
        find(body, delimiter, 0).ok_or("multipart body has no opening boundary")? + delimiter.len();
    let mut parts = Vec::new();
    loop {
        if body.get(pos..pos + 2) == Some(b"--") {
            return Ok(parts);
        }
        // Skip the CRLF after the boundary line.
        pos = find(body, b"\r\n", pos).ok_or("truncated multipart boundary line")? + 2;
        let head_end = find(body, b"\r\n\r\n", pos).ok_or("multipart part without a header end")?;
        let head = String::from_utf8_lossy(&body[pos..head_end]).into_owned();
        let data_start = head_end + 4;
        let mut closing = b"\r\n".to_vec();
        closing.extend_from_slice(delimiter);
        let data_end =
            find(body, &closing, data_start).ok_or("multipart part is not terminated")?;
        let mut part = Part {
            name: String::new(),
            filename: None,
            content_type: None,
            data: body[data_start..data_end].to_vec(),
        };
        for line in head.split("\r\n") {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            if name.trim().eq_ignore_ascii_case("content-disposition") {
                part.name = disposition_param(value, "name").unwrap_or_default();
                part.filename = disposition_param(value, "filename");
            } else if name.trim().eq_ignore_ascii_case("content-type") {
                part.content_type = Some(value.trim().to_owned());
            }
        }
        parts.push(part);
        pos = data_end + closing.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_json_and_a_file() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\
Content-Type: application/json\r\n\r\n{\"content\":\"hi\"}\r\n--XyZ\r\n\
Content-Disposition: form-data; name=\"files[0]\"; filename=\"a.txt\"\r\n\
Content-Type: text/plain\r\n\r\nline1\r\nline2\r\n--XyZ--\r\n";
        let parts = parse("multipart/form-data; boundary=\"XyZ\"", body).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "payload_json");
        assert_eq!(parts[0].data, b"{\"content\":\"hi\"}");
        assert_eq!(parts[1].filename.as_deref(), Some("a.txt"));
        assert_eq!(parts[1].data, b"line1\r\nline2");
        assert_eq!(parts[1].content_type.as_deref(), Some("text/plain"));
    }

    #[test]
    fn broken_bodies_are_errors() {
        assert!(parse("multipart/form-data", b"").is_err());
        assert!(parse("multipart/form-data; boundary=a", b"nothing").is_err());
        assert!(parse(
            "multipart/form-data; boundary=a",
            b"--a\r\nX: y\r\n\r\nunterminated"
        )
        .is_err());
    }
}
