//! Per-channel workers, the middle of the message path: messages from one
//! channel are handled in order, different channels concurrently. A worker
//! exists while its channel has work and ends when the queue is empty (one
//! thread: the check and the removal happen without an await in between,
//! so no message is stranded). The queues and their bounds are in
//! [`crate::bridge::jobs::queue`].
//!
//! Exactly once, as far as Discord allows: the agent's reply is put on
//! record in the outbox before its first part is sent. After a crash, the
//! next start queues each recorded reply ahead of everything its channel
//! receives ([`Work::Recorded`]), so the recorded reply is delivered and a
//! replay of its message finds it processed: the agent does not run again.
//! A message is done when its processed mark is on disk: only then is its
//! record removed and may the saved gateway seq move past it.

use crate::bridge::access::book::Role;
use crate::bridge::access::live::OwnerClaim;
use crate::bridge::access::pairing::{code_message, PairingDecision};
use crate::bridge::access::restart::is_restart_command;
use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::channel_refused;
use crate::bridge::deliver::delivery::{self, notify, notify_about, Plan, Settle};
use crate::bridge::deliver::files_out::{self, Outgoing};
use crate::bridge::deliver::reaction::{self, Stage};
use crate::bridge::jobs::backlog::{
    late_prefix, skipped_notice, snowflake_unix_ms, unread_notice, Findings, Skipped, Tally,
};
use crate::bridge::jobs::inflight::JobGuard;
use crate::bridge::jobs::queue::{Job, Work};
use crate::bridge::report::counters::Counter;
use crate::bridge::store::nonce::{self, Notice};
use crate::bridge::store::outbox::ReplyRecord;
use crate::bridge::store::spool::{task_text, Task};
use crate::bridge::work::agent::{run_agent, AgentRun};
use crate::bridge::work::files_in::{fetch_attachments, Fetched};
use crate::bridge::work::transcribe::transcribe_message;
use crate::bridge::work::verdict::{decide, Verdict};
use crate::bridge::work::{channel_gate, context, thread};
use crate::recorder::FailureKind;
use crate::status::now_unix_ms;
use smolcord::protocol::{Message, Snowflake};
use smolcord::rt::Timer;
use std::rc::Rc;
use std::time::Instant;

/// Starts the worker of a channel that just got its first queued job.
pub(crate) fn start_worker(ctx: &Rc<Ctx>, channel: Snowflake) {
    let worker_ctx = ctx.clone();
    ctx.spawn("bridge-channel", async move {
        while let Some(job) = worker_ctx.queues.next(channel) {
            let counted = job.counts();
            let held = handle(&worker_ctx, job).await;
            worker_ctx.queues.done(counted);
            if held {
                // Stopping with this channel unfinished (a read-back, or a
                // task that could not be spooled): nothing newer may be
                // handled (its mark would pass what is left). Left
                // unhandled, and its seq held: the next start reads back
                // and the resume replays.
                while let Some(job) = worker_ctx.queues.next(channel) {
                    let counted = job.counts();
                    drop(job);
                    worker_ctx.queues.done(counted);
                }
                break;
            }
        }
    });
}

