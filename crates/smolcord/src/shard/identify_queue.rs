//! Who may identify when.
//!
//! Discord lets a bot start `max_concurrency` fresh sessions per 5 s: one
//! per bucket, the bucket of shard `n` being `n % max_concurrency`. Too
//! early an Identify is answered with op 9 (invalid session) and must be
//! made again (whether the refused one counts against the daily budget,
//! Discord does not say; the budget guard counts it). A shard asks its
//! [`IdentifyQueue`] for a permit before each fresh identify (a resume
//! never asks: it is free and unlimited) and holds it until its Identify
//! is sent.
//!
//! - [`LocalIdentifyQueue`]: the shards of one process (a [`super::ShardSet`]
//!   shares one), one identify per bucket per window, buckets served in the
//!   order shards ask.
//! - [`RemoteIdentifyQueue`]: processes and hosts share a separately run
//!   service speaking twilight-rs/gateway-queue's protocol — `GET
//!   {url}?shard=N`, answered (2xx) when shard N may identify. A queue that
//!   is down is asked again with jittered backoff and said so loudly, never
//!   bypassed: bypassing it is how a fleet burns its daily identify budget.
//!   A long wait is reported; and a local floor keeps one identify per
//!   bucket per window in this process even if the queue says "go" at once.
//!
//! ```
//! # use smolcord::shard::{IdentifyQueue, LocalIdentifyQueue};
//! # use std::time::Duration;
//! # futures_lite::future::block_on(async {
//! let queue = LocalIdentifyQueue::new(Duration::from_secs(5));
//! queue.set_max_concurrency(4);
//! let permit = queue.permit(6).await; // bucket 2
//! // ... connect, send Identify ...
//! drop(permit); // bucket 2 is free again 5 s from now
//! # });
//! ```

use super::backoff::Backoff;
use super::counts::MAX_CONCURRENCY;
use super::BoxFuture;
use futures_lite::future;
use smol::lock::{Mutex as AsyncMutex, MutexGuardArc};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Grants fresh identifies. Shared by every shard that must respect the
/// same limit.
pub trait IdentifyQueue: Send + Sync {
    /// Resolves when shard `shard_id` may identify. Hold the permit until
    /// the Identify is sent (or the attempt failed).
    fn permit(&self, shard_id: u32) -> BoxFuture<IdentifyPermit>;

    /// The bot's `max_concurrency`, as `GET /gateway/bot` reports it.
    fn set_max_concurrency(&self, _max_concurrency: u32) {}
}

/// Leave to identify; dropping it frees the bucket (after its window).
pub struct IdentifyPermit {
    _turn: Option<BucketTurn>,
}

impl std::fmt::Debug for IdentifyPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentifyPermit")
            .field("holds_a_bucket", &self._turn.is_some())
            .finish()
    }
}

impl IdentifyPermit {
    /// A permit that frees nothing when dropped (the remote queue keeps its
    /// own time).
    pub fn granted() -> IdentifyPermit {
        IdentifyPermit { _turn: None }
    }
}

/// One bucket held: on release, the next identify in it may go `window`
/// after now.
struct BucketTurn {
    next_allowed: MutexGuardArc<Option<Instant>>,
    window: Duration,
}

impl Drop for BucketTurn {
    fn drop(&mut self) {
        *self.next_allowed = Some(Instant::now() + self.window);
    }
}

/// The in-process queue: one identify per bucket per `window`.
pub struct LocalIdentifyQueue {
    window: Duration,
    buckets: Mutex<Buckets>,
}

impl std::fmt::Debug for LocalIdentifyQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalIdentifyQueue")
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

type Slot = Arc<AsyncMutex<Option<Instant>>>;

struct Buckets {
    /// One slot per bucket: when its next identify may go.
    slots: Vec<Slot>,
    /// A `max_concurrency` not applied yet: a slot was held or waited for.
    pending: Option<usize>,
}

impl Buckets {
    /// Applies a pending `max_concurrency` once no shard holds or waits for
    /// a slot. Replacing slots in use would let a held one's window end
    /// unseen (its release writes to a slot no one asks any more) and leave
    /// its waiters in a line of their own beside the new slots: two
    /// identifies in one bucket at once. Meanwhile the old slots are kept,
    /// which going from the default single bucket to more is only stricter.
    fn settle(&mut self) {
        let Some(wanted) = self.pending else {
            return;
        };
        // A pending permit and a held turn each keep a clone of their slot.
        if self.slots.iter().any(|slot| Arc::strong_count(slot) > 1) {
            return;
        }
        // Every new slot waits out the longest window still running, so a
        // change never lets an identify through early.
        let busy_until = self
            .slots
            .iter()
            .filter_map(|slot| slot.try_lock().and_then(|next| *next))
            .max();
        self.slots = (0..wanted)
            .map(|_| Arc::new(AsyncMutex::new(busy_until)))
            .collect();
        self.pending = None;
    }
}

