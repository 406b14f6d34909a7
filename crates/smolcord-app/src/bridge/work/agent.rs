//! The agent hand-off: `agent_cmd` runs with the task JSON on stdin, its
//! stdout is the reply. While it runs the user sees a typing indicator
//! (renewed every ~8 s; Discord shows one for about 10 s) and, if it takes
//! long, a "working…" placeholder that the reply then replaces (showing
//! the output so far meanwhile, with `stream_replies`). Runs are
//! capped at `agent_concurrency` at once. Output past the capture cap
//! (1 MiB) is dropped, and the reply then says so in its last line. An
//! agent that runs past `agent_timeout_s` is stopped, and what it printed
//! is still its reply: whole if it had closed its stdout by then, else with
//! a last line saying it may be cut. The end of its stderr goes with every
//! warning and failure record about it, and to the debug log on success.

use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::stderr_tail::operator_tail;
use crate::bridge::deliver::tool::tool_command;
use crate::bridge::report::counters::Counter;
use crate::bridge::store::nonce;
use crate::bridge::store::spool::Task;
use crate::bridge::work::stream_preview;
use crate::recorder::FailureKind;
use smol::channel;
use smolcord::offload::{run_command, CommandOutput, OutputProgress};
use smolcord::protocol::Snowflake;
use smolcord::rest::MessageDraft;
use smolcord::rt::Timer;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The variable naming the task's downloaded attachments' directory.
pub const INPUT_DIR_VAR: &str = "SMOLCORD_INPUT_DIR";

/// The variable naming the task's output directory.
pub const OUTPUT_DIR_VAR: &str = "SMOLCORD_OUTPUT_DIR";

/// The placeholder's text.
pub const PLACEHOLDER: &str = "working…";

/// A reply from the agent.
pub(crate) struct Reply {
    /// What it printed (within the cap).
    pub text: String,
    /// Set when the output was cut at the cap: a line telling the user.
    pub cut_note: Option<String>,
}

/// What the agent run gave.
pub(crate) struct AgentRun {
    /// The reply, or the text telling the user it failed.
    pub reply: Result<Reply, String>,
    /// The placeholder message, if one was posted.
    pub placeholder: Option<Snowflake>,
}

/// Runs the agent for `task` (waits for a slot first).
pub(crate) async fn run_agent(ctx: &Rc<Ctx>, argv: Vec<String>, task: &Task) -> AgentRun {
    let _slot = ctx.agent_slots.acquire().await;
    ctx.counters.bump(Counter::AgentRuns);
    let timeout = Duration::from_secs(ctx.config.agent_timeout_s);
    let program = argv.first().cloned().unwrap_or_default();
    let mut spec = tool_command(argv, timeout);
    spec.stdin = serde_json::to_vec(task).ok();
    // For a shell script: `cat "$SMOLCORD_INPUT_DIR"/*` (the task's
    // `attachments[].path` says the same, file by file).
    if task.attachments.iter().any(|a| a.path.is_some()) {
        let dir = ctx.files.in_dir(&task.id);
        spec.env_add
            .push((INPUT_DIR_VAR.into(), dir.to_string_lossy().into_owned()));
    }
    // `cp chart.png "$SMOLCORD_OUTPUT_DIR"/`: sent with the reply.
    if let Some(dir) = &task.output_dir {
        spec.env_add.push((OUTPUT_DIR_VAR.into(), dir.clone()));
    }
    let output_cap = spec.output_cap;
    // The answer as it forms (opt-in): the placeholder shows the output so far.
    let progress = ctx.config.stream_replies.then(OutputProgress::default);
    spec.stdout_progress = progress.clone();

    // The indicator runs as its own task so that stopping it never cuts a
    // REST call in half (a half-sent placeholder would be left behind).
    let (stop_tx, stop_rx) = channel::bounded::<()>(1);
    let (done_tx, done_rx) = channel::bounded::<Option<Snowflake>>(1);
    let placeholder = Rc::new(RefCell::new(None));
    {
        let ctx = ctx.clone();
        // Thread mode: typing and the placeholder in the thread, where
        // the message heads the conversation already (no reply needed).
        let channel = task.thread_id.unwrap_or(task.channel_id);
        let message = task.message_id;
        let as_reply = task.thread_id.is_none();
        let placeholder = placeholder.clone();
        ctx.clone().spawn("bridge-typing", async move {
            let place = (channel, message, as_reply);
            indicate(&ctx, place, stop_rx, &placeholder, progress).await;
            let _ = done_tx.try_send(placeholder.borrow_mut().take());
        });
    }
    let result = run_command(spec).await;
    drop(stop_tx);
    let placeholder = done_rx.recv().await.unwrap_or(None);

    // What it left to send counts against the files budget until the
    // reply is done.
    let out_dir = ctx.files.out_dir(&task.id);
    let left_files = match smolcord::offload::tree_bytes(&out_dir).await {
        Ok(bytes) => {
            ctx.files.add(bytes);
            let listed = smolcord::offload::list_files(&out_dir, 1).await;
            listed.is_ok_and(|l| !l.files.is_empty() || !l.others.is_empty())
        }
        Err(e) => {
            log::warn!("{e}");
            false
        }
    };
    let reply = match result {
        Ok(out) => judge(ctx, &program, timeout, output_cap, &out, left_files),
        Err(e) => {
            log::warn!("agent_cmd could not be run: {e}");
            ctx.counters.bump(Counter::AgentFailures);
            ctx.reporter
                .fail(FailureKind::Agent, &program, None, "could not be started");
            Err("Sorry, the agent could not be started.".to_owned())
        }
    };
    AgentRun { reply, placeholder }
}