/// Handles one job; true if the channel must be held: the bridge is
/// stopping with this job unfinished (a read-back, or a message whose task
/// could not be spooled).
async fn handle(ctx: &Rc<Ctx>, job: Job) -> bool {
    let Job {
        channel,
        work,
        guard,
    } = job;
    match work {
        Work::Message {
            message,
            ticket,
            received_unix_ms,
        } => {
            if ctx.runtime.is_processed(channel, message.id) {
                // A replay queued while the first copy (or its recorded
                // reply) was being handled.
                ctx.counters.bump(Counter::ReplaysSkipped);
                log::info!(
                    "message {} was handled meanwhile; skipping its replay",
                    message.id
                );
            } else {
                match handle_message(ctx, &message, &guard, received_unix_ms, None).await {
                    Handled::Unfinished => {
                        // Not processed, and its seq stays held: the saved
                        // seq never moves past it, so the next start's
                        // resume hands it to us again. The channel's later
                        // messages are not taken either (a processed mark
                        // covers every earlier message of its channel).
                        drop(guard);
                        return true;
                    }
                    handled => finish(ctx, channel, message.id, handled == Handled::Recorded).await,
                }
            }
            ctx.floor.end(ticket);
        }
        Work::Recorded { message } => {
            if !ctx.runtime.is_processed(channel, message) {
                deliver_recorded(ctx, channel, message).await;
            }
            finish(ctx, channel, message, true).await;
        }
        Work::Gate(gate) => {
            guard.stage(format!("channel {channel}: waiting for its read-back"));
            // Closed without findings: nothing to catch up on here, unless
            // the read-back was stopped before it got here.
            let complete = match gate.findings.recv().await {
                Ok(findings) => {
                    guard.stage(format!(
                        "channel {channel}: answering what its read-back found"
                    ));
                    handle_findings(ctx, channel, findings, &guard).await
                }
                Err(_) => !ctx.lifecycle.stopping(),
            };
            return !complete;
        }
    }
    drop(guard);
    false
}

/// What a read-back found in `channel`, oldest first: the notice for what
/// it will not answer, then each message not processed meanwhile (the
/// same message dispatched by the session is skipped after it, by its mark).
/// True once all of them are handled.
async fn handle_findings(
    ctx: &Rc<Ctx>,
    channel: Snowflake,
    findings: Findings,
    guard: &JobGuard,
) -> bool {
    let Findings {
        skipped,
        unread,
        messages,
        session_began_unix_ms,
        tally,
        // Let go (room for the next read) once these are handled.
        hold: _hold,
    } = findings;
    if let Some(unread) = unread {
        // Strangers are told nothing beyond the pairing rules; a channel
        // of no answered user (the read-back knows theirs) is a stranger's.
        let stranger = match unread.user {
            Some(user) => author_role(ctx, channel, user).await == Role::Stranger,
            None => !unread.server,
        };
        if stranger {
            log::info!("read-back: channel {channel} of a stranger could not be read; not told");
        } else {
            let text = unread_notice(&unread);
            notify(ctx, channel, &text, &nonce::notice(channel, Notice::Unread)).await;
        }
    }
    // The notice goes in its place among the answers: before the first
    // message newer than the newest it counts (a gap's, older than what a
    // later session received, may be answered after it), so the processed
    // mark and the chat's ledger never pass a message still to answer.
    let mut skipped = skipped;
    for message in messages {
        if ctx.lifecycle.stopping() {
            // Unfinished: the read-back is due again at the next start.
            return false;
        }
        if let Some(skipped) = skipped.take_if(|s| s.last < message.id) {
            skipped_notice_sent(ctx, channel, skipped).await;
        }
        if ctx.runtime.is_processed(channel, message.id) {
            continue;
        }
        let role = ctx.access.role(message.author.id);
        if role == Role::Owner && is_restart_command(&message.content) {
            log::info!(
                "read-back: the owner's {:?} from while the bridge was offline is not acted on (it has just started)",
                message.content.trim()
            );
            ctx.runtime.record_processed(channel, message.id).await;
            continue;
        }
        let sent = snowflake_unix_ms(message.id);
        let late = is_late(sent, session_began_unix_ms).then_some(sent);
        match handle_message(ctx, &message, guard, now_unix_ms(), late).await {
            // Its task could not be spooled before the stop: the read-back
            // is due again at the next start.
            Handled::Unfinished => return false,
            handled => finish(ctx, channel, message.id, handled == Handled::Recorded).await,
        }
        Tally::add(&tally.handled, 1);
    }
    if let Some(skipped) = skipped {
        skipped_notice_sent(ctx, channel, skipped).await;
    }
    tally
        .unfinished
        .set(tally.unfinished.get().saturating_sub(1));
    true
}

