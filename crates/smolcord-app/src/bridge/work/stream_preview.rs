//! The answer as it forms (`stream_replies`): while an agent that prints
//! as it thinks runs, its "working…" placeholder shows the output so far,
//! edited at most every `Tunables::stream_interval` and only when there is
//! more, until the reply replaces it.
//!
//! Why it never outlives the run: the edits are made by the placeholder's
//! indicator task, which the agent's end stops and the reply waits for; an
//! edit in flight is finished first (a cut one could still land after the
//! reply and overwrite it), and none starts after. The reply, or the
//! failure notice, then replaces the placeholder as without streaming, so
//! no half-sentence is left when the agent dies. A preview is one message:
//! the end of the output, at most [`PREVIEW_CHARS`] characters.

use crate::bridge::ctx::Ctx;
use crate::recorder::FailureKind;
use smolcord::offload::OutputProgress;
use smolcord::protocol::Snowflake;
use smolcord::rest::{MessageDraft, RestClient};

/// Characters of the output a preview shows (its end), within Discord's
/// 2 000 with the header.
pub(crate) const PREVIEW_CHARS: usize = 1_900;

/// The placeholder's text showing `so_far` (the end of it, if long).
pub(crate) fn preview(header: &str, so_far: &str) -> String {
    let so_far = so_far.trim();
    let count = so_far.chars().count();
    if count <= PREVIEW_CHARS {
        return format!("{header}\n{so_far}");
    }
    let start = so_far
        .char_indices()
        .nth(count - PREVIEW_CHARS)
        .map_or(0, |(at, _)| at);
    format!("{header}\n…{}", &so_far[start..])
}

/// Edits the placeholder (whose text is `header`) to show the output so
/// far, if there is more than `shown` (bytes already shown; updated).
/// Failures are logged, not retried beyond the client's own tries: the
/// reply comes anyway.
pub(crate) async fn show(
    ctx: &Ctx,
    rest: &RestClient,
    (channel, placeholder, header): (Snowflake, Snowflake, &str),
    progress: &OutputProgress,
    shown: &mut u64,
) {
    let (bytes, tail) = progress.snapshot();
    if bytes == *shown || tail.trim().is_empty() {
        return;
    }
    *shown = bytes;
    let text = preview(header, &tail);
    if let Err(e) = rest
        .edit_message(channel, placeholder, &MessageDraft::text(&text))
        .await
    {
        log::debug!("showing the answer as it forms: {e}");
        ctx.reporter.rest_failure(FailureKind::Rest, &e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_is_the_end_of_the_output_within_one_message() {
        assert_eq!(
            preview("working…", " first thoughts\n"),
            "working…\nfirst thoughts"
        );
        let long = "é".repeat(5_000) + "the end";
        let shown = preview("working…", &long);
        assert!(shown.ends_with("the end"));
        assert!(shown.contains("\n…"));
        assert!(shown.chars().count() <= 2_000, "{}", shown.chars().count());
    }
}
