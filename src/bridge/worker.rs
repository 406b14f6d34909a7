//! Per-channel workers: messages from one channel are handled in order,
//! different channels concurrently. A worker exists while its channel has
//! work and ends when the queue is empty (one thread: the check and the
//! removal happen without an await in between, so no message is stranded).
//! The queues and their bounds are in [`super::queue`].

use super::access::{self, Role};
use super::agent::run_agent;
use super::counters::Counter;
use super::ctx::Ctx;
use super::delivery::{deliver, notify, send_chunks, Outgoing};
use super::inflight::JobGuard;
use super::intake::{decide, Verdict};
use super::pairing::{self, code_message, PairingDecision};
use super::persist::SeqTicket;
use super::restart::is_restart_command;
use super::spool::Task;
use super::transcribe::transcribe_message;
use crate::offload;
use crate::protocol::{Message, Snowflake};
use crate::recorder::FailureKind;
use crate::status::now_unix_ms;
use std::rc::Rc;

/// A queued message.
pub(crate) struct Job {
    pub message: Message,
    pub ticket: SeqTicket,
    pub guard: JobGuard,
    pub received_unix_ms: u64,
}

/// Starts the worker of a channel that just got its first queued job.
pub(crate) fn start_worker(ctx: &Rc<Ctx>, channel: Snowflake) {
    let worker_ctx = ctx.clone();
    ctx.spawn("bridge-channel", async move {
        while let Some(job) = worker_ctx.queues.next(channel) {
            handle(&worker_ctx, job).await;
            worker_ctx.queues.done();
        }
    });
}

async fn handle(ctx: &Rc<Ctx>, job: Job) {
    let Job {
        message,
        ticket,
        guard,
        received_unix_ms,
    } = job;
    let role = fresh_role(ctx, message.author.id).await;
    let tofu_open = ctx.access.borrow().tofu_open(ctx.config.tofu);
    match decide(role, ctx.safe_mode.get(), tofu_open, message.is_direct()) {
        Verdict::Accept => accept(ctx, &message, &guard, received_unix_ms).await,
        Verdict::BecomeOwner => {
            if become_owner(ctx, &message).await {
                accept(ctx, &message, &guard, received_unix_ms).await;
            }
        }
        Verdict::Pair => pair(ctx, &message).await,
        Verdict::Silent(why) => {
            log::debug!("message {} not answered: {why}", message.id);
            refused(ctx);
        }
    }
    ctx.mark_processed(message.channel_id, message.id);
    ctx.floor.borrow_mut().end(ticket);
    drop(guard);
}

fn refused(ctx: &Ctx) {
    ctx.counters.bump(Counter::Refused);
    ctx.reporter.fail(
        FailureKind::AccessRefused,
        "access",
        None,
        "message from a user not allowed",
    );
}

/// The user's role, re-reading `access.json` first if they look like a
/// stranger (an approval by `smolcord pair` may have just landed).
pub(crate) async fn fresh_role(ctx: &Ctx, user: Snowflake) -> Role {
    let role = ctx.access.borrow().role(user);
    if role != Role::Stranger {
        return role;
    }
    reread_access(ctx).await;
    ctx.access.borrow().role(user)
}

/// Re-reads `access.json` if it changed.
pub(crate) async fn reread_access(ctx: &Ctx) {
    let path = access::access_path(&ctx.state_dir);
    match offload::read_bytes(&path).await {
        Ok(bytes) => {
            ctx.access.borrow_mut().apply_reread(&path, bytes);
        }
        Err(e) => log::warn!("re-reading access state: {e}"),
    }
}