/// The one notice for what a read-back did not answer in `channel` (none
/// to a stranger, by the pairing rules), then its processed mark.
async fn skipped_notice_sent(ctx: &Rc<Ctx>, channel: Snowflake, skipped: Skipped) {
    if ctx.runtime.is_processed(channel, skipped.last) {
        return;
    }
    if author_role(ctx, channel, skipped.author).await == Role::Stranger {
        log::info!(
            "read-back: {} message(s) of a stranger in channel {channel} not answered",
            skipped.count
        );
    } else {
        let text = skipped_notice(&skipped, &ctx.tunables.readback);
        let nonce = nonce::notice(skipped.last, Notice::Skipped);
        // A reply to the newest of them: the chat records that everything
        // up to it was dealt with.
        notify_about(ctx, channel, &text, &nonce, Some(skipped.last)).await;
    }
    ctx.runtime.record_processed(channel, skipped.last).await;
}

/// `author`'s role in `channel` with the access state fresh: in a
/// configured server channel (or the bot's thread there) as its `users`
/// say ([`channel_gate::channel_role`]), elsewhere the access book's.
async fn author_role(ctx: &Ctx, channel: Snowflake, author: Snowflake) -> Role {
    let role = ctx.access.fresh_role(author).await;
    match ctx.channel_entry(channel) {
        Some((entry, _)) => channel_gate::channel_role(entry, role, author),
        None => role,
    }
}

/// How long before the session began a message must have been sent to be
/// answered as "sent while I was offline". The session began when this
/// process handled READY, a few milliseconds (more on a loaded host) after
/// Discord sent it and started dispatching: a message sent in between is
/// the session's, not a late one, though the read-back may find it first.
/// Short of the 1 s storm guard before a fresh identify, so a message of
/// the gap it follows is still called late.
const LATE_MARGIN_MS: u64 = 500;

/// Whether a message sent at `sent_unix_ms` was sent while the bridge was
/// offline, for a session that began at `began_unix_ms`.
fn is_late(sent_unix_ms: u64, began_unix_ms: u64) -> bool {
    sent_unix_ms.saturating_add(LATE_MARGIN_MS) < began_unix_ms
}

/// The end of a message: its processed mark on disk, then its reply record
/// (if any) and its task's files removed. If the mark cannot be written,
/// the record and the files stay: the next start finds them. A spooled
/// task (not recorded) keeps its files until its result is delivered.
async fn finish(ctx: &Ctx, channel: Snowflake, message: Snowflake, recorded: bool) {
    if ctx.runtime.record_processed(channel, message).await && recorded {
        if let Err(e) = ctx.outbox.remove_reply(channel, message).await {
            log::warn!("removing a delivered reply's record: {e}");
        }
        ctx.files.remove(&message.to_string()).await;
    }
}

/// How handling a message ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handled {
    /// Done; no reply record.
    Done,
    /// Done; its reply went through the outbox.
    Recorded,
    /// Not done (its task could not be spooled): it stays unprocessed.
    Unfinished,
}

/// Handles one message. `late`: it was sent while the bridge was
/// offline, then (unix ms).
async fn handle_message(
    ctx: &Rc<Ctx>,
    message: &Message,
    guard: &JobGuard,
    received_unix_ms: u64,
    late: Option<u64>,
) -> Handled {
    let mut role = ctx.access.fresh_role(message.author.id).await;
    let entry = ctx
        .channel_entry(message.channel_id)
        .filter(|_| !message.is_direct());
    if let Some((entry, _)) = entry {
        role = channel_gate::channel_role(entry, role, message.author.id);
    }
    let tofu_open = ctx.access.tofu_open();
    match decide(
        role,
        ctx.lifecycle.safe_mode(),
        tofu_open,
        message.is_direct(),
    ) {
        Verdict::Accept => accept(ctx, message, guard, received_unix_ms, late).await,
        Verdict::BecomeOwner => {
            if become_owner(ctx, message).await {
                accept(ctx, message, guard, received_unix_ms, late).await
            } else {
                Handled::Done
            }
        }
        Verdict::Pair => {
            pair(ctx, message).await;
            Handled::Done
        }
        Verdict::Silent(why) => {
            log::debug!("message {} not answered: {why}", message.id);
            if role == Role::Stranger && !message.is_direct() {
                // Nothing is posted in a channel for a stranger: no
                // pairing code in public.
                stranger_in_channel(ctx, message.author.id);
            } else {
                refused(ctx, message.author.id);
            }
            Handled::Done
        }
    }
}

