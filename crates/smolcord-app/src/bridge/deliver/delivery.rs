//! Delivery, the end of the message path: a reply or result goes out as
//! Discord-sized messages (split on line boundaries at 2000 characters; the
//! REST client honours 429s and rate-limit buckets and retries 5xx and
//! timeouts, the nonce making a repeat post nothing new), or, when that
//! would take more than [`MAX_REPLY_MESSAGES`] messages, as one text file
//! with a short message. Each part carries a nonce from its outbox record
//! and the record is saved between parts ([`send`]), so a restart neither
//! repeats nor skips one. A part rate limited past the REST client's
//! budget is tried again later (a limit passes; it is no refusal). When
//! delivery fails for good (403, unknown channel, 5xx or timeouts after
//! retries, still rate limited after the later tries),
//! the `dm_fallback_cmd` gets the result JSON on stdin (bounded by
//! `dm_fallback_timeout_s`), and the result is archived with the outcome
//! ([`settle`]): nothing is dropped silently. A file refused for good falls
//! back to text, and a placeholder never stays "working…" ([`send`]). The
//! agent's output files follow the text as messages of their own
//! ([`super::files_out`]), parts like the others.

use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::files_out::{self, OutFile, Outgoing};
use crate::bridge::deliver::tool::tool_command;
use crate::bridge::report::counters::Counter;
use crate::bridge::store::outbox::Record;
use crate::bridge::store::spool::{ArchiveEntry, Outcome};
use crate::recorder::FailureKind;
use crate::status::now_unix_ms;
use serde::Serialize;
use smolcord::offload::run_command;
use smolcord::protocol::Snowflake;
use smolcord::rest::{split_message, MessageDraft, Nonce, RestError, Upload, MESSAGE_LIMIT};
use smolcord::rt::Timer;
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

/// How a reply goes out: as messages, or as one file with a short message.
/// A function of the text alone, so a delivery resumed after a restart cuts
/// the same parts.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Up to [`MAX_REPLY_MESSAGES`] messages.
    Messages(Vec<String>),
    /// [`REPLY_FILE`] holding `text`, with `message`.
    File { message: String, text: String },
}

impl Plan {
    /// `content` with `note` as its last line, in at most
    /// [`MAX_REPLY_MESSAGES`] messages, else as [`REPLY_FILE`] with a short
    /// message (which carries the note too). Every reply and result goes
    /// through here, so this is where what a user may see is decided:
    /// [`visible`](crate::bridge::deliver::shown::visible) text only, no escape sequences or
    /// control bytes. The same content always gives the same plan (the
    /// parts' nonces depend on it).
    pub fn new(content: &str, note: Option<&str>) -> Plan {
        let mut content = crate::bridge::deliver::shown::visible(content);
        if content.trim().is_empty() {
            content = "(Nothing to show: the text held only control characters.)".into();
        }
        let text = match note {
            Some(note) => format!("{content}\n\n{note}"),
            None => content.into_owned(),
        };
        let chunks = split_message(&text, MESSAGE_LIMIT);
        if chunks.len() <= MAX_REPLY_MESSAGES {
            return Plan::Messages(chunks);
        }
        drop(chunks);
        let mut message = format!(
            "The reply is {} characters long, so here it is as a file ({REPLY_FILE}).",
            text.chars().count()
        );
        if let Some(note) = note {
            message = format!("{message}\n{note}");
        }
        Plan::File { message, text }
    }

    /// How many messages it takes.
    pub fn parts(&self) -> usize {
        match self {
            Plan::Messages(chunks) => chunks.len(),
            Plan::File { .. } => 1,
        }
    }
}

/// A reply whose file upload was refused for good goes as at most this
/// many text messages instead (10 000 characters), the last saying where
/// it was cut: the start of the answer, readable in the chat, for 5
/// requests against the channel's rate limit (about 5 per 5 s).
pub(crate) const MAX_FALLBACK_MESSAGES: usize = 5;

