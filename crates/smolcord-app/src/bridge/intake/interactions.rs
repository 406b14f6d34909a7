//! The owner's slash commands, from INTERACTION_CREATE to the answer
//! (docs/commands.md). On the dispatch loop only what never waits: the
//! verdict ([`owner_command::judge`]), the bounds, the replay check; the
//! work and the answers run as tasks. `/restart` alone ends the loop, as
//! `!restart` does.
//!
//! Exactly once across crashes, as replies are:
//! - every owner's command handled is recorded in `runtime.json` (the
//!   newest 256), and a replay of one (a resume, a restart's resume) is
//!   skipped; one being handled in this run is skipped too; refusals are
//!   not recorded (a replay is refused again, which changes nothing);
//! - `/restart` is recorded, and the record waited for, *before* the
//!   restart marker and the exit (as `!restart`): a replay never restarts
//!   twice;
//! - approve, deny and revoke are recorded *after* their work and their
//!   answer, and the saved gateway seq stays below them until then (a
//!   ticket, as for messages): a crash in between replays the use, which
//!   runs again without acting twice (each is idempotent on its state) and
//!   is answered — by an edit of the earlier answer, or, past Discord's
//!   3 s, in the DM under a nonce of its own (`deliver::interaction_answer`);
//! - a use older than its token's 15 minutes is not acted on at all (a
//!   command the owner gave long ago and saw fail is not carried out
//!   unasked).

use crate::bridge::access::restart::{self, RestartMarker};
use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::interaction_answer::{self as answer, Acked};
use crate::bridge::intake::results;
use crate::bridge::jobs::backlog::snowflake_unix_ms;
use crate::bridge::jobs::inflight::JobGuard;
use crate::bridge::report::counters::Counter;
use crate::bridge::work::owner_action;
use crate::bridge::work::owner_command::{self, OwnerCommand, Verdict};
use crate::status::{self, now_unix_ms, StatusSnapshot};
use smolcord::protocol::{Interaction, Snowflake};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

/// Commands being handled at once; more are dropped (logged): the owner
/// gives one at a time, and a crowd of strangers' uses must not make
/// tasks without bound.
pub(crate) const MAX_IN_FLIGHT: usize = 8;
/// An interaction older than this (its token's life) is not acted on.
const STALE_MS: u64 = 15 * 60 * 1000;

/// The owner asked for a restart with `/restart`.
#[derive(Debug)]
pub(crate) struct RestartAsked;

/// The dispatch loop's part in the owner's commands.
#[derive(Debug, Default)]
pub(crate) struct Interactions {
    /// Interactions whose task has not finished (≤ [`MAX_IN_FLIGHT`]).
    in_flight: Rc<RefCell<BTreeSet<Snowflake>>>,
}

/// Takes an interaction out of the in-flight set when its task ends
/// (finished or cancelled).
struct InFlight(Rc<RefCell<BTreeSet<Snowflake>>>, Snowflake);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.borrow_mut().remove(&self.1);
    }
}

