//! [`MessageDraft`]: what a message says — text, files, the message it
//! replies to, its nonce — as one set of options for creating and for
//! editing a message, checked against Discord's limits before anything is
//! sent.

use super::multipart::{self, Segment, Upload, MAX_FILES, MAX_FILE_BYTES, MAX_REQUEST_BYTES};
use super::nonce::Nonce;
use super::split::MESSAGE_LIMIT;
use crate::protocol::Snowflake;
use serde_json::{json, Value};

/// A message to create ([`super::RestClient::create_message`]) or the new
/// state of one to edit ([`super::RestClient::edit_message`]).
///
/// Mentions never ping: every draft goes out with `allowed_mentions` empty
/// (a bot relaying an agent's text must not let that text ping `@everyone`).
///
/// ```
/// use smolcord::protocol::Snowflake;
/// use smolcord::rest::{MessageDraft, Nonce, Upload};
/// let nonce = Nonce::random();
/// let chart = Upload::bytes("chart.png", "image/png", b"\x89PNG");
/// let draft = MessageDraft::text("here it is")
///     .nonce(&nonce)
///     .file(chart)
///     .reply_to(Snowflake::new(1234));
/// assert_eq!(draft.files().len(), 1);
/// ```
#[derive(Clone, Debug)]
pub struct MessageDraft<'a> {
    content: &'a str,
    nonce: Option<&'a Nonce>,
    files: Vec<Upload<'a>>,
    attachments_metadata: bool,
    reply_to: Option<Snowflake>,
}

impl<'a> MessageDraft<'a> {
    /// A message of `content` (1 to 2 000 characters; with files it may be
    /// empty).
    pub fn text(content: &'a str) -> MessageDraft<'a> {
        MessageDraft {
            content,
            nonce: None,
            files: Vec::new(),
            attachments_metadata: true,
            reply_to: None,
        }
    }

    /// Sends a new message under `nonce` with `enforce_nonce`: a retry
    /// after a lost answer, or a later call with the same nonce within
    /// Discord's window (a few minutes), creates nothing new. Without one,
    /// [`super::RestClient::create_message`] picks a random nonce (which
    /// still makes its own retries safe). Not for edits.
    pub fn nonce(mut self, nonce: &'a Nonce) -> Self {
        self.nonce = Some(nonce);
        self
    }

    /// Attaches a file (up to 10, Discord's limit, within its sizes). On an
    /// edit, the files given replace the message's attachments.
    pub fn file(mut self, file: Upload<'a>) -> Self {
        self.files.push(file);
        self
    }

    /// Leaves out the `attachments` array of `payload_json`. Discord
    /// documents it as optional for a new message ("Uploading Files": each
    /// `files[n]` part names its file; the array adds metadata), and a
    /// server that refuses the form with it may take it without: the
    /// fallback for an upload refused for good. An edit needs the array
    /// (Discord keeps only the files it lists), so edits always send it.
    pub fn without_attachments_metadata(mut self) -> Self {
        self.attachments_metadata = false;
        self
    }

    /// Makes the message a reply to `message_id` in the same channel,
    /// without pinging its author, and still sent if that message is gone
    /// (`fail_if_not_exists: false`). Not for edits.
    pub fn reply_to(mut self, message_id: Snowflake) -> Self {
        self.reply_to = Some(message_id);
        self
    }

    /// The text.
    pub fn content(&self) -> &'a str {
        self.content
    }

    /// The files.
    pub fn files(&self) -> &[Upload<'a>] {
        &self.files
    }

    /// The draft's nonce, else `fallback`.
    pub(crate) fn nonce_or<'b>(&'b self, fallback: &'b Nonce) -> &'b Nonce {
        self.nonce.unwrap_or(fallback)
    }