/// A stranger's message addressed to the bot in a server channel (live,
/// or read back after a gap): nothing posted, counted.
pub(crate) fn stranger_in_channel(ctx: &Ctx, user: Snowflake) {
    ctx.counters.bump(Counter::ChannelStrangers);
    refused(ctx, user);
}

fn refused(ctx: &Ctx, user: Snowflake) {
    ctx.counters.bump(Counter::Refused);
    ctx.reporter.fail_about_user(
        FailureKind::AccessRefused,
        "access",
        "message from a user not allowed",
        user,
    );
}

async fn become_owner(ctx: &Ctx, message: &Message) -> bool {
    match ctx.access.claim_owner(message.author.id).await {
        OwnerClaim::Taken => {
            notify(
                ctx,
                message.channel_id,
                "You are now this bot's owner (trust on first use).",
                &nonce::notice(message.id, Notice::Owner),
            )
            .await;
            true
        }
        OwnerClaim::Closed(role) => role != Role::Stranger,
        OwnerClaim::Unsaved => {
            ctx.reporter.fail(
                FailureKind::State,
                "access.json",
                None,
                "access write failed",
            );
            false
        }
    }
}

async fn pair(ctx: &Ctx, message: &Message) {
    refused(ctx, message.author.id);
    let pairing_nonce = nonce::notice(message.id, Notice::Pairing);
    let rules = ctx.tunables.pairing;
    let decision = match ctx
        .access
        .on_stranger(message.author.id, message.channel_id)
        .await
    {
        Ok(decision) => decision,
        Err(e) => {
            // A code the operator cannot approve is worse than none.
            log::error!("saving a pairing code failed: {e}; not sending it");
            ctx.reporter.fail(
                FailureKind::State,
                "pairing.json",
                None,
                "pairing write failed",
            );
            return;
        }
    };
    match decision {
        PairingDecision::Issue(code) => {
            ctx.counters.bump(Counter::PairingCodesIssued);
            log::info!(
                "pairing code issued to user {} (approve with `smolcord pair CODE`)",
                message.author.id
            );
            let text = code_message(&code, rules.ttl);
            notify_about(
                ctx,
                message.channel_id,
                &text,
                &pairing_nonce,
                Some(message.id),
            )
            .await;
        }
        PairingDecision::Remind(code) => {
            let text = code_message(&code, rules.ttl);
            notify_about(
                ctx,
                message.channel_id,
                &text,
                &pairing_nonce,
                Some(message.id),
            )
            .await;
        }
        PairingDecision::Silent(why) => log::debug!("stranger not answered: {why}"),
    }
}