impl Interactions {
    /// An INTERACTION_CREATE (`seq` on `shard`). `statuses` is asked only
    /// for `/status`. Returns [`RestartAsked`] when the loop is to end for
    /// a restart (the record and the marker are on disk).
    pub async fn on_interaction(
        &self,
        ctx: &Rc<Ctx>,
        interaction: Interaction,
        shard: u32,
        seq: u64,
        statuses: impl FnOnce() -> StatusSnapshot,
    ) -> Option<RestartAsked> {
        let id = interaction.id;
        if ctx.runtime.interaction_handled(id) || self.in_flight.borrow().contains(&id) {
            ctx.counters.bump(Counter::ReplaysSkipped);
            log::info!("command interaction {id} was handled already; skipping its replay");
            return None;
        }
        let age = now_unix_ms()
            .saturating_add_signed(ctx.rest.clock_skew_ms().unwrap_or(0))
            .saturating_sub(snowflake_unix_ms(id));
        if age > STALE_MS {
            log::warn!(
                "command interaction {id} is {} s old, past its token's 15 minutes: not acted on",
                age / 1000
            );
            return None;
        }
        if self.in_flight.borrow().len() >= MAX_IN_FLIGHT {
            log::warn!(
                "{MAX_IN_FLIGHT} commands are being handled: command interaction {id} dropped"
            );
            return None;
        }
        let owner = ctx.access.owner();
        let command = match owner_command::judge(&interaction, owner) {
            Verdict::Ignore(why) => {
                log::debug!("interaction {id} ignored: {why}");
                return None;
            }
            Verdict::Refuse(text) => {
                let who = interaction.invoker().map(|u| u.id);
                log::info!(
                    "a command from {who:?}, not the owner's or not usable, refused: {text}"
                );
                // Counted as refused when someone else tried (the owner's
                // own mistyped option is no refusal of a person).
                if who.is_none() || who != owner {
                    ctx.counters.bump(Counter::Refused);
                }
                // Not recorded: a replay is refused again (one request at
                // most: the first answer stands, 40060), and a crowd of
                // strangers cannot push the owner's uses off the record.
                self.spawn(
                    ctx,
                    interaction,
                    "bridge-command-refusal",
                    move |ctx, interaction| async move {
                        answer::answer_now(&ctx, &interaction, &text).await;
                    },
                );
                return None;
            }
            Verdict::Run(command) => command,
        };
        log::info!("the owner's {} (interaction {id})", command.name());
        match command {
            OwnerCommand::Restart => {
                restart(ctx, &interaction).await;
                Some(RestartAsked)
            }
            OwnerCommand::Status => {
                let pending = ctx.access.live_codes();
                let text = status::short::short(&statuses(), now_unix_ms(), pending);
                self.spawn(
                    ctx,
                    interaction,
                    "bridge-command-status",
                    move |ctx, interaction| async move {
                        answer::answer_now(&ctx, &interaction, &text).await;
                        mark_handled(&ctx, interaction.id).await;
                    },
                );
                None
            }
            command => {
                // Held below this interaction until it is on record: a
                // crash before that resumes from before it, and it runs
                // again (idempotent) instead of being lost.
                let (ticket, job) = ctx
                    .floor
                    .begin_message(shard, seq, job_name(interaction.id));
                self.spawn_as(
                    ctx,
                    interaction,
                    "bridge-command",
                    job,
                    move |ctx, interaction| async move {
                        let acked = if command.deferred() {
                            answer::defer(&ctx, &interaction).await
                        } else {
                            Acked::No
                        };
                        let done = match &command {
                            OwnerCommand::Approve(code) => owner_action::approve(&ctx, code).await,
                            OwnerCommand::Deny(code) => owner_action::deny(&ctx, code).await,
                            OwnerCommand::Revoke(user) => owner_action::revoke(&ctx, *user).await,
                            OwnerCommand::Status | OwnerCommand::Restart => unreachable!(),
                        };
                        if done.approved {
                            // The user is told as after `smolcord pair`.
                            results::watch_approvals(&ctx).await;
                        }
                        answer::finish(&ctx, &interaction, acked, &done.text).await;
                        mark_handled(&ctx, interaction.id).await;
                        ctx.floor.end(ticket);
                    },
                );
                None
            }
        }
    }

    /// Runs `work` as a task, the interaction in flight meanwhile (and in
    /// the drain's list at a stop, once).
    fn spawn<F, Fut>(&self, ctx: &Rc<Ctx>, interaction: Interaction, name: &'static str, work: F)
    where
        F: FnOnce(Rc<Ctx>, Interaction) -> Fut,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        let guard = ctx.floor.begin_job(job_name(interaction.id));
        self.spawn_as(ctx, interaction, name, guard, work);
    }

    /// [`Self::spawn`] for an interaction whose job is in the drain's list
    /// already (`guard`, taken with its place under the saved seq).
    fn spawn_as<F, Fut>(
        &self,
        ctx: &Rc<Ctx>,
        interaction: Interaction,
        name: &'static str,
        guard: JobGuard,
        work: F,
    ) where
        F: FnOnce(Rc<Ctx>, Interaction) -> Fut,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        let id = interaction.id;
        self.in_flight.borrow_mut().insert(id);
        let in_flight = InFlight(self.in_flight.clone(), id);
        let task = work(ctx.clone(), interaction);
        ctx.spawn(name, async move {
            let _guards = (guard, in_flight);
            task.await;
        });
    }
}

/// What the drain's list calls an interaction being handled.
fn job_name(id: Snowflake) -> String {
    format!("command interaction {id}")
}

/// Records the interaction as handled and waits until that is on disk.
async fn mark_handled(ctx: &Ctx, id: Snowflake) {
    ctx.runtime.record_interaction(id).await;
}

/// `/restart`: answered at once (the answer does not depend on the disk),
/// recorded before the marker, then the loop ends; "Back online" follows
/// in the DM after the restart, as for `!restart`.
async fn restart(ctx: &Rc<Ctx>, interaction: &Interaction) {
    let answered = interaction.clone();
    ctx.spawn_job(
        "bridge-command-restart-ack",
        "restart acknowledgement".into(),
        |ctx| async move {
            answer::answer_now(&ctx, &answered, "Restarting…").await;
            ctx.turn_succeeded();
        },
    );
    // On disk before the marker: a replayed `/restart` must not restart
    // us again.
    mark_handled(ctx, interaction.id).await;
    let Some(channel) = interaction.channel_id else {
        return;
    };
    let marker = RestartMarker {
        requested_by: interaction.invoker().map_or(interaction.id, |u| u.id),
        channel_id: channel,
        message_id: interaction.id,
        requested_unix_ms: now_unix_ms(),
    };
    restart::write_marker(&ctx.state_dir, &ctx.reporter, &marker).await;
}
