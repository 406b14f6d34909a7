//! The results poller: when a file lands in `spool/results/` (an inotify
//! watch; or every `results_poll_ms` where the directory cannot be watched)
//! it pages through `spool/results/*.json` and hands each file to one of
//! [`DELIVERY_WORKERS`] delivery tasks, which read and parse it off the
//! loop (at most `max_result_bytes`, never through a symbolic link),
//! deliver it (falling back and archiving as [`crate::bridge::deliver::delivery`] says), and
//! set bad files aside. A result of several parts goes on after a restart
//! from the part after the last one its outbox record lists. While pairing codes are pending it also ticks every
//! `results_poll_ms` to notice approvals, so an approved user hears about it
//! without writing again. Otherwise nothing runs in between: an idle bridge
//! has no timer here at all (the watch catches every rename or
//! close-after-write into the directory, an inotify queue overflow wakes it
//! too, and a lost watch — the directory moved or deleted — hands over to
//! polling).
//!
//! Bounded however many files arrive at once: one scan holds at most
//! [`SCAN_PAGE`] names, and the poller waits for a free worker before it
//! takes the next, so a result waits on disk, not in memory, and its
//! delivery's time budget (the REST client's rate-limit and retry bounds)
//! starts only when a worker takes it.

use crate::bridge::access::pairing::APPROVED_MESSAGE;
use crate::bridge::ctx::Ctx;
use crate::bridge::deliver::delivery::{self, notify, Plan, Settle};
use crate::bridge::deliver::files_out;
use crate::bridge::intake::watch::DirWatch;
use crate::bridge::report::counters::Counter;
use crate::bridge::store::nonce;
use crate::bridge::store::outbox::ResultRecord;
use crate::bridge::store::spool::{result_id, Aside, BadResult, Outcome, SpoolResult};
use crate::recorder::FailureKind;
use crate::status::now_unix_ms;
use async_io::Timer;
use smol::channel::Receiver;
use smol::lock::Semaphore;
use smolcord::protocol::Snowflake;
use smolcord::rest::Nonce;
use std::cell::RefCell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// Results delivered at once. Each holds a REST call (a blocking-pool
/// thread while it is on the wire) and a result of up to `max_result_bytes`.
/// Four calls of ~100 ms each to Discord make ~40 requests/s, just under
/// its global limit of 50/s; more workers would only wait in the rate
/// limiter, holding memory and threads, and would make a burst of results
/// crowd out the replies to live messages.
pub(crate) const DELIVERY_WORKERS: usize = 4;

/// Result names one directory scan holds at most (a page; the poller pages
/// on until the directory is done).
pub(crate) const SCAN_PAGE: usize = 64;

/// Files that could not be archived are not delivered again in this run
/// (they would be delivered over and over); past this many the poller
/// stops taking results until a restart, with an error (the disk is
/// failing; the results wait safely in `spool/results/`).
const MAX_STUCK: usize = 256;

/// Which result files are being delivered or stuck (never retried in this
/// run).
#[derive(Default)]
struct Book {
    delivering: HashSet<PathBuf>,
    stuck: HashSet<PathBuf>,
}

impl Book {
    fn is_busy(&self, path: &Path) -> bool {
        self.delivering.contains(path) || self.stuck.contains(path)
    }
}

/// Runs until `stop` closes.
pub(crate) async fn poll(ctx: Rc<Ctx>, stop: Receiver<()>) {
    let watch = DirWatch::new(ctx.spool.results.clone()).await;
    let poll_interval = Duration::from_millis(ctx.config.results_poll_ms.max(1));
    let workers = Arc::new(Semaphore::new(DELIVERY_WORKERS));
    let book: Rc<RefCell<Book>> = Rc::default();
    let mut listing_failed = false;
    // The first scan runs at once: results may have arrived while the
    // bridge was down, or before the watch existed.
    let mut first_scan = true;
    loop {
        // Watched and no pairing code waiting for approval: wake on change
        // only, so an idle bridge has no timer to serve. Otherwise poll, to
        // notice `smolcord pair` in time (or changes, without a watch).
        let woken = ctx.access.code_issued();
        let codes_pending = ctx.access.codes_pending();
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
        if stopped || ctx.lifecycle.stopping() {
            return;
        }
        watch_approvals(&ctx).await;
        if book.borrow().stuck.len() >= MAX_STUCK {
            continue;
        }
        match scan(&ctx, &stop, &workers, &book).await {
            Scan::Done => listing_failed = false,
            Scan::Stopped => return,
            Scan::ListingFailed(e) => {
                if !listing_failed {
                    log::error!("cannot list the results spool: {e}");
                    ctx.reporter
                        .fail(FailureKind::State, "spool/results", None, "listing failed");
                }
                listing_failed = true;
            }
        }
    }
}