impl Plan {
    /// The plan when the file cannot be uploaded: its text in at most
    /// [`MAX_FALLBACK_MESSAGES`] messages, cut (and saying so) if longer.
    /// A function of the text alone, like [`Plan::new`].
    fn as_text(&self) -> Plan {
        match self {
            Plan::Messages(chunks) => Plan::Messages(chunks.clone()),
            Plan::File { text, .. } => Plan::Messages(cut_to_messages(text, MAX_FALLBACK_MESSAGES)),
        }
    }
}

/// `text` in at most `cap` messages: whole if it fits, else its start and
/// a last line saying how much of it this is. Shrinks the start by a
/// quarter message a round (at most `4 × cap` rounds).
fn cut_to_messages(text: &str, cap: usize) -> Vec<String> {
    let whole = split_message(text, MESSAGE_LIMIT);
    if whole.len() <= cap {
        return whole;
    }
    drop(whole);
    let total = text.chars().count();
    let mut keep = cap * MESSAGE_LIMIT;
    loop {
        keep = keep.saturating_sub(MESSAGE_LIMIT / 4);
        let head: String = text.chars().take(keep).collect();
        let note = format!(
            "(The reply has {total} characters and could not be sent as a file ({REPLY_FILE}); \
             these are the first {}, the rest was cut.)",
            head.chars().count()
        );
        let chunks = split_message(&format!("{head}\n\n{note}"), MESSAGE_LIMIT);
        if chunks.len() <= cap || keep == 0 {
            return chunks;
        }
    }
}

/// The placeholder's text once the reply went out as new messages below it
/// (its edit into the reply failed).
pub(crate) const PLACEHOLDER_DONE: &str = "(The reply is below.)";

/// Sends the parts of `plan` that `record` does not list as sent, in order,
/// each with its nonce from the record. After each part that has another
/// after it, the record is saved (fsync'd) before that one goes out, so a
/// restart goes on from the part after; a part sent but not yet recorded
/// when the process died is sent again with the same nonce, which Discord
/// does not post twice within its window. The first part replaces
/// `placeholder` (a "working…" message) when there is one.
///
/// Nothing ends in silence: a file upload refused for good is tried once
/// without its optional `attachments` metadata (not when refused as too
/// large, 413: the same bytes would be refused again), then the text goes
/// as messages ([`MAX_FALLBACK_MESSAGES`] at most, the switch recorded first);
/// a placeholder that the reply could not replace is edited to say where
/// the reply is, or what failed; a reply that failed otherwise gets a
/// notice naming the failure (unless the channel refuses the bot outright:
/// then the caller's DM fallback is the way left).
pub(crate) async fn send<R: Record>(
    ctx: &Ctx,
    channel: Snowflake,
    plan: &Plan,
    files: &Outgoing,
    record: &mut R,
    placeholder: Option<Snowflake>,
) -> Result<(), RestError> {
    let mut text_plan = record.sent().as_text.then(|| plan.as_text());
    let mut later_tries = 0;
    let sent = loop {
        let plan = text_plan.as_ref().unwrap_or(plan);
        let text_parts = plan.parts();
        let parts = text_parts + files.parts();
        let part = record.sent().parts();
        if part >= parts {
            break Ok(());
        }
        let nonce = record.nonce(part);
        if part >= text_parts {
            // The files, after the text: parts like the others.
            match send_files(ctx, channel, files, part - text_parts, &nonce).await {
                Ok(id) => {
                    record.sent().message_ids.push(id);
                    if part + 1 < parts {
                        save(ctx, record).await;
                    }
                    continue;
                }
                Err(e) => break Err(e),
            }
        }
        let replaces = placeholder.filter(|_| part == 0);
        let reply_to = record.replies_to().filter(|_| part == 0);
        match send_part(ctx, channel, plan, part, &nonce, replaces, reply_to).await {
            Ok(id) => {
                record.sent().message_ids.push(id);
                if part + 1 < parts {
                    save(ctx, record).await;
                }
            }
            Err(RestError::RateLimitedTooLong { retry_after, .. })
                if later_tries < RATE_LIMITED_LATER_TRIES =>
            {
                // Rate limited past the REST client's budget: a limit
                // passes, it is no refusal. The same part again once it
                // has (same nonce), then the other ways out below.
                later_tries += 1;
                let wait = retry_after.clamp(Duration::from_millis(100), RATE_LIMITED_LATER_WAIT);
                log::warn!(
                    "part {part} of a reply to channel {channel} is rate limited past the budget; trying again in {:.1} s",
                    wait.as_secs_f64()
                );
                Timer::after(wait).await;
            }
            Err(e) if matches!(plan, Plan::File { .. }) && !channel_refuses(&e) => {
                log::warn!("the reply could not be uploaded as a file ({e}); sending it as text");
                ctx.reporter.rest_failure(FailureKind::Delivery, &e);
                let fallback = plan.as_text();
                record.sent().as_text = true;
                // On record before the first text part goes out.
                save(ctx, record).await;
                text_plan = Some(fallback);
            }
            Err(e) => break Err(e),
        }
    };
    let delivered = record.sent().parts();
    let first = record.sent().message_ids.first().copied();
    // A placeholder the first part did not become is still "working…".
    let leftover = placeholder.filter(|&id| first != Some(id));
    let outcome = match &sent {
        Ok(()) => PLACEHOLDER_DONE.to_owned(),
        Err(e) => undelivered_text(e, delivered),
    };
    match (&sent, leftover) {
        (_, Some(id)) => {
            // An edit is idempotent: a restart may repeat it.
            if let Err(e) = ctx
                .rest
                .edit_message(channel, id, &MessageDraft::text(&outcome))
                .await
            {
                log::warn!("editing the placeholder to the outcome failed: {e}");
                ctx.reporter.rest_failure(FailureKind::Delivery, &e);
            }
        }
        (Err(e), None) if !channel_refuses(e) => {
            let nonce = record.undelivered_nonce();
            notify_about(ctx, channel, &outcome, &nonce, record.replies_to()).await;
        }
        _ => {}
    }
    sent
}

