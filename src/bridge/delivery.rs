//! Delivery: a reply or result goes out as Discord-sized messages (split on
//! line boundaries at 2000 characters; the REST client honours 429s and
//! rate-limit buckets and retries 5xx), or, when that would take more than
//! [`MAX_REPLY_MESSAGES`] messages, as one text file with a short message.
//! When it fails for good (403,
//! unknown channel, 5xx after retries, rate limited beyond the budget), the
//! `dm_fallback_cmd` gets the result JSON on stdin (bounded by
//! `dm_fallback_timeout_s`), and the result is archived with the outcome:
//! nothing is dropped silently.

use super::counters::Counter;
use super::ctx::Ctx;
use super::spool::{ArchiveEntry, Outcome};
use crate::offload::run_command;
use crate::protocol::Snowflake;
use crate::recorder::FailureKind;
use crate::rest::{split_message, RestError, Upload, MESSAGE_LIMIT};
use crate::status::now_unix_ms;
use serde::Serialize;
use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

/// A reply longer than this many messages goes out as one text file (with
/// a short message) instead. Three messages (6 000 characters) still read
/// as one reply in a chat; past that a wall of messages buries the
/// conversation, and each costs a request against the channel's rate limit
/// (about 5 per 5 s: a 1 MiB reply would be ~525 messages and ~9 minutes),
/// where the file is one request and keeps the text whole.
pub(crate) const MAX_REPLY_MESSAGES: usize = 3;
/// The name of that file.
pub(crate) const REPLY_FILE: &str = "reply.txt";

/// How a send failed, with what got through before.
#[derive(Debug)]
pub(crate) struct SendFailure {
    pub error: RestError,
    pub delivered: Vec<String>,
}

/// Sends `content` in chunks; the first chunk replaces `placeholder` (a
/// "working…" message) when there is one.
pub(crate) async fn send_chunks(
    ctx: &Ctx,
    channel: Snowflake,
    content: &str,
    placeholder: Option<&str>,
) -> Result<Vec<String>, SendFailure> {
    send_split(
        ctx,
        channel,
        &split_message(content, MESSAGE_LIMIT),
        placeholder,
    )
    .await
}

/// Sends a reply: `content` with `note` as its last line, in at most
/// [`MAX_REPLY_MESSAGES`] messages, else as [`REPLY_FILE`] with a short
/// message (which carries the note too). The first message replaces
/// `placeholder` when there is one.
pub(crate) async fn send_reply(
    ctx: &Ctx,
    channel: Snowflake,
    content: &str,
    note: Option<&str>,
    placeholder: Option<&str>,
) -> Result<Vec<String>, SendFailure> {
    let text: Cow<'_, str> = match note {
        Some(note) => format!("{content}\n\n{note}").into(),
        None => content.into(),
    };
    let chunks = split_message(&text, MESSAGE_LIMIT);
    if chunks.len() <= MAX_REPLY_MESSAGES {
        return send_split(ctx, channel, &chunks, placeholder).await;
    }
    drop(chunks);
    let mut message = format!(
        "The reply is {} characters long, so here it is as a file ({REPLY_FILE}).",
        text.chars().count()
    );
    if let Some(note) = note {
        message = format!("{message}\n{note}");
    }
    let file = Upload {
        filename: REPLY_FILE,
        content_type: "text/plain; charset=utf-8",
        bytes: text.as_bytes(),
    };
    let channel = channel.to_string();
    let sent = match placeholder {
        Some(id) => {
            match ctx
                .rest
                .edit_message_with_file(&channel, id, &message, file)
                .await
            {
                Ok(message) => Ok(message),
                Err(e) => {
                    log::warn!("replacing the placeholder failed ({e}); sending the reply as a new message");
                    ctx.rest
                        .create_message_with_file(&channel, &message, file)
                        .await
                }
            }
        }
        None => {
            ctx.rest
                .create_message_with_file(&channel, &message, file)
                .await
        }
    };
    match sent {
        Ok(message) => Ok(vec![message.id]),
        Err(error) => Err(SendFailure {
            error,
            delivered: Vec::new(),
        }),
    }
}

async fn send_split(
    ctx: &Ctx,
    channel: Snowflake,
    chunks: &[String],
    placeholder: Option<&str>,
) -> Result<Vec<String>, SendFailure> {
    let channel = channel.to_string();
    let mut delivered = Vec::new();
    for (index, chunk) in chunks.iter().enumerate() {
        let sent = match placeholder.filter(|_| index == 0) {
            Some(id) => match ctx.rest.edit_message(&channel, id, chunk).await {
                Ok(message) => Ok(message),
                Err(e) => {
                    log::warn!("replacing the placeholder failed ({e}); sending the reply as a new message");
                    ctx.rest.create_message(&channel, chunk).await
                }
            },
            None => ctx.rest.create_message(&channel, chunk).await,
        };
        match sent {
            Ok(message) => delivered.push(message.id),
            Err(error) => return Err(SendFailure { error, delivered }),
        }
    }
    Ok(delivered)
}

/// Sends a short notice (errors, pairing codes); failures are logged and
/// recorded, never retried beyond what the REST client does.
pub(crate) async fn notify(ctx: &Ctx, channel: Snowflake, text: &str) -> bool {
    match ctx.rest.create_message(&channel.to_string(), text).await {
        Ok(_) => true,
        Err(e) => {
            log::warn!("sending a notice failed: {e}");
            record_rest(ctx, FailureKind::Delivery, &e);
            false
        }
    }
}

pub(crate) fn record_rest(ctx: &Ctx, kind: FailureKind, e: &RestError) {
    let status = match e {
        RestError::Http { status, .. } => Some(i64::from(*status)),
        _ => None,
    };
    ctx.reporter.fail(kind, e.route(), status, rest_kind(e));
}