fn judge(
    ctx: &Ctx,
    program: &str,
    timeout: Duration,
    output_cap: usize,
    out: &CommandOutput,
    left_files: bool,
) -> Result<Reply, String> {
    let stderr = operator_tail(&out.stderr, out.stderr_truncated);
    let said = stderr
        .as_deref()
        .map_or(String::new(), |s| format!("; its stderr ends: {s}"));
    let record = |status: Option<i64>, why: String| {
        log::warn!("agent_cmd {why}{said}");
        ctx.counters.bump(Counter::AgentFailures);
        ctx.reporter
            .fail_with_stderr(FailureKind::Agent, program, status, why, stderr.clone());
    };
    let fail = |status: Option<i64>, why: String, user: String| {
        record(status, why);
        Err(user)
    };
    let secs = timeout.as_secs();
    if out.timed_out && out.stdout_text().trim().is_empty() {
        return fail(
            None,
            format!("timed out after {secs} s"),
            format!("Sorry, the agent did not answer within {secs} s."),
        );
    }
    if out.timed_out {
        // What it printed is delivered: an agent that answers and then runs
        // on (its own clean-up, a child holding on) has still answered.
        let complete = out.stdout_closed_in_time && !out.stdout_truncated;
        let why = if out.stdout_closed_in_time {
            format!("closed its output but ran past the {secs} s timeout; it was stopped and its answer delivered")
        } else {
            format!("timed out after {secs} s; delivering what it printed, which may be cut")
        };
        record(None, why);
        let cut_note = (!complete).then(|| {
            format!(
                "(The agent did not finish within {secs} s and was stopped: this answer may be cut.)"
            )
        });
        return Ok(Reply {
            text: out.stdout_text(),
            cut_note,
        });
    }
    if !out.success() {
        let why = match (out.exit_code, out.signal) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            _ => "ended abnormally".to_owned(),
        };
        return fail(
            out.exit_code.map(i64::from),
            why.clone(),
            format!("Sorry, the agent failed ({why})."),
        );
    }
    let text = out.stdout_text();
    // Only escapes or control bytes is no reply either (nothing would show),
    // unless it left files to send.
    let blank = crate::bridge::deliver::shown::visible(&text)
        .trim()
        .is_empty();
    if blank && left_files {
        return Ok(Reply {
            text: String::new(),
            cut_note: None,
        });
    }
    if blank {
        return fail(
            Some(0),
            "gave an empty reply".to_owned(),
            "The agent finished without a reply.".to_owned(),
        );
    }
    if let Some(stderr) = &stderr {
        log::debug!("agent_cmd succeeded; its stderr ends: {stderr}");
    }
    let cut_note = out.stdout_truncated.then(|| {
        log::warn!("agent_cmd printed more than {output_cap} bytes; the reply is cut there");
        format!(
            "(The agent's reply was longer than {} and was cut there; the rest was dropped.)",
            size_text(output_cap)
        )
    });
    Ok(Reply { text, cut_note })
}

