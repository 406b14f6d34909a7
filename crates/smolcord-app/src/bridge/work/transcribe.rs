//! Voice notes: run `transcribe_cmd` on each audio attachment, downloaded
//! with the message's other files ([`super::files_in`]), with the file path
//! appended (through offload: timeout, process-group kill), and keep the
//! transcript. A failure is reported to the user plainly and recorded (with
//! the end of the transcriber's stderr), and only holds up its own message.

use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::delivery::notify;
use crate::bridge::deliver::stderr_tail::operator_tail;
use crate::bridge::deliver::tool::tool_command;
use crate::bridge::report::counters::Counter;
use crate::bridge::store::nonce::{self, Notice};
use crate::bridge::store::spool::Transcript;
use crate::bridge::work::files_in::Fetched;
use crate::recorder::FailureKind;
use smolcord::offload::{self, run_command};
use smolcord::protocol::{Attachment, Message};
use std::path::Path;
use std::time::Duration;

/// Why a voice note has no transcript.
#[derive(Debug)]
pub(crate) enum TranscribeError {
    NotConfigured,
    /// Not downloaded (the user was told why with the message's other
    /// attachments).
    LeftOut(String),
    /// The end of its stderr rides along, for the operator.
    TimedOut(Duration, Option<String>),
    Failed {
        exit_code: Option<i32>,
        signal: Option<i32>,
        stderr: Option<String>,
    },
    Spawn(offload::Error),
    Empty(Option<String>),
}

impl TranscribeError {
    /// What the user is told.
    pub fn user_text(&self) -> String {
        let why = match self {
            TranscribeError::NotConfigured => {
                "voice messages are not set up on this bot".to_owned()
            }
            TranscribeError::LeftOut(why) => why.clone(),
            TranscribeError::TimedOut(limit, _) => {
                format!("transcribing took longer than {} s", limit.as_secs())
            }
            TranscribeError::Failed { .. } | TranscribeError::Spawn(_) => {
                "the transcriber failed".to_owned()
            }
            TranscribeError::Empty(_) => "no speech was recognised".to_owned(),
        };
        format!("Sorry, I could not transcribe your voice message: {why}.")
    }

    /// For the log: the type-only text plus the underlying error, or the
    /// end of the transcriber's stderr.
    fn log_text(&self) -> String {
        match self {
            TranscribeError::Spawn(e) => format!("transcribe_cmd could not be run: {e}"),
            other => match other.stderr() {
                Some(stderr) => format!("{}; its stderr ends: {stderr}", other.record_text()),
                None => other.record_text(),
            },
        }
    }

    /// The end of the transcriber's stderr, if it ran and said anything.
    fn stderr(&self) -> Option<String> {
        match self {
            TranscribeError::TimedOut(_, stderr)
            | TranscribeError::Failed { stderr, .. }
            | TranscribeError::Empty(stderr) => stderr.clone(),
            _ => None,
        }
    }

    /// Type-only text for the failure journal.
    fn record_text(&self) -> String {
        match self {
            TranscribeError::NotConfigured => "no transcribe_cmd configured".into(),
            TranscribeError::LeftOut(why) => format!("not downloaded: {why}"),
            TranscribeError::TimedOut(limit, _) => {
                format!("timed out after {} s", limit.as_secs())
            }
            TranscribeError::Failed {
                exit_code: Some(code),
                ..
            } => format!("exited with code {code}"),
            TranscribeError::Failed {
                signal: Some(signal),
                ..
            } => format!("killed by signal {signal}"),
            TranscribeError::Failed { .. } => "ended abnormally".into(),
            TranscribeError::Spawn(_) => "could not be started".into(),
            TranscribeError::Empty(_) => "empty transcript".into(),
        }
    }
}

/// Transcribes every audio attachment of `message` from its downloaded
/// file; failures are reported to the user and recorded here. Returns the
/// transcripts that worked and whether any failed.
pub(crate) async fn transcribe_message(
    ctx: &Ctx,
    message: &Message,
    fetched: &Fetched,
) -> (Vec<Transcript>, bool) {
    let mut transcripts = Vec::new();
    let mut failed = false;
    for (n, attachment) in message.audio_attachments().enumerate() {
        match transcribe_one(ctx, attachment, fetched).await {
            Ok(text) => {
                ctx.counters.bump(Counter::Transcriptions);
                transcripts.push(Transcript {
                    attachment_id: attachment.id,
                    text,
                });
            }
            Err(e) => {
                failed = true;
                ctx.counters.bump(Counter::TranscriptionFailures);
                log::warn!(
                    "voice note {} of message {}: {}",
                    attachment.id,
                    message.id,
                    e.log_text()
                );
                match &e {
                    // Told and recorded with the message's attachments.
                    TranscribeError::LeftOut(_) => continue,
                    other => {
                        let program = ctx
                            .config
                            .transcribe_cmd
                            .as_ref()
                            .and_then(|argv| argv.first().cloned())
                            .unwrap_or_else(|| "transcribe_cmd".into());
                        let status = match other {
                            TranscribeError::Failed { exit_code, .. } => exit_code.map(i64::from),
                            _ => None,
                        };
                        ctx.reporter.fail_with_stderr(
                            FailureKind::Transcription,
                            program,
                            status,
                            other.record_text(),
                            other.stderr(),
                        );
                    }
                }
                let nonce = nonce::notice(message.id, Notice::Transcription(n));
                notify(ctx, message.channel_id, &e.user_text(), &nonce).await;
            }
        }
    }
    (transcripts, failed)
}

async fn transcribe_one(
    ctx: &Ctx,
    attachment: &Attachment,
    fetched: &Fetched,
) -> Result<String, TranscribeError> {
    let Some(argv) = ctx.config.transcribe_cmd.clone() else {
        return Err(TranscribeError::NotConfigured);
    };
    match fetched.paths.get(&attachment.id) {
        Some(path) => run_transcriber(ctx, argv, path).await,
        None => Err(TranscribeError::LeftOut(
            fetched
                .left_out
                .get(&attachment.id)
                .cloned()
                .unwrap_or_else(|| "not downloaded".to_owned()),
        )),
    }
}

async fn run_transcriber(
    ctx: &Ctx,
    mut argv: Vec<String>,
    path: &Path,
) -> Result<String, TranscribeError> {
    argv.push(path.to_string_lossy().into_owned());
    let timeout = Duration::from_secs(ctx.config.transcribe_timeout_s);
    let _slot = ctx.transcribe_slots.acquire().await;
    let out = run_command(tool_command(argv, timeout))
        .await
        .map_err(TranscribeError::Spawn)?;
    let stderr = operator_tail(&out.stderr, out.stderr_truncated);
    if out.timed_out {
        return Err(TranscribeError::TimedOut(timeout, stderr));
    }
    if !out.success() {
        return Err(TranscribeError::Failed {
            exit_code: out.exit_code,
            signal: out.signal,
            stderr,
        });
    }
    let text = out.stdout_text();
    if text.trim().is_empty() {
        return Err(TranscribeError::Empty(stderr));
    }
    if let Some(stderr) = &stderr {
        log::debug!("transcribe_cmd succeeded; its stderr ends: {stderr}");
    }
    Ok(text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_texts_are_plain() {
        let e = TranscribeError::TimedOut(Duration::from_secs(25), None);
        assert_eq!(
            e.user_text(),
            "Sorry, I could not transcribe your voice message: transcribing took longer than 25 s."
        );
    }
}