/// A type-only description of a REST error (no Discord message text).
fn rest_kind(e: &RestError) -> String {
    match e {
        RestError::Http { status, code, .. } => match code {
            Some(code) => format!("HTTP {status}, Discord error {code}"),
            None => format!("HTTP {status}"),
        },
        RestError::RateLimitedTooLong { attempts, .. } => {
            format!("rate limited beyond the retry budget ({attempts} tries)")
        }
        RestError::Timeout { .. } => "timed out".into(),
        RestError::Transport { .. } => "transport error".into(),
        RestError::Decode { .. } => "unexpected response body".into(),
        RestError::TooLarge { limit, .. } => format!("larger than {limit} bytes"),
        RestError::InvalidInput { .. } => "invalid input".into(),
        RestError::LocalIo { .. } => "local file error".into(),
    }
}

/// What the DM fallback command reads on stdin.
#[derive(Serialize)]
struct FallbackInput<'a> {
    id: &'a str,
    channel_id: Snowflake,
    content: &'a str,
    error: String,
    delivered_message_ids: &'a [String],
}

/// A reply or result to deliver.
pub(crate) struct Outgoing<'a> {
    pub id: &'a str,
    pub channel: Snowflake,
    pub content: &'a str,
    /// A line for the user about the reply itself (say, that it was cut).
    pub note: Option<&'a str>,
    pub placeholder: Option<&'a str>,
    /// Archive even when delivered (spool results); replies are archived
    /// only when delivery failed.
    pub archive_delivered: bool,
    /// The result file to remove once archived.
    pub source: Option<&'a Path>,
}

/// Delivers, falls back, archives. Returns the outcome; the archive step's
/// own failure is logged and recorded (and returned as `Err`, so a result
/// file that could not be archived is not delivered again and again).
pub(crate) async fn deliver(ctx: &Ctx, out: Outgoing<'_>) -> Result<Outcome, Outcome> {
    let (outcome, error, delivered) =
        match send_reply(ctx, out.channel, out.content, out.note, out.placeholder).await {
            Ok(ids) => {
                ctx.counters.bump(Counter::RepliesDelivered);
                ctx.turn_succeeded();
                if !out.archive_delivered {
                    return Ok(Outcome::Delivered);
                }
                (Outcome::Delivered, None, ids)
            }
            Err(SendFailure { error, delivered }) => {
                log::warn!(
                    "delivery of {} to channel {} failed for good: {error}",
                    out.id,
                    out.channel
                );
                record_rest(ctx, FailureKind::Delivery, &error);
                ctx.counters.bump(Counter::Undelivered);
                let (outcome, detail) = fallback(ctx, &out, &error, &delivered).await;
                (outcome, Some(detail), delivered)
            }
        };
    let entry = ArchiveEntry {
        id: out.id.to_owned(),
        channel_id: out.channel,
        content: out.content.to_owned(),
        outcome,
        error,
        delivered_message_ids: delivered,
        archived_unix_ms: now_unix_ms(),
    };
    match ctx.spool.archive(&entry, out.source).await {
        Ok(path) => {
            log::info!("archived {} ({outcome:?}) as {}", out.id, path.display());
            Ok(outcome)
        }
        Err(e) => {
            log::error!("archiving {} failed: {e}", out.id);
            ctx.reporter.fail(
                FailureKind::State,
                "spool/archive",
                None,
                "archive write failed",
            );
            Err(outcome)
        }
    }
}

async fn fallback(
    ctx: &Ctx,
    out: &Outgoing<'_>,
    error: &RestError,
    delivered: &[String],
) -> (Outcome, String) {
    let Some(argv) = ctx.config.dm_fallback_cmd.clone() else {
        return (
            Outcome::Undelivered,
            format!("{error}; no dm_fallback_cmd configured"),
        );
    };
    let program = argv.first().cloned().unwrap_or_default();
    let input = FallbackInput {
        id: out.id,
        channel_id: out.channel,
        content: out.content,
        error: error.to_string(),
        delivered_message_ids: delivered,
    };
    let mut spec = super::tool_command(argv, Duration::from_secs(ctx.config.dm_fallback_timeout_s));
    spec.stdin = serde_json::to_vec(&input).ok();
    ctx.counters.bump(Counter::FallbacksRun);
    let failed = |why: String| {
        log::warn!("dm_fallback_cmd for {} failed: {why}", out.id);
        (
            Outcome::FallbackFailed,
            format!("{error}; dm_fallback_cmd {why}"),
        )
    };
    match run_command(spec).await {
        Ok(done) if done.success() => {
            log::info!("dm_fallback_cmd took {} ({:?})", out.id, done.duration);
            (Outcome::FallbackOk, error.to_string())
        }
        Ok(done) if done.timed_out => {
            let why = format!("timed out after {} s", ctx.config.dm_fallback_timeout_s);
            ctx.reporter
                .fail(FailureKind::Fallback, &program, None, why.clone());
            failed(why)
        }
        Ok(done) => {
            let why = match (done.exit_code, done.signal) {
                (Some(code), _) => format!("exited with code {code}"),
                (None, Some(signal)) => format!("was killed by signal {signal}"),
                (None, None) => "ended abnormally".to_owned(),
            };
            ctx.reporter.fail(
                FailureKind::Fallback,
                &program,
                done.exit_code.map(i64::from),
                why.clone(),
            );
            failed(why)
        }
        Err(e) => {
            ctx.reporter.fail(
                FailureKind::Fallback,
                &program,
                None,
                "could not be started",
            );
            failed(format!("could not be run: {e}"))
        }
    }
}