enum Scan {
    Done,
    Stopped,
    ListingFailed(smolcord::offload::Error),
}

/// Pages through the results directory, handing each file not already
/// taken to a delivery worker as one becomes free.
async fn scan(
    ctx: &Rc<Ctx>,
    stop: &Receiver<()>,
    workers: &Arc<Semaphore>,
    book: &Rc<RefCell<Book>>,
) -> Scan {
    let mut after = None;
    loop {
        let (page, more) = match ctx.spool.pending_results(after.take(), SCAN_PAGE).await {
            Ok(listed) => listed,
            Err(e) => return Scan::ListingFailed(e),
        };
        after = page.last().and_then(|p| p.file_name()).map(Into::into);
        for path in page {
            if book.borrow().is_busy(&path) {
                continue;
            }
            let permit = futures_lite::future::or(
                async {
                    let _ = stop.recv().await;
                    None
                },
                async { Some(workers.acquire_arc().await) },
            )
            .await;
            let Some(permit) = permit.filter(|_| !ctx.lifecycle.stopping()) else {
                return Scan::Stopped;
            };
            if book.borrow().stuck.len() >= MAX_STUCK {
                log::error!(
                    "{MAX_STUCK} result files could not be archived; no more results are taken until a restart (they wait in {})",
                    ctx.spool.results.display()
                );
                return Scan::Done;
            }
            book.borrow_mut().delivering.insert(path.clone());
            let book = book.clone();
            let what = format!("result {}", result_id(&path));
            // Counted from now, so a shutdown's drain cannot miss it.
            ctx.spawn_job("bridge-result", what, |ctx| async move {
                let retry_later = deliver_result(&ctx, &path).await;
                let mut book = book.borrow_mut();
                book.delivering.remove(&path);
                if !retry_later {
                    book.stuck.insert(path);
                }
                drop(permit);
            });
        }
        if !more {
            return Scan::Done;
        }
    }
}

/// Delivers one result file; returns whether it may be looked at again.
async fn deliver_result(ctx: &Ctx, path: &Path) -> bool {
    let id = result_id(path);
    let (why, aside) = match ctx
        .spool
        .read_result(path, ctx.config.max_result_bytes)
        .await
    {
        Ok(result) => {
            return match deliver_parts(ctx, path, &id, &result).await {
                Ok(Outcome::Delivered) => {
                    ctx.counters.bump(Counter::ResultsDelivered);
                    true
                }
                Ok(_) => true,
                Err(_) => false,
            };
        }
        Err(BadResult::Vanished) => {
            log::debug!("{} is gone (delivered already)", path.display());
            return true;
        }
        Err(BadResult::Io(e)) => {
            log::warn!("reading {}: {e}; will retry", path.display());
            return true;
        }
        Err(BadResult::Malformed(why, channel)) => {
            ctx.counters.bump(Counter::ResultsMalformed);
            tell_unusable(ctx, path, &why, channel).await;
            ctx.reporter.fail(
                FailureKind::Delivery,
                "spool/results",
                None,
                "malformed result file",
            );
            (
                format!("is not a valid result ({why}; expected {{\"channel_id\": \"…\", \"content\": \"…\"}})"),
                Aside::Malformed,
            )
        }
        Err(BadResult::Rejected(why)) => {
            ctx.counters.bump(Counter::ResultsRejected);
            ctx.reporter.fail(
                FailureKind::Delivery,
                "spool/results",
                None,
                format!("result file refused unread: {why}"),
            );
            (format!("was refused unread: {why}"), Aside::Rejected)
        }
    };
    match ctx.spool.set_aside(path, aside, now_unix_ms()).await {
        Ok(target) => {
            log::error!("{} {why}; moved it to {}", path.display(), target.display());
            true
        }
        Err(e) => {
            log::error!(
                "{} {why}, and it could not be moved aside ({e}); leaving it until restart",
                path.display()
            );
            false
        }
    }
}