async fn become_owner(ctx: &Ctx, message: &Message) -> bool {
    // Claimed in memory before the first await, so two first messages
    // cannot both become the owner.
    let file = {
        let mut access = ctx.access.borrow_mut();
        if !access.tofu_open(ctx.config.tofu) {
            drop(access);
            return ctx.access.borrow().role(message.author.id) != Role::Stranger;
        }
        access.file.owner_id = Some(message.author.id);
        access.file.clone()
    };
    match access::save(&ctx.state_dir, &file).await {
        Ok(()) => {
            log::info!(
                "trust on first use: user {} is now the owner",
                message.author.id
            );
            ctx.access.borrow_mut().remember_written(None);
            notify(
                ctx,
                message.channel_id,
                "You are now this bot's owner (trust on first use).",
            )
            .await;
            true
        }
        Err(e) => {
            log::error!("saving the TOFU owner failed: {e}; not taking this user as the owner");
            ctx.access.borrow_mut().file.owner_id = None;
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
    refused(ctx);
    let rules = ctx.tunables.pairing;
    let decision = ctx.pairing.borrow_mut().on_stranger(
        message.author.id,
        message.channel_id,
        now_unix_ms(),
        &rules,
        |n| fastrand::usize(..n),
    );
    match decision {
        PairingDecision::Issue(code) => {
            let file = ctx.pairing.borrow().file.clone();
            if let Err(e) = pairing::save(&ctx.state_dir, &file).await {
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
            ctx.counters.bump(Counter::PairingCodesIssued);
            ctx.poller_wake.notify(1);
            log::info!(
                "pairing code issued to user {} (approve with `smolcord pair CODE`)",
                message.author.id
            );
            notify(ctx, message.channel_id, &code_message(&code, rules.ttl)).await;
        }
        PairingDecision::Remind(code) => {
            notify(ctx, message.channel_id, &code_message(&code, rules.ttl)).await;
        }
        PairingDecision::Silent(why) => log::debug!("stranger not answered: {why}"),
    }
}

async fn accept(ctx: &Rc<Ctx>, message: &Message, guard: &JobGuard, received_unix_ms: u64) {
    ctx.counters.bump(Counter::MessagesHandled);
    let what = format!("message {} in channel {}", message.id, message.channel_id);
    if is_restart_command(&message.content) {
        notify(
            ctx,
            message.channel_id,
            "Only the owner can restart the bridge.",
        )
        .await;
        return;
    }
    let (transcripts, _failed) = if message.audio_attachments().next().is_some() {
        guard.stage(format!("{what}: transcribing"));
        transcribe_message(ctx, message).await
    } else {
        (Vec::new(), false)
    };
    let task = Task::new(message, transcripts, received_unix_ms);
    let other_attachments = message.attachments.len() > message.audio_attachments().count();
    if task.text.is_empty() && !other_attachments {
        log::debug!("{what}: nothing to hand to the agent");
        return;
    }
    match ctx.config.agent_cmd.clone() {
        Some(argv) => {
            guard.stage(format!("{what}: agent running"));
            let run = run_agent(ctx, argv, &task).await;
            guard.stage(format!("{what}: delivering the reply"));
            match run.reply {
                Ok(reply) => {
                    let _ = deliver(
                        ctx,
                        Outgoing {
                            id: &task.id,
                            channel: task.channel_id,
                            content: &reply.text,
                            note: reply.cut_note.as_deref(),
                            placeholder: run.placeholder.as_deref(),
                            archive_delivered: false,
                            source: None,
                        },
                    )
                    .await;
                }
                Err(notice) => {
                    if let Err(e) =
                        send_chunks(ctx, task.channel_id, &notice, run.placeholder.as_deref()).await
                    {
                        log::warn!("telling the user the agent failed: {}", e.error);
                    }
                }
            }
        }
        None => {
            guard.stage(format!("{what}: spooling"));
            match ctx.spool.write_task(&task).await {
                Ok(path) => {
                    ctx.counters.bump(Counter::TasksSpooled);
                    ctx.turn_succeeded();
                    log::info!("task {} spooled as {}", task.id, path.display());
                }
                Err(e) => {
                    log::error!("spooling task {}: {e}", task.id);
                    ctx.reporter
                        .fail(FailureKind::State, "spool/tasks", None, "task write failed");
                    notify(
                        ctx,
                        task.channel_id,
                        "Sorry, your message could not be handed to the agent (the bridge cannot write its spool).",
                    )
                    .await;
                }
            }
        }
    }
}