    /// The JSON body (`payload_json` when there are files) of the draft
    /// sent as a new message (`edit` false) or an edit, checked.
    pub(crate) fn body(&self, nonce: Option<&Nonce>, edit: bool) -> Result<Value, String> {
        if edit && (self.nonce.is_some() || self.reply_to.is_some()) {
            return Err("a nonce or a reply applies to a new message, not an edit".into());
        }
        let chars = self.content.chars().count();
        let blank = self.content.trim().is_empty();
        if chars > MESSAGE_LIMIT || (blank && self.files.is_empty()) {
            return Err(format!(
                "content has {chars} characters; Discord takes 1 to {MESSAGE_LIMIT} (use split_message)"
            ));
        }
        let mut body = json!({
            "content": self.content,
            "allowed_mentions": { "parse": [], "replied_user": false },
        });
        if let Some(nonce) = nonce {
            body["nonce"] = nonce.as_str().into();
            body["enforce_nonce"] = true.into();
        }
        if let Some(message_id) = self.reply_to {
            body["message_reference"] = json!({
                "message_id": message_id,
                "fail_if_not_exists": false,
            });
        }
        if !self.files.is_empty() && (self.attachments_metadata || edit) {
            let listed: Vec<Value> = self
                .files
                .iter()
                .enumerate()
                .map(|(id, file)| json!({ "id": id, "filename": file.filename }))
                .collect();
            body["attachments"] = listed.into();
        }
        Ok(body)
    }

    /// The multipart form of `payload` with the draft's files, within
    /// Discord's limits: `(content type, body)`.
    pub(crate) fn form(&self, payload: &Value) -> Result<(String, Vec<Segment>), String> {
        if self.files.len() > MAX_FILES {
            return Err(format!(
                "{} files; Discord takes at most {MAX_FILES} a message",
                self.files.len()
            ));
        }
        for file in &self.files {
            if !multipart::plain_filename(file.filename) {
                return Err(format!(
                    "file name {:?} must be 1 to 100 ASCII letters, digits, '.', '_' or '-'",
                    file.filename.chars().take(40).collect::<String>()
                ));
            }
            if file.len() > MAX_FILE_BYTES as u64 {
                return Err(format!(
                    "{} has {} bytes; Discord takes at most {MAX_FILE_BYTES} per file",
                    file.filename,
                    file.len()
                ));
            }
        }
        let (content_type, segments) = multipart::form(payload.to_string().as_bytes(), &self.files);
        let bytes: u64 = segments.iter().map(Segment::len).sum();
        if bytes > MAX_REQUEST_BYTES as u64 {
            return Err(format!(
                "the request has {bytes} bytes; Discord takes at most {MAX_REQUEST_BYTES}"
            ));
        }
        Ok((content_type, segments))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(name: &'static str) -> Upload<'static> {
        Upload::bytes(name, "image/png", b"png")
    }

    #[test]
    fn a_reply_names_its_message_and_pings_no_one() {
        let body = MessageDraft::text("hi")
            .reply_to(Snowflake::new(5))
            .body(None, false)
            .unwrap();
        assert_eq!(body["message_reference"]["message_id"], "5");
        assert_eq!(body["message_reference"]["fail_if_not_exists"], false);
        assert_eq!(body["allowed_mentions"]["replied_user"], false);
        assert_eq!(body["allowed_mentions"]["parse"], json!([]));
    }

    #[test]
    fn every_file_is_listed_unless_the_metadata_is_left_out_of_a_new_message() {
        let draft = MessageDraft::text("").file(png("a.png")).file(png("b.png"));
        let body = draft.body(None, false).unwrap();
        assert_eq!(body["attachments"][1]["filename"], "b.png");
        let bare = draft.clone().without_attachments_metadata();
        assert!(bare.body(None, false).unwrap().get("attachments").is_none());
        assert!(bare.body(None, true).unwrap().get("attachments").is_some());
    }

    #[test]
    fn what_discord_refuses_is_refused_before_sending() {
        assert!(MessageDraft::text(" ").body(None, false).is_err());
        let long = "x".repeat(MESSAGE_LIMIT + 1);
        assert!(MessageDraft::text(&long).body(None, false).is_err());
        let nonce = Nonce::random();
        assert!(MessageDraft::text("x")
            .nonce(&nonce)
            .body(None, true)
            .is_err());
        let mut eleven = MessageDraft::text("x");
        for _ in 0..=MAX_FILES {
            eleven = eleven.file(png("a.png"));
        }
        assert!(eleven.form(&json!({})).unwrap_err().contains("at most 10"));
        let odd = MessageDraft::text("x").file(png("../a.png"));
        assert!(odd.form(&json!({})).is_err());
    }
}