impl LocalIdentifyQueue {
    /// A queue with one bucket (`max_concurrency` 1) until told otherwise.
    pub fn new(window: Duration) -> LocalIdentifyQueue {
        LocalIdentifyQueue {
            window,
            buckets: Mutex::new(Buckets {
                slots: vec![Arc::new(AsyncMutex::new(None))],
                pending: None,
            }),
        }
    }

    /// Holds every bucket until `window` after `last` (an identify made
    /// before this process started, from the persisted history).
    pub fn after_identify_at(self, last: Instant) -> LocalIdentifyQueue {
        for bucket in self.lock().slots.iter() {
            if let Some(mut next) = bucket.try_lock() {
                *next = Some(last + self.window);
            }
        }
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Buckets> {
        self.buckets.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl IdentifyQueue for LocalIdentifyQueue {
    fn permit(&self, shard_id: u32) -> BoxFuture<IdentifyPermit> {
        let bucket = {
            let mut buckets = self.lock();
            buckets.settle();
            buckets.slots[shard_id as usize % buckets.slots.len()].clone()
        };
        let window = self.window;
        Box::pin(async move {
            // async-lock's Mutex is fair: shards get their bucket in the
            // order they asked, so a set starts in shard order.
            let next_allowed = bucket.lock_arc().await;
            if let Some(at) = *next_allowed {
                if at > Instant::now() {
                    crate::rt::Timer::at(at).await;
                }
            }
            IdentifyPermit {
                _turn: Some(BucketTurn {
                    next_allowed,
                    window,
                }),
            }
        })
    }

    /// A value outside `1..=`[`MAX_CONCURRENCY`] is refused (logged) and
    /// the buckets kept: each is a slot allocated here, and fewer buckets
    /// than Discord's would put two shards of one of its buckets in
    /// different slots (two identifies at once).
    fn set_max_concurrency(&self, max_concurrency: u32) {
        if !(1..=MAX_CONCURRENCY).contains(&max_concurrency) {
            log::error!(
                "identify queue: refusing max_concurrency {max_concurrency} (not in 1..={MAX_CONCURRENCY}); keeping {} bucket(s)",
                self.lock().slots.len()
            );
            return;
        }
        let wanted = max_concurrency as usize;
        let mut buckets = self.lock();
        buckets.pending = (buckets.slots.len() != wanted).then_some(wanted);
        buckets.settle();
    }
}

/// A queue service shared by processes and hosts (twilight-rs/gateway-queue
/// protocol), with a floor of this process's own.
///
/// - The request waits on the event loop, not on a `blocking` pool thread
///   ([`crate::rest::plain_get`]), for up to 10 minutes, then is made again.
/// - A shard still waiting after 30 s is reported at warn level — shard,
///   bucket, queue — and again every 60 s, so the log says why shards are
///   not connecting.
/// - A queue that cannot be reached, or answers an error, is asked again
///   after a random ½–1× of a backoff doubling from 1 s to 60 s: processes
///   that lost the same queue do not come back to it in step.
/// - However the queue answers, two shards of one bucket in this process
///   identify at least Discord's window (5 s) apart: a queue that says "go"
///   to everything cannot make this process spend identifies too fast.
///
/// Why one long request and not short ones made again: gateway-queue
/// answers in the order asked and skips a request whose client left, so a
/// shard asking again goes to the back of its bucket's line, behind every
/// client that waited; and a service that does not notice a client left
/// spends a window on each abandoned request. Waiting is what the protocol
/// expects, and on the loop it costs a socket, not a thread.
pub struct RemoteIdentifyQueue {
    url: String,
    floor: Arc<LocalIdentifyQueue>,
    /// As `GET /gateway/bot` said; 0 until then (for the report).
    max_concurrency: AtomicU32,
    patience: Duration,
    report_every: Duration,
}

/// The URL as logged (no user info or query: either may carry a secret).
impl std::fmt::Debug for RemoteIdentifyQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteIdentifyQueue")
            .field("url", &shown_url(&self.url))
            .field("patience", &self.patience)
            .finish_non_exhaustive()
    }
}

/// How long one request to the queue service may take: the service holds
/// it until the shard's turn, which for the last of many shards can be
/// minutes away.
const REMOTE_WAIT: Duration = Duration::from_secs(600);
/// A shard waiting longer than this for its turn is reported...
const PATIENCE: Duration = Duration::from_secs(30);
/// ... and again this often while it keeps waiting.
const REPORT_EVERY: Duration = Duration::from_secs(60);

impl RemoteIdentifyQueue {
    /// A queue at `url` (`http://` or `https://`; `?shard=N` is appended).
    pub fn new(url: impl Into<String>) -> RemoteIdentifyQueue {
        RemoteIdentifyQueue {
            url: url.into(),
            floor: Arc::new(LocalIdentifyQueue::new(
                super::identify_budget::CONCURRENCY_WINDOW,
            )),
            max_concurrency: AtomicU32::new(0),
            patience: PATIENCE,
            report_every: REPORT_EVERY,
        }
    }