/// Hands an accepted message to the agent (or the spool) and delivers the
/// reply.
async fn accept(
    ctx: &Rc<Ctx>,
    message: &Message,
    guard: &JobGuard,
    received_unix_ms: u64,
    late: Option<u64>,
) -> Handled {
    ctx.counters.bump(Counter::MessagesHandled);
    let what = format!("message {} in channel {}", message.id, message.channel_id);
    if is_restart_command(&message.content) {
        let nonce = nonce::notice(message.id, Notice::RestartRefused);
        let text = "Only the owner can restart the bridge.";
        notify(ctx, message.channel_id, text, &nonce).await;
        return Handled::Done;
    }
    let fetched = if message.attachments.is_empty() {
        Fetched::default()
    } else {
        guard.stage(format!("{what}: downloading its attachments"));
        fetch_attachments(ctx, message).await
    };
    let (transcripts, _failed) = if message.audio_attachments().next().is_some() {
        guard.stage(format!("{what}: transcribing"));
        transcribe_message(ctx, message, &fetched).await
    } else {
        (Vec::new(), false)
    };
    let mut task = Task::new(message, transcripts, received_unix_ms);
    fetched.fill(&mut task.attachments);
    if !message.is_direct() {
        // The mention only addressed the bot; `content` keeps it.
        let content = channel_gate::without_mention(&message.content, ctx.runtime.bot_user());
        task.text = task_text(&content, &task.transcripts);
    }
    let other_attachments = message.attachments.len() > message.audio_attachments().count();
    if task.text.is_empty() && !other_attachments {
        if message.is_direct() || !message.content.is_empty() {
            log::debug!("{what}: nothing to hand to the agent");
        } else {
            // Taken as a reply to the bot, but it does not mention it (the
            // ping turned off): Discord withholds its text from an app
            // without MESSAGE_CONTENT.
            log::info!("{what}: a reply to the bot with no text: without MESSAGE_CONTENT Discord sends the text only of messages that mention the bot (a reply's ping counts); nothing to answer");
        }
        // A voice note that could not be transcribed: its download goes now.
        ctx.files.remove(&task.id).await;
        return Handled::Done;
    }
    let out_dir = ctx.files.out_dir(&task.id);
    match smolcord::offload::create_dir_all(&out_dir).await {
        Ok(()) => task.output_dir = Some(out_dir.to_string_lossy().into_owned()),
        Err(e) => log::warn!("{what}: {e}; the agent gets no output directory"),
    }
    reaction::react(ctx, message.channel_id, message.id, Stage::Taken);
    task.thread_id = thread::open_for(ctx, message, &task.text).await;
    context::gather(ctx, message, &mut task).await;
    match ctx.config.agent_cmd.clone() {
        Some(argv) => {
            guard.stage(format!("{what}: agent running"));
            let run = run_agent(ctx, argv, &task).await;
            guard.stage(format!("{what}: delivering the reply"));
            let mut record = reply_record(message, run, late);
            record.deliver_to = task.thread_id;
            // On record before the first part goes out.
            delivery::save(ctx, &record).await;
            let stage = if deliver_reply(ctx, record).await {
                Stage::Done
            } else {
                Stage::Failed
            };
            reaction::react(ctx, message.channel_id, message.id, stage);
            Handled::Recorded
        }
        None => {
            guard.stage(format!("{what}: spooling"));
            spool_task(ctx, message, &task).await
        }
    }
}

/// Writes the task to `spool/tasks/`. Same name on every try: a task
/// spooled again after a crash replaces itself (unless the agent took it
/// meanwhile). A write that fails (a full or read-only disk) is tried
/// again as [`crate::bridge::jobs::tunables::SpoolRetry`] says, the user told once that
/// the message is kept, until it succeeds or the bridge stops (then the
/// message is left unprocessed, for the next start's resume).
async fn spool_task(ctx: &Ctx, message: &Message, task: &Task) -> Handled {
    let retry = ctx.tunables.spool_retry;
    let started = Instant::now();
    let mut delay = retry.first;
    let mut failures = 0u32;
    loop {
        let error = match ctx.spool.write_task(task).await {
            Ok(path) => {
                ctx.counters.bump(Counter::TasksSpooled);
                ctx.turn_succeeded();
                if failures > 0 {
                    log::info!(
                        "task {} spooled as {} after {failures} failed write(s)",
                        task.id,
                        path.display()
                    );
                } else {
                    log::info!("task {} spooled as {}", task.id, path.display());
                }
                return Handled::Done;
            }
            Err(e) => e,
        };
        failures += 1;
        if failures == 1 {
            log::error!(
                "spooling task {}: {error}; the message stays unprocessed and the write is tried again",
                task.id
            );
            ctx.reporter
                .fail(FailureKind::State, "spool/tasks", None, "task write failed");
            notify(
                ctx,
                task.channel_id,
                "Your message could not be handed to the agent yet (the bridge cannot write its spool). It is kept and handed on once the disk recovers.",
                &nonce::notice(message.id, Notice::SpoolFailed),
            )
            .await;
        } else {
            log::debug!("spooling task {} (try {failures}): {error}", task.id);
        }
        if ctx.lifecycle.stopping() {
            log::error!(
                "spooling task {} failed {failures} time(s) over {:.0} s ({error}); stopping: it stays unprocessed for the next start",
                task.id,
                started.elapsed().as_secs_f64()
            );
            return Handled::Unfinished;
        }
        Timer::after(delay).await;
        delay = (delay * 2).min(retry.max_delay);
    }
}

