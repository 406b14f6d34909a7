//! Files in: every attachment of an accepted message is downloaded into the
//! task's own `files/ID/in/` directory before the agent runs, and the task
//! names each local file (`path`) beside its URL. An agent in a sandbox
//! without network, or a spool agent that runs after the signed link
//! expired, still has the bytes.
//!
//! Off the loop and never in memory: [`smolcord::rest::RestClient::download`]
//! streams to the file on the blocking pool. Bounded per file
//! (`max_attachment_bytes`), per message ([`MAX_ATTACHMENTS`], Discord's
//! own limit) and in total on disk (`Tunables::files_budget`, reserved
//! before a download starts). What is left out says why in the task
//! (`left_out`), and the user is told once per message.
//!
//! Downloads go only to Discord's CDN, `https://cdn.discordapp.com` and
//! `https://media.discordapp.net` (where Discord's attachment URLs point),
//! or to the API's own host (the simulator, a self-hosted server, which
//! serve attachments beside their API): an attachment URL is data a
//! message carries, and the bridge must not fetch whatever it names. Each
//! redirect is checked by the same rule before it is followed
//! ([`smolcord::rest::download_allowed`]); one that leads elsewhere leaves
//! the file out, saying where it led.

use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::delivery::notify;
use crate::bridge::store::nonce::{self, Notice};
use crate::bridge::store::spool::TaskAttachment;
use smolcord::protocol::{Attachment, Message, Snowflake};
use smolcord::rest::RestError;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;

/// Attachments of one message downloaded at most: Discord sends 10 at most.
pub(crate) const MAX_ATTACHMENTS: usize = 10;

/// Why an attachment whose URL is not on Discord's CDN was left out.
const NOT_ON_CDN: &str = "it is not on Discord's CDN";

/// Longest file name kept on disk (a name's bytes, before its index).
const MAX_NAME_BYTES: usize = 100;

/// What was downloaded, and what was not and why, by attachment id.
#[derive(Debug, Default)]
pub(crate) struct Fetched {
    pub paths: BTreeMap<Snowflake, PathBuf>,
    pub left_out: BTreeMap<Snowflake, String>,
}

impl Fetched {
    /// Sets `path` or `left_out` on each of the task's attachments.
    pub fn fill(&self, attachments: &mut [TaskAttachment]) {
        for attachment in attachments {
            attachment.path = self
                .paths
                .get(&attachment.id)
                .map(|p| p.to_string_lossy().into_owned());
            attachment.left_out = self.left_out.get(&attachment.id).cloned();
        }
    }
}

/// Downloads `message`'s attachments into the task's `in/` directory;
/// tells the user once what was left out.
pub(crate) async fn fetch_attachments(ctx: &Ctx, message: &Message) -> Fetched {
    let mut fetched = Fetched::default();
    if message.attachments.is_empty() {
        return fetched;
    }
    let id = message.id.to_string();
    let dir = ctx.files.in_dir(&id);
    if let Err(e) = smolcord::offload::create_dir_all(&dir).await {
        log::warn!(
            "message {}: {e}; its attachments are not downloaded",
            message.id
        );
        for attachment in &message.attachments {
            let why = "the bridge could not make a directory for it".to_owned();
            fetched.left_out.insert(attachment.id, why);
        }
    } else {
        let mut names = HashSet::new();
        for (n, attachment) in message.attachments.iter().enumerate() {
            let result = if n >= MAX_ATTACHMENTS {
                Err(format!("more than {MAX_ATTACHMENTS} attachments"))
            } else {
                let name = disk_name(n, &attachment.filename, &mut names);
                fetch_one(ctx, attachment, dir.join(name)).await
            };
            match result {
                Ok(path) => {
                    fetched.paths.insert(attachment.id, path);
                }
                Err(why) => {
                    log::warn!(
                        "attachment {} of message {} left out: {why}",
                        attachment.id,
                        message.id
                    );
                    fetched.left_out.insert(attachment.id, why);
                }
            }
        }
    }
    if !fetched.left_out.is_empty() {
        let text = left_out_notice(&message.attachments, &fetched.left_out);
        let nonce = nonce::notice(message.id, Notice::FilesLeftOut);
        notify(ctx, message.channel_id, &text, &nonce).await;
    }
    fetched
}