    /// The least time between two identifies of one bucket in this
    /// process, whatever the queue answers: Discord's window (5 s, the
    /// default; a simulator may use less). Never set it above the queue's
    /// own spacing: a turn held back past it runs into the next holder's.
    pub fn with_window(mut self, window: Duration) -> RemoteIdentifyQueue {
        self.floor = Arc::new(LocalIdentifyQueue::new(window));
        self
    }

    /// After how long a shard still waiting for its turn is reported at
    /// warn level, and how often again (30 s, then every 60 s).
    pub fn with_patience(mut self, first: Duration, every: Duration) -> RemoteIdentifyQueue {
        self.patience = first;
        self.report_every = every.max(Duration::from_millis(1));
        self
    }

    fn request_url(&self, shard_id: u32) -> String {
        let separator = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{separator}shard={shard_id}", self.url)
    }
}

impl IdentifyQueue for RemoteIdentifyQueue {
    fn permit(&self, shard_id: u32) -> BoxFuture<IdentifyPermit> {
        let url = self.request_url(shard_id);
        let shown = shown_url(&self.url);
        let which = match self.max_concurrency.load(Ordering::Relaxed) {
            0 => format!("shard {shard_id}"),
            count => format!(
                "shard {shard_id} (bucket {} of max_concurrency {count})",
                shard_id % count
            ),
        };
        let floor = self.floor.clone();
        let (patience, report_every) = (self.patience, self.report_every);
        Box::pin(async move {
            let asked = Instant::now();
            let report = async {
                let mut at = asked + patience;
                loop {
                    crate::rt::Timer::at(at).await;
                    log::warn!(
                        "identify queue {shown}: {which} has waited {:.0} s for its turn to identify, and does not connect until the queue answers",
                        asked.elapsed().as_secs_f64()
                    );
                    at += report_every;
                }
            };
            future::or(remote_turn(&url, &shown, &which), report).await;
            let granted = Instant::now();
            let permit = floor.permit(shard_id).await;
            log::debug!(
                "identify queue: shard {shard_id} may identify (waited {:.1} s, {:.1} s of it for this process's floor)",
                asked.elapsed().as_secs_f64(),
                granted.elapsed().as_secs_f64()
            );
            permit
        })
    }