/// The reply on record; a late one says so in its first line.
fn reply_record(message: &Message, run: AgentRun, late: Option<u64>) -> ReplyRecord {
    let (content, note, notice) = match run.reply {
        Ok(reply) => (reply.text, reply.cut_note, false),
        Err(notice) => (notice, None, true),
    };
    let content = match late {
        Some(sent) => format!("{}\n{content}", late_prefix(sent)),
        None => content,
    };
    ReplyRecord {
        channel_id: message.channel_id,
        guild_id: message.guild_id,
        deliver_to: None,
        message_id: message.id,
        content,
        note,
        notice,
        placeholder: run.placeholder,
        sent: Default::default(),
    }
}

/// The text's plan: none at all for files without a word.
fn reply_plan(content: &str, note: Option<&str>, files: &Outgoing) -> Plan {
    if content.trim().is_empty() && note.is_none() && !files.groups.is_empty() {
        Plan::Messages(Vec::new())
    } else {
        Plan::new(content, note)
    }
}

/// A reply recorded by an earlier run, queued at start-up.
async fn deliver_recorded(ctx: &Ctx, channel: Snowflake, message: Snowflake) {
    match ctx.outbox.reply(channel, message).await {
        Ok(Some(record)) => {
            log::info!(
                "delivering the reply to message {message} in channel {channel}, recorded before the restart"
            );
            deliver_reply(ctx, record).await;
        }
        Ok(None) => {}
        Err(e) => bad_record(ctx, channel, message, e).await,
    }
}

/// Sends a recorded reply from where it got, then settles it (fallback and
/// archive when it failed for good); an agent-failure notice that cannot be
/// sent is only logged.
/// True when the answer itself reached the channel (not a failure notice).
async fn deliver_reply(ctx: &Ctx, mut record: ReplyRecord) -> bool {
    // The agent's files: listed the same way on every try (its output
    // directory stays until the reply is done), so the parts match.
    let files = if record.notice {
        Outgoing::default()
    } else {
        files_out::collect(&ctx.files.out_dir(&record.message_id.to_string())).await
    };
    let plan = reply_plan(&record.content, record.note.as_deref(), &files);
    // Kept in the record (saved between parts): a restart still knows the
    // placeholder if the reply could not replace it.
    let placeholder = record.placeholder;
    let target = record.deliver_to.unwrap_or(record.channel_id);
    let sent = delivery::send(ctx, target, &plan, &files, &mut record, placeholder).await;
    if let (Some(_), Err(e)) = (record.guild_id, &sent) {
        channel_refused::on_refusal(ctx, target, record.message_id, e).await;
    }
    if record.notice {
        if let Err(e) = sent {
            log::warn!("telling the user the agent failed: {e}");
        }
        return false;
    }
    let delivered = sent.is_ok();
    let id = record.message_id.to_string();
    let _ = delivery::settle(
        ctx,
        Settle {
            id: &id,
            channel: record.channel_id,
            content: &record.content,
            sent,
            delivered: &record.sent.message_ids,
            archive_delivered: false,
            source: None,
        },
    )
    .await;
    delivered
}

/// A reply record that cannot be read (a damaged disk: records are written
/// atomically) is kept aside for the operator; its message counts as
/// handled (logged and journalled: the reply is not known).
async fn bad_record(
    ctx: &Ctx,
    channel: Snowflake,
    message: Snowflake,
    e: smolcord::offload::Error,
) {
    log::error!("{e}");
    ctx.reporter.fail(
        FailureKind::State,
        "outbox",
        None,
        "reply record unreadable",
    );
    match ctx.outbox.set_aside_reply(channel, message).await {
        Ok(aside) => log::error!("moved the unreadable reply record to {}", aside.display()),
        Err(e) => log::error!("moving the unreadable reply record aside: {e}"),
    }
}