async fn fetch_one(ctx: &Ctx, attachment: &Attachment, path: PathBuf) -> Result<PathBuf, String> {
    let limit = ctx.config.max_attachment_bytes;
    if attachment.size > limit {
        return Err(format!("larger than the {} limit", size_text(limit)));
    }
    allowed_source(&attachment.url, ctx.rest.api_base())?;
    // Reserved at its declared size; what the download really wrote is
    // settled after it (a CDN that sends more is cut at `limit`).
    let reserved = attachment.size.max(1);
    if !ctx.files.reserve(reserved).await {
        return Err(format!(
            "the bridge's room for files ({}) is full",
            size_text(ctx.files.budget())
        ));
    }
    match ctx.rest.download(&attachment.url, limit, &path).await {
        Ok(written) => {
            ctx.files.release(reserved);
            ctx.files.add(written);
            Ok(path)
        }
        Err(e) => {
            // The client removed the partial file.
            ctx.files.release(reserved);
            log::debug!("downloading attachment {}: {e}", attachment.id);
            Err(match e {
                RestError::TooLarge { limit, .. } => {
                    format!("larger than the {} limit", size_text(limit))
                }
                RestError::LocalIo { .. } => "it could not be written to disk (full?)".to_owned(),
                RestError::ForeignHost {
                    origin,
                    redirects: 1..,
                    ..
                } => format!("the CDN redirected it off Discord's CDN (to {origin})"),
                RestError::ForeignHost { .. } => NOT_ON_CDN.to_owned(),
                RestError::TooManyRedirects { limit, .. } => {
                    format!("the CDN redirected it more than {limit} times")
                }
                _ => "the download failed".to_owned(),
            })
        }
    }
}

/// Whether `url` may be downloaded (the library's rule:
/// [`smolcord::rest::download_allowed`]); the error is the task's reason.
pub(crate) fn allowed_source(url: &str, api_base: &str) -> Result<(), String> {
    smolcord::rest::download_allowed(url, api_base).map_err(|_| NOT_ON_CDN.to_owned())
}

/// A safe file name for attachment `n`: its name with anything but
/// letters, digits, `.`, `-` and `_` replaced, never hidden or empty, cut
/// to [`MAX_NAME_BYTES`]; prefixed with its number if a sibling took it.
fn disk_name(n: usize, filename: &str, taken: &mut HashSet<String>) -> String {
    let mut name: String = filename
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name_start = name.trim_start_matches('.').len();
    name = name[name.len() - name_start..].to_owned();
    if name.len() > MAX_NAME_BYTES {
        // Keep the extension: it tells the agent what the file is.
        let ext = name
            .rsplit_once('.')
            .map(|(_, e)| e)
            .filter(|e| e.len() <= 16)
            .unwrap_or("");
        let keep = MAX_NAME_BYTES - ext.len() - 1;
        name = format!("{}.{ext}", &name[..keep]);
    }
    if name.is_empty() {
        name = "file".to_owned();
    }
    if !taken.insert(name.clone()) {
        name = format!("{n}-{name}");
        taken.insert(name.clone());
    }
    name
}

/// The one notice naming what was left out and why.
fn left_out_notice(attachments: &[Attachment], left_out: &BTreeMap<Snowflake, String>) -> String {
    let list: Vec<String> = attachments
        .iter()
        .filter_map(|a| {
            let why = left_out.get(&a.id)?;
            let name: String = a.filename.chars().take(MAX_NAME_BYTES).collect();
            Some(format!("{name} ({why})"))
        })
        .take(MAX_ATTACHMENTS + 1)
        .collect();
    let total = left_out.len();
    let mut text = if total == 1 {
        "One of your attachments was not passed on to the agent: ".to_owned()
    } else {
        format!("{total} of your attachments were not passed on to the agent: ")
    };
    text.push_str(&list.join(", "));
    if total > list.len() {
        text.push_str(&format!(", and {} more", total - list.len()));
    }
    text.push('.');
    text
}

pub(crate) fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    if bytes >= MIB {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_off_the_cdn_is_left_out_saying_so() {
        let api = "http://127.0.0.1:4000/api/v10";
        assert!(allowed_source("https://cdn.discordapp.com/attachments/1/2/a.png", api).is_ok());
        assert!(allowed_source("http://127.0.0.1:4000/attachments/1/2/a.png", api).is_ok());
        assert_eq!(
            allowed_source("https://x.example/a", api).unwrap_err(),
            "it is not on Discord's CDN"
        );
    }

    #[test]
    fn names_on_disk_are_tame_and_distinct() {
        let mut taken = HashSet::new();
        assert_eq!(disk_name(0, "receipt.png", &mut taken), "receipt.png");
        assert_eq!(disk_name(1, "receipt.png", &mut taken), "1-receipt.png");
        assert_eq!(
            disk_name(2, "../../etc/passwd", &mut taken),
            "_.._etc_passwd"
        );
        assert_eq!(disk_name(3, ".bashrc", &mut taken), "bashrc");
        assert_eq!(disk_name(4, "", &mut taken), "file");
        assert_eq!(disk_name(5, "résumé 1.pdf", &mut taken), "r_sum__1.pdf");
        let long = format!("{}.tar.gz", "a".repeat(300));
        let name = disk_name(6, &long, &mut taken);
        assert_eq!(name.len(), MAX_NAME_BYTES);
        assert!(name.ends_with(".gz"), "{name}");
    }
}