    fn set_max_concurrency(&self, max_concurrency: u32) {
        if (1..=MAX_CONCURRENCY).contains(&max_concurrency) {
            self.max_concurrency
                .store(max_concurrency, Ordering::Relaxed);
        }
        self.floor.set_max_concurrency(max_concurrency);
    }
}

/// Asks the queue at `url` until it answers 2xx.
async fn remote_turn(url: &str, shown: &str, which: &str) {
    let mut backoff = Backoff::new(
        Duration::from_secs(1),
        Duration::from_secs(60),
        Duration::MAX,
    );
    loop {
        let failure = match crate::rest::plain_get(url.to_owned(), REMOTE_WAIT).await {
            Ok(status) if (200..300).contains(&status) => return,
            Ok(status) => format!("answered HTTP {status}"),
            Err(err) => err.to_string(),
        };
        let wait = backoff.next_delay_at_least_half();
        log::error!(
            "identify queue {shown} {failure}; {which} does not identify without it (bypassing it is how a fleet burns its daily identify budget): asking again in {:.1} s",
            wait.as_secs_f64()
        );
        crate::rt::Timer::after(wait).await;
    }
}

/// `url` as logged: without user info or query, either of which may carry
/// a secret.
fn shown_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, _)) => (base, "?…"),
        None => (url, ""),
    };
    let Some((scheme, rest)) = base.split_once("://") else {
        return format!("{base}{query}");
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}{query}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn one_identify_per_bucket_per_window() {
        let queue = LocalIdentifyQueue::new(200 * MS);
        queue.set_max_concurrency(2);
        future::block_on(async {
            let start = Instant::now();
            drop(queue.permit(0).await);
            drop(queue.permit(1).await); // another bucket: no wait
            assert!(start.elapsed() < 150 * MS);
            drop(queue.permit(2).await); // bucket 0 again: waits
            assert!(start.elapsed() >= 200 * MS);
        });
    }

    #[test]
    fn the_window_runs_from_the_release_of_the_permit() {
        let queue = LocalIdentifyQueue::new(100 * MS);
        future::block_on(async {
            let permit = queue.permit(0).await;
            async_io::Timer::after(150 * MS).await; // a slow connect
            drop(permit);
            let released = Instant::now();
            drop(queue.permit(0).await);
            assert!(released.elapsed() >= 100 * MS);
        });
    }

    #[test]
    fn a_held_bucket_blocks_its_next_shard() {
        let queue = LocalIdentifyQueue::new(10 * MS);
        future::block_on(async {
            let _held = queue.permit(0).await;
            assert!(future::poll_once(queue.permit(0)).await.is_none());
        });
    }

    #[test]
    fn a_new_max_concurrency_does_not_forget_a_bucket_in_use() {
        // Shard 0 holds the one bucket of the default queue when `GET
        // /gateway/bot` (which failed for it) answers another shard: 2.
        let queue = LocalIdentifyQueue::new(200 * MS);
        future::block_on(async {
            let held = queue.permit(0).await;
            queue.set_max_concurrency(2);
            drop(held); // shard 0's Identify is sent
            let released = Instant::now();
            drop(queue.permit(2).await); // bucket 0, like shard 0
            assert!(released.elapsed() >= 190 * MS, "{:?}", released.elapsed());
        });
    }

    #[test]
    fn a_new_max_concurrency_does_not_strand_a_waiting_shard() {
        let queue = LocalIdentifyQueue::new(200 * MS);
        future::block_on(async {
            let held = queue.permit(0).await;
            // Shard 2 waits behind shard 0 when the count changes.
            let mut waiting = queue.permit(2);
            assert!(future::poll_once(&mut waiting).await.is_none());
            queue.set_max_concurrency(2);
            drop(held);
            let released = Instant::now();
            // Shard 4 asks later but may not pass shard 2 or the window.
            let (second, third) = future::zip(
                async {
                    drop(waiting.await);
                    Instant::now()
                },
                async {
                    drop(queue.permit(4).await);
                    Instant::now()
                },
            )
            .await;
            let first = second.min(third) - released;
            let gap = second.max(third) - second.min(third);
            assert!(first >= 190 * MS, "first after {first:?}");
            assert!(gap >= 190 * MS, "gap {gap:?}");
        });
    }

    #[test]
    fn an_absurd_max_concurrency_is_refused_before_any_slot_is_made() {
        let queue = LocalIdentifyQueue::new(10 * MS);
        queue.set_max_concurrency(4);
        for absurd in [u32::MAX, MAX_CONCURRENCY + 1, 0] {
            queue.set_max_concurrency(absurd);
            assert_eq!(queue.lock().slots.len(), 4, "{absurd}");
        }
        queue.set_max_concurrency(MAX_CONCURRENCY);
        assert_eq!(queue.lock().slots.len(), MAX_CONCURRENCY as usize);
    }

    #[test]
    fn a_persisted_identify_holds_the_first_one() {
        let queue = LocalIdentifyQueue::new(100 * MS).after_identify_at(Instant::now());
        future::block_on(async {
            let start = Instant::now();
            drop(queue.permit(0).await);
            assert!(start.elapsed() >= 90 * MS);
        });
    }

    #[test]
    fn logged_urls_keep_no_secrets() {
        assert_eq!(shown_url("http://q:8000/"), "http://q:8000/");
        assert_eq!(
            shown_url("https://user:pw@q.internal/queue?token=x"),
            "https://q.internal/queue?…"
        );
        assert_eq!(shown_url("http://a:b@q"), "http://q");
    }

    #[test]
    fn retries_are_jittered_within_half_to_all_of_the_backoff() {
        let mut backoff = Backoff::new(
            Duration::from_secs(8),
            Duration::from_secs(8),
            Duration::MAX,
        );
        let waits: Vec<Duration> = (0..50)
            .map(|_| backoff.next_delay_at_least_half())
            .collect();
        assert!(waits
            .iter()
            .all(|w| (Duration::from_secs(4)..=Duration::from_secs(8)).contains(w)));
        let spread = *waits.iter().max().unwrap() - *waits.iter().min().unwrap();
        assert!(spread > Duration::from_secs(1), "{waits:?}");
    }

    #[test]
    fn remote_urls_get_the_shard() {
        assert_eq!(
            RemoteIdentifyQueue::new("http://q:8000/").request_url(3),
            "http://q:8000/?shard=3"
        );
        assert_eq!(
            RemoteIdentifyQueue::new("http://q/?token=x").request_url(3),
            "http://q/?token=x&shard=3"
        );
    }
}