/// Tells whoever waits for a result that cannot be used: the user of the
/// channel it names, else the owner (in their DM channel), once (a bad
/// file is moved aside after this, and its notice has a nonce of its own).
/// Only the file's name and what is wrong are said, never its content.
async fn tell_unusable(ctx: &Ctx, path: &Path, why: &str, channel: Option<Snowflake>) {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let why: String = why.chars().take(200).collect();
    let nonce = nonce::result_unusable(nonce::fingerprint(&[name.as_bytes()]));
    let (channel, text) = match channel {
        Some(channel) => (
            channel,
            format!("An answer for you from the agent could not be used ({why}). The bot's operator finds it as spool/malformed/{name}."),
        ),
        None => {
            let Some(channel) = owner_dm(ctx).await else {
                log::warn!("no channel to tell about the unusable result {name}");
                return;
            };
            (
                channel,
                format!("A result in spool/results/ could not be used and names no channel: {name} ({why}). It was moved to spool/malformed/."),
            )
        }
    };
    notify(ctx, channel, &text, &nonce).await;
}

/// The owner's DM channel: remembered, else opened (and remembered).
async fn owner_dm(ctx: &Ctx) -> Option<Snowflake> {
    let owner = ctx.access.owner()?;
    let known = ctx.runtime.dm_channel(owner);
    if known.is_some() {
        return known;
    }
    match ctx.rest.create_dm(owner).await {
        Ok(channel) => {
            ctx.runtime.remember_dm(owner, channel.id);
            Some(channel.id)
        }
        Err(e) => {
            log::warn!("opening the owner's DM channel: {e}");
            None
        }
    }
}

/// Sends a result's parts from where an earlier run got (its outbox
/// record, saved between parts), then settles and archives it; the record
/// goes once the result is archived.
async fn deliver_parts(
    ctx: &Ctx,
    path: &Path,
    id: &str,
    result: &SpoolResult,
) -> Result<Outcome, Outcome> {
    let file = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let (channel, content) = (result.channel_id, result.content.as_str());
    let mut record = match ctx.outbox.result(&file, channel, content).await {
        Ok(record) => record,
        Err(e) => {
            log::warn!("{e}; delivering result {id} from its first part");
            ResultRecord::new(&file, channel, content)
        }
    };
    if record.sent.parts() == 0 {
        record.reply_to = reply_to(ctx, id, channel);
    }
    let plan = Plan::new(content, None);
    // The files the agent left for this task (named after the result).
    let files = files_out::collect(&ctx.files.out_dir(id)).await;
    let sent = delivery::send(ctx, channel, &plan, &files, &mut record, None).await;
    let settled = delivery::settle(
        ctx,
        Settle {
            id,
            channel,
            content,
            sent,
            delivered: &record.sent.message_ids,
            archive_delivered: true,
            source: Some(path),
        },
    )
    .await;
    // Its task is done: the files it was given (named after the task, as
    // the result is) go, and the agent's output files with them.
    if settled.is_ok() {
        ctx.files.remove(id).await;
    }
    // Only a result of several parts (or one that fell back from a file to
    // text) ever has a record on disk.
    if settled.is_ok() && (plan.parts() + files.parts() > 1 || record.sent.as_text) {
        if let Err(e) = ctx.outbox.remove(&record).await {
            log::warn!("removing a delivered result's record: {e}");
        }
    }
    settled
}

/// The message a result answers as a Discord reply: its task's (the result
/// named `ID.json` after it), when the result goes to that task's server
/// channel, as the bridge's own replies there do: several conversations
/// share the channel, and the reply says which message it answers. Not in
/// a DM (a spool result there stays a plain message, as before) nor in a
/// thread (the message heads it already). A message that is not in the
/// channel (the agent sent the result elsewhere) makes Discord send it as
/// a plain message (`fail_if_not_exists: false`).
fn reply_to(ctx: &Ctx, id: &str, channel: Snowflake) -> Option<Snowflake> {
    let message = id.parse::<Snowflake>().ok()?;
    ctx.config.channel(channel).map(|_| message)
}

/// While pairing codes are pending: notices approvals (and expiries).
pub(crate) async fn watch_approvals(ctx: &Ctx) {
    for code in ctx.access.take_approved().await {
        log::info!("pairing approved for user {}", code.user_id);
        // Sent once: the pairing book saved above no longer holds the code.
        notify(ctx, code.channel_id, APPROVED_MESSAGE, &Nonce::random()).await;
    }
}