/// An error that says the channel (or the token) refuses the bot, not this
/// one request: no other form of the reply would get through either. Rate
/// limits are not refusals: they pass (see [`RATE_LIMITED_LATER_TRIES`]).
fn channel_refuses(e: &RestError) -> bool {
    matches!(
        e,
        RestError::Http {
            status: 401 | 403 | 404,
            ..
        }
    )
}

/// Discord's answer to a file over the upload limit where it goes (HTTP
/// 413, JSON code 40005 "Request entity too large"): the same bytes are
/// refused again, whatever else the request says.
fn too_large(e: &RestError) -> bool {
    matches!(
        e,
        RestError::Http { status: 413, .. }
            | RestError::Http {
                code: Some(40005),
                ..
            }
    )
}

/// A part rate limited past the REST client's budget is tried again this
/// many times, after what Discord asked to wait (at most
/// [`RATE_LIMITED_LATER_WAIT`] each), before the next way out: text for a
/// file, then the notice and the DM fallback. Bounded: a reply waits at
/// most a minute more for its rate limit.
const RATE_LIMITED_LATER_TRIES: u32 = 2;
/// The longest wait before one of those tries.
const RATE_LIMITED_LATER_WAIT: Duration = Duration::from_secs(30);

/// The notice that a reply failed, naming the failure (at most 300
/// characters of it).
fn undelivered_text(e: &RestError, delivered: usize) -> String {
    let mut why: String = e.to_string().chars().take(300).collect();
    if why.chars().count() == 300 {
        why.push('…');
    }
    match delivered {
        0 => format!("Sorry, the reply could not be delivered ({why})."),
        n => format!(
            "Sorry, the rest of the reply could not be delivered after {n} message{} ({why}).",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// Saves a delivery record. A failed save is logged and journalled, and
/// delivery goes on: a disk that fails must not silence the bot (a crash
/// before the next save may then repeat a part, as without the record).
pub(crate) async fn save<R: Record>(ctx: &Ctx, record: &R) {
    if let Err(e) = ctx.outbox.save(record).await {
        log::error!("recording delivery progress: {e}");
        ctx.reporter
            .fail(FailureKind::State, "outbox", None, "progress write failed");
    }
}

async fn send_part(
    ctx: &Ctx,
    channel: Snowflake,
    plan: &Plan,
    part: usize,
    nonce: &Nonce,
    placeholder: Option<Snowflake>,
    reply_to: Option<Snowflake>,
) -> Result<Snowflake, RestError> {
    let rest = &ctx.rest;
    let replying = |draft| replying(draft, reply_to);
    let (message, text) = match plan {
        Plan::Messages(chunks) => {
            let chunk = &chunks[part];
            if let Some(id) = placeholder {
                // An edit is idempotent: repeating it after a restart is harmless.
                match rest
                    .edit_message(channel, id, &MessageDraft::text(chunk))
                    .await
                {
                    Ok(message) => return Ok(message.id),
                    Err(e) => log::warn!(
                        "replacing the placeholder failed ({e}); sending the reply as a new message"
                    ),
                }
            }
            let created = rest
                .create_message(channel, &replying(MessageDraft::text(chunk).nonce(nonce)))
                .await;
            return created.map(|message| message.id);
        }
        Plan::File { message, text } => (message, text),
    };
    let draft = MessageDraft::text(message).file(upload(text));
    if let Some(id) = placeholder {
        match rest.edit_message(channel, id, &draft).await
        {
            Ok(message) => return Ok(message.id),
            // The same file as a new message would be refused the same
            // way: the text goes instead (the caller's fallback).
            Err(e) if too_large(&e) => return Err(e),
            Err(e) => log::warn!(
                "replacing the placeholder with {REPLY_FILE} failed ({e}); sending it as a new message"
            ),
        }
    }
    match rest
        .create_message(channel, &replying(draft.clone().nonce(nonce)))
        .await
    {
        Ok(message) => Ok(message.id),
        Err(e) if channel_refuses(&e) => Err(e),
        // Not the metadata's fault: the same bytes would be refused again.
        Err(e) if too_large(&e) => Err(e),
        Err(e) => {
            // The same nonce: if the refused form did post, this returns it.
            log::warn!(
                "uploading {REPLY_FILE} failed ({e}); trying once without the optional attachments metadata"
            );
            let bare = replying(draft.without_attachments_metadata().nonce(nonce));
            rest.create_message(channel, &bare)
                .await
                .map(|message| message.id)
        }
    }
}

/// Message `index` of the reply's files: a group of files, or (after the
/// last group) the notice naming what was not sent. A group refused as
/// too large goes once more without its largest file (named in its
/// text), a single file so refused is named in its place; a group refused
/// otherwise is tried once without the optional `attachments` metadata,
/// then named in a text message in its place, so the parts stay in step.
async fn send_files<'a>(
    ctx: &Ctx,
    channel: Snowflake,
    files: &'a Outgoing,
    index: usize,
    nonce: &Nonce,
) -> Result<Snowflake, RestError> {
    let text_part = |text: String| async move {
        ctx.rest
            .create_message(channel, &MessageDraft::text(&text).nonce(nonce))
            .await
            .map(|message| message.id)
    };
    let Some(group) = files.groups.get(index) else {
        let notice = files.notice().unwrap_or_default();
        let sent = text_part(notice).await;
        if sent.is_ok() {
            let left_out = files.left_out.len() + files.unlisted;
            ctx.counters.bump_by(Counter::FilesLeftOut, left_out as u64);
        }
        return sent;
    };
    let names = group
        .iter()
        .map(|f| f.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    // Streamed from disk as the request is sent (never held in memory); a
    // file swapped for a link or cut since the listing fails the upload,
    // which is then named in its place.
    let upload = |file: &'a OutFile| {
        Upload::disk(
            &file.name,
            files_out::content_type(&file.name),
            &file.path,
            file.size,
        )
    };
    let mut draft = MessageDraft::text("");
    for file in group {
        draft = draft.file(upload(file));
    }
    let error = match ctx
        .rest
        .create_message(channel, &draft.clone().nonce(nonce))
        .await
    {
        Ok(message) => return Ok(message.id),
        Err(e) if channel_refuses(&e) => return Err(e),
        Err(e) => e,
    };
    let left = files_out::refused_as_too_large(group).filter(|_| too_large(&error));
    if let Some(left) = left {
        // One file over the limit here does not hold back the others:
        // they go once more without it (nothing was posted under the
        // nonce), and the message names it. No more tries than that.
        let out = &group[left];
        log::warn!(
            "uploading {names} was refused as too large ({error}); sending the others without {} ({})",
            out.name,
            files_out::size_text(out.size)
        );
        ctx.counters.bump(Counter::FilesLeftOut);
        let note = files_out::refused_note(out);
        let mut others = MessageDraft::text(&note);
        for (i, file) in group.iter().enumerate() {
            if i != left {
                others = others.file(upload(file));
            }
        }
        return match ctx.rest.create_message(channel, &others.nonce(nonce)).await {
            Ok(message) => Ok(message.id),
            Err(e) if channel_refuses(&e) => Err(e),
            Err(e) => {
                ctx.reporter.rest_failure(FailureKind::Delivery, &e);
                text_part(format!("Could not upload {names} ({e}).")).await
            }
        };
    }
    if let (true, [file]) = (too_large(&error), group.as_slice()) {
        // One file, too large here: sent again (without the metadata) it
        // would be the same bytes refused the same way. Named instead.
        log::warn!("uploading {names} was refused as too large ({error}); naming it instead");
        ctx.counters.bump(Counter::FilesLeftOut);
        return text_part(files_out::refused_note(file)).await;
    }
    log::warn!(
        "uploading {names} failed ({error}); trying once without the optional attachments metadata"
    );
    let bare = draft.without_attachments_metadata().nonce(nonce);
    match ctx.rest.create_message(channel, &bare).await {
        Ok(message) => Ok(message.id),
        Err(e) if channel_refuses(&e) => Err(e),
        Err(e) => {
            ctx.reporter.rest_failure(FailureKind::Delivery, &e);
            text_part(format!("Could not upload {names} ({e}).")).await
        }
    }
}

/// `draft` as a Discord reply to `reply_to` (quoting it, its author not
/// pinged), if given. An edit cannot add one: a placeholder in a server
/// channel is posted as the reply already.
fn replying(draft: MessageDraft<'_>, reply_to: Option<Snowflake>) -> MessageDraft<'_> {
    match reply_to {
        Some(message) => draft.reply_to(message),
        None => draft,
    }
}

fn upload(text: &str) -> Upload<'_> {
    Upload::bytes(REPLY_FILE, "text/plain; charset=utf-8", text.as_bytes())
}

/// Sends a short notice (errors, pairing codes) under `nonce`; failures
/// are logged and recorded, never retried beyond what the REST client does.
pub(crate) async fn notify(ctx: &Ctx, channel: Snowflake, text: &str, nonce: &Nonce) -> bool {
    notify_about(ctx, channel, text, nonce, None).await
}

/// [`notify`], as a reply to `about` (the message it is the answer to:
/// the chat then records that it was answered; docs/exactly-once.md).
pub(crate) async fn notify_about(
    ctx: &Ctx,
    channel: Snowflake,
    text: &str,
    nonce: &Nonce,
    about: Option<Snowflake>,
) -> bool {
    let draft = match about {
        Some(message) => MessageDraft::text(text).reply_to(message),
        None => MessageDraft::text(text),
    };
    match ctx.rest.create_message(channel, &draft.nonce(nonce)).await {
        Ok(_) => true,
        Err(e) => {
            log::warn!("sending a notice failed: {e}");
            ctx.reporter.rest_failure(FailureKind::Delivery, &e);
            false
        }
    }
}

/// What the DM fallback command reads on stdin.
#[derive(Serialize)]
struct FallbackInput<'a> {
    id: &'a str,
    channel_id: Snowflake,
    content: &'a str,
    error: String,
    delivered_message_ids: &'a [Snowflake],
}

/// A delivery that ended, for [`settle`].
pub(crate) struct Settle<'a> {
    /// The reply's or result's id (for logs and the archive).
    pub id: &'a str,
    pub channel: Snowflake,
    pub content: &'a str,
    /// How sending ended.
    pub sent: Result<(), RestError>,
    /// The messages that went out.
    pub delivered: &'a [Snowflake],
    /// Archive even when delivered (spool results); replies are archived
    /// only when delivery failed.
    pub archive_delivered: bool,
    /// The result file to remove once archived.
    pub source: Option<&'a Path>,
}