fn size_text(bytes: usize) -> String {
    const MIB: usize = 1 << 20;
    if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// Timeout of one typing or placeholder request (the reply's own requests
/// keep the client's longer one): a placeholder that takes longer is no
/// use, and the reply may be waiting behind it.
const INDICATOR_TIMEOUT: Duration = Duration::from_secs(5);

/// Typing every `typing_interval`, and a placeholder after
/// `placeholder_after`, until `stop` closes. A typing call in flight is
/// abandoned when `stop` closes; a placeholder call in flight is finished
/// first, and none is started after `stop`. The placeholder's nonce comes
/// from `message`, so a run repeated after a crash finds the first one.
/// `as_reply`: the placeholder is a Discord reply to `message` (not in a
/// thread, which the message heads). With `progress`, the placeholder
/// shows the output so far (`stream_preview`).
async fn indicate(
    ctx: &Ctx,
    (channel, message, as_reply): (Snowflake, Snowflake, bool),
    stop: channel::Receiver<()>,
    placeholder: &RefCell<Option<Snowflake>>,
    progress: Option<OutputProgress>,
) {
    let started = Instant::now();
    let mut next_typing = started;
    let mut placeholder_at = ctx.tunables.placeholder_after.map(|after| started + after);
    let mut next_preview: Option<Instant> = None;
    let mut shown = 0;
    let rest = ctx.rest.clone().with_timeout(INDICATOR_TIMEOUT);
    loop {
        let now = Instant::now();
        if now >= next_typing {
            // Typing leaves nothing behind: abandoned the moment the agent
            // is done (a hung typing call must not hold the reply).
            let typed = futures_lite::future::or(
                async { Some(rest.trigger_typing(channel).await) },
                async {
                    let _ = stop.recv().await;
                    None
                },
            )
            .await;
            match typed {
                None => return,
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    log::debug!("typing indicator: {e}");
                    ctx.reporter.rest_failure(FailureKind::Rest, &e);
                }
            }
            next_typing = Instant::now() + ctx.tunables.typing_interval;
        }
        if let Some(at) = placeholder_at {
            if Instant::now() >= at {
                // Never after the agent is done: the reply would follow it.
                if stop.is_closed() {
                    return;
                }
                // One call only: a failed placeholder is not worth another.
                // Not cut short when the agent finishes (a cut request may
                // still post it, with no id for the reply to replace): the
                // reply waits for it, INDICATOR_TIMEOUT per try. The client
                // tries a timed-out one again (3 tries in all): its nonce
                // returns the placeholder a late try posted, with the id.
                placeholder_at = None;
                let nonce = nonce::placeholder(message);
                let mut draft = MessageDraft::text(PLACEHOLDER).nonce(&nonce);
                if as_reply {
                    // A reply to the message: the answer replaces it by an
                    // edit, which keeps the reference but cannot add it,
                    // and the chat records what it answers (the ledger).
                    draft = draft.reply_to(message);
                }
                match rest.create_message(channel, &draft).await {
                    Ok(message) => {
                        *placeholder.borrow_mut() = Some(message.id);
                        if progress.is_some() {
                            next_preview = Some(Instant::now());
                        }
                    }
                    Err(e) => {
                        log::debug!("placeholder: {e}");
                        ctx.reporter.rest_failure(FailureKind::Rest, &e);
                    }
                }
            }
        }
        let posted = *placeholder.borrow();
        if let (Some(at), Some(progress), Some(id)) = (next_preview, &progress, posted) {
            if Instant::now() >= at {
                // Never after the agent is done: the reply replaces it.
                if stop.is_closed() {
                    return;
                }
                // Not cut short when the agent finishes: a cut edit could
                // land after the reply and overwrite it.
                let place = (channel, id, PLACEHOLDER);
                stream_preview::show(ctx, &rest, place, progress, &mut shown).await;
                next_preview = Some(Instant::now() + ctx.tunables.stream_interval);
            }
        }
        let wake = [placeholder_at, next_preview]
            .into_iter()
            .flatten()
            .fold(next_typing, Instant::min);
        let stopped = futures_lite::future::or(
            async {
                let _ = stop.recv().await;
                true
            },
            async {
                Timer::at(wake).await;
                false
            },
        )
        .await;
        if stopped {
            return;
        }
    }
}
