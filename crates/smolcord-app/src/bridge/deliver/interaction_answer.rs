//! Answers to the owner's commands: ephemeral (flag 64, only the user who
//! used the command sees it), through the interaction while it can be
//! answered, else as a message in the DM it was used in.
//!
//! Discord takes one first answer per interaction, within 3 s of its use;
//! a deferred one ("thinking…") is then edited for 15 minutes. A use
//! replayed after a crash or a resume comes back after those 3 s (404
//! 10062) or after an earlier run answered it (400 40060): with 40060 the
//! earlier answer is there to edit; with 10062 there is nothing to edit,
//! and the answer goes as a DM under a nonce derived from the interaction
//! ([`Notice::CommandAnswer`]), so a repeat posts nothing new. Silence is
//! never an outcome.

use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::delivery;
use crate::bridge::store::nonce::{self, Notice};
use crate::recorder::FailureKind;
use smolcord::protocol::Interaction;
use smolcord::rest::{InteractionResponse, RestError};

/// Discord's "Interaction has already been acknowledged.": an earlier
/// answer (this run's, or one before a crash) is there.
const ALREADY_ACKNOWLEDGED: u64 = 40060;

/// Whether the interaction holds an answer the bridge can edit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acked {
    /// The first answer (ours now, or an earlier run's) is in place.
    Yes,
    /// Not answerable any more: the text goes as a DM.
    No,
}

fn acknowledged(sent: Result<(), RestError>, ctx: &Ctx, what: &str) -> Acked {
    match sent {
        Ok(()) => Acked::Yes,
        Err(RestError::Http {
            code: Some(ALREADY_ACKNOWLEDGED),
            ..
        }) => Acked::Yes,
        Err(e) => {
            log::warn!("{what} could not be sent ({e}); answering in the DM instead");
            ctx.reporter.rest_failure(FailureKind::Delivery, &e);
            Acked::No
        }
    }
}

/// Answers at once with `text` (type 4, ephemeral); a DM if that fails.
pub(crate) async fn answer_now(ctx: &Ctx, interaction: &Interaction, text: &str) {
    let response = InteractionResponse::Message {
        content: text.to_owned(),
        ephemeral: true,
    };
    let sent = ctx
        .rest
        .create_interaction_response(interaction.id, &interaction.token, &response)
        .await;
    match acknowledged(sent, ctx, "the answer to a command") {
        // An earlier answer (40060) said the same: nothing to add.
        Acked::Yes => {}
        Acked::No => in_dm(ctx, interaction, text).await,
    }
}

/// "Thinking…" (type 5, ephemeral): the answer follows with [`finish`].
pub(crate) async fn defer(ctx: &Ctx, interaction: &Interaction) -> Acked {
    let sent = ctx
        .rest
        .create_interaction_response(
            interaction.id,
            &interaction.token,
            &InteractionResponse::Deferred { ephemeral: true },
        )
        .await;
    acknowledged(sent, ctx, "deferring the answer to a command")
}

/// Sets a deferred answer's text (or sends it as a DM).
pub(crate) async fn finish(ctx: &Ctx, interaction: &Interaction, acked: Acked, text: &str) {
    if acked == Acked::Yes {
        let edited = ctx
            .rest
            .edit_original_response(interaction.application_id, &interaction.token, text)
            .await;
        match edited {
            Ok(_) => return,
            Err(e) => {
                log::warn!("editing the answer to a command failed ({e}); answering in the DM");
                ctx.reporter.rest_failure(FailureKind::Delivery, &e);
            }
        }
    }
    in_dm(ctx, interaction, text).await;
}

async fn in_dm(ctx: &Ctx, interaction: &Interaction, text: &str) {
    let Some(channel) = interaction.channel_id else {
        log::warn!(
            "the answer to command interaction {} has nowhere to go: {text}",
            interaction.id
        );
        return;
    };
    let nonce = nonce::notice(interaction.id, Notice::CommandAnswer);
    delivery::notify(ctx, channel, text, &nonce).await;
}
