//! The results poller: when a file lands in `spool/results/` (an inotify
//! watch; or every `results_poll_ms` where the directory cannot be watched)
//! it picks up `spool/results/*.json`, delivers each (falling back and
//! archiving as [`super::delivery`] says), and moves malformed files aside.
//! While pairing codes are pending it also ticks every `results_poll_ms` to
//! notice approvals, so an approved user hears about it without writing
//! again. Otherwise nothing runs in between: an idle bridge has no timer
//! here at all (the watch catches every rename or close-after-write into
//! the directory, an inotify queue overflow wakes it too, and a lost
//! watch — the directory moved or deleted — hands over to polling).

use super::access::Role;
use super::counters::Counter;
use super::ctx::Ctx;
use super::delivery::{deliver, notify, Outgoing};
use super::pairing::{self, APPROVED_MESSAGE};
use super::spool::{result_id, BadResult, Outcome};
use super::watch::DirWatch;
use super::worker::reread_access;
use crate::recorder::FailureKind;
use crate::status::now_unix_ms;
use async_io::Timer;
use smol::channel::Receiver;
use std::cell::RefCell;
use std::collections::HashSet;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

/// Runs until `stop` closes.
pub(crate) async fn poll(ctx: Rc<Ctx>, stop: Receiver<()>) {
    let watch = DirWatch::new(ctx.spool.results.clone()).await;
    let poll_interval = Duration::from_millis(ctx.config.results_poll_ms.max(1));
    // Files being delivered, or that could not be archived (never retried
    // in this run, so a stuck file cannot be delivered over and over).
    let busy: Rc<RefCell<HashSet<PathBuf>>> = Rc::default();
    let mut listing_failed = false;
    // The first scan runs at once: results may have arrived while the
    // bridge was down, or before the watch existed.
    let mut first_scan = true;
    loop {
        // Watched and no pairing code waiting for approval: wake on change
        // only, so an idle bridge has no timer to serve. Otherwise poll, to
        // notice `smolcord pair` in time (or changes, without a watch).
        let woken = ctx.poller_wake.listen();
        let codes_pending = ctx.pairing.borrow().live_codes(now_unix_ms()) > 0;
        let tick = (!watch.is_active() || codes_pending).then_some(poll_interval);
        let stopped = !std::mem::take(&mut first_scan)
            && futures_lite::future::or(
                async {
                    let _ = stop.recv().await;
                    true
                },
                futures_lite::future::or(
                    async {
                        match tick {
                            Some(interval) => Timer::after(interval).await,
                            None => futures_lite::future::pending().await,
                        };
                        false
                    },
                    async {
                        futures_lite::future::or(watch.changed(), woken).await;
                        false
                    },
                ),
            )
            .await;
        if stopped || ctx.stopping.get() {
            return;
        }
        watch_approvals(&ctx).await;
        let paths = match ctx.spool.pending_results().await {
            Ok(paths) => {
                listing_failed = false;
                paths
            }
            Err(e) => {
                if !listing_failed {
                    log::error!("cannot list the results spool: {e}");
                    ctx.reporter
                        .fail(FailureKind::State, "spool/results", None, "listing failed");
                }
                listing_failed = true;
                continue;
            }
        };
        for path in paths {
            if !busy.borrow_mut().insert(path.clone()) {
                continue;
            }
            let (task_ctx, busy) = (ctx.clone(), busy.clone());
            // Counted from now, so a shutdown's drain cannot miss it.
            let guard = ctx.inflight.begin(format!("result {}", result_id(&path)));
            ctx.spawn("bridge-result", async move {
                let _guard = guard;
                if deliver_result(&task_ctx, &path).await {
                    busy.borrow_mut().remove(&path);
                }
            });
        }
    }
}

/// Delivers one result file; returns whether it may be looked at again.
async fn deliver_result(ctx: &Ctx, path: &std::path::Path) -> bool {
    let id = result_id(path);
    let result = match ctx.spool.read_result(path).await {
        Ok(result) => result,
        Err(BadResult::Io(e)) => {
            log::warn!("reading {}: {e}; will retry", path.display());
            return true;
        }
        Err(BadResult::Malformed(why)) => {
            ctx.counters.bump(Counter::ResultsMalformed);
            ctx.reporter.fail(
                FailureKind::Delivery,
                "spool/results",
                None,
                "malformed result file",
            );
            return match ctx.spool.move_aside(path, now_unix_ms()).await {
                Ok(target) => {
                    log::error!(
                        "{} is not a valid result ({why}); moved it to {} (expected {{\"channel_id\": \"…\", \"content\": \"…\"}})",
                        path.display(),
                        target.display()
                    );
                    true
                }
                Err(e) => {
                    log::error!(
                        "{} is not a valid result ({why}) and could not be moved aside ({e}); leaving it until restart",
                        path.display()
                    );
                    false
                }
            };
        }
    };
    let outcome = deliver(
        ctx,
        Outgoing {
            id: &id,
            channel: result.channel_id,
            content: &result.content,
            placeholder: None,
            archive_delivered: true,
            source: Some(path),
        },
    )
    .await;
    match outcome {
        Ok(Outcome::Delivered) => {
            ctx.counters.bump(Counter::ResultsDelivered);
            true
        }
        Ok(_) => true,
        Err(_) => false,
    }
}

/// While pairing codes are pending: notices approvals (and expiries).
pub(crate) async fn watch_approvals(ctx: &Ctx) {
    if ctx.pairing.borrow().live_codes(now_unix_ms()) == 0 {
        return;
    }
    reread_access(ctx).await;
    let (approved, file) = {
        let access = ctx.access.borrow();
        let mut book = ctx.pairing.borrow_mut();
        let pruned = book.prune(now_unix_ms(), &ctx.tunables.pairing);
        let approved = book.take_approved(|user| access.role(user) != Role::Stranger);
        let changed = pruned || !approved.is_empty();
        (approved, changed.then(|| book.file.clone()))
    };
    if let Some(file) = file {
        if let Err(e) = pairing::save(&ctx.state_dir, &file).await {
            log::warn!("saving the pairing book: {e}");
        }
    }
    for code in approved {
        log::info!("pairing approved for user {}", code.user_id);
        notify(ctx, code.channel_id, APPROVED_MESSAGE).await;
    }
}