/// Counts a delivery; when it failed for good (403, unknown channel, 5xx
/// after retries, rate limited beyond the budget), runs the DM fallback;
/// archives. Returns the outcome; the archive step's own failure is logged
/// and recorded (and returned as `Err`, so a result file that could not be
/// archived is not delivered again and again).
pub(crate) async fn settle(ctx: &Ctx, done: Settle<'_>) -> Result<Outcome, Outcome> {
    let (outcome, error) = match &done.sent {
        Ok(()) => {
            ctx.counters.bump(Counter::RepliesDelivered);
            ctx.turn_succeeded();
            if !done.archive_delivered {
                return Ok(Outcome::Delivered);
            }
            (Outcome::Delivered, None)
        }
        Err(error) => {
            log::warn!(
                "delivery of {} to channel {} failed for good: {error}",
                done.id,
                done.channel
            );
            ctx.reporter.rest_failure(FailureKind::Delivery, error);
            ctx.counters.bump(Counter::Undelivered);
            let (outcome, detail) = fallback(ctx, &done, error).await;
            (outcome, Some(detail))
        }
    };
    let entry = ArchiveEntry {
        id: done.id.to_owned(),
        channel_id: done.channel,
        content: done.content.to_owned(),
        outcome,
        error,
        delivered_message_ids: done.delivered.to_vec(),
        archived_unix_ms: now_unix_ms(),
    };
    match ctx.spool.archive(&entry, done.source).await {
        Ok(path) => {
            log::info!("archived {} ({outcome:?}) as {}", done.id, path.display());
            Ok(outcome)
        }
        Err(e) => {
            log::error!("archiving {} failed: {e}", done.id);
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

async fn fallback(ctx: &Ctx, out: &Settle<'_>, error: &RestError) -> (Outcome, String) {
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
        delivered_message_ids: out.delivered,
    };
    let mut spec = tool_command(argv, Duration::from_secs(ctx.config.dm_fallback_timeout_s));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_cannot_go_becomes_at_most_the_cap_of_messages_saying_where_it_was_cut() {
        let line = "x".repeat(49);
        let text: String = (0..600).map(|_| format!("{line}\n")).collect();
        let plan = Plan::new(&text, None);
        assert!(matches!(plan, Plan::File { .. }));
        let Plan::Messages(chunks) = plan.as_text() else {
            panic!("text")
        };
        assert_eq!(chunks.len(), MAX_FALLBACK_MESSAGES);
        assert!(chunks.iter().all(|c| c.chars().count() <= MESSAGE_LIMIT));
        let last = chunks.last().unwrap();
        assert!(last.contains("could not be sent as a file"), "{last}");
        assert!(last.contains("30000 characters"), "{last}");
        // A text that fits the cap goes whole, without the note.
        let short: String = (0..150).map(|_| format!("{line}\n")).collect();
        let chunks = cut_to_messages(&short, MAX_FALLBACK_MESSAGES);
        assert_eq!(chunks.len(), 4);
        assert!(!chunks.concat().contains("cut"));
    }
}
