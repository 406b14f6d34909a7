//! Bounded waits. Nothing in a test sleeps and hopes: it waits for what it
//! expects, and a bound turns "never" into a failure that names it.
//!
//! Whatever a test may wait on in-process (a log line, a sink event) calls
//! [`changed`], which wakes [`wait_until`] at once; other conditions are
//! re-checked every 20 ms.

use event_listener::Event;
use futures_lite::future;
use std::future::Future;
use std::time::{Duration, Instant};

/// A generous bound for anything that should happen "soon" (CI shares two
/// noisy cores).
pub const SOON: Duration = Duration::from_secs(10);

/// How often a condition nobody signals is re-checked.
const POLL: Duration = Duration::from_millis(20);

static CHANGED: Event = Event::new();

/// Wakes every [`wait_until`] to re-check its condition.
pub fn changed() {
    CHANGED.notify(usize::MAX);
}

/// Runs `fut` on this thread to its end; panics if it takes over `limit`.
pub fn block_within<T>(limit: Duration, fut: impl Future<Output = T>) -> T {
    smol::block_on(within("the test", limit, fut))
}

/// Awaits `fut`; panics naming `what` if it takes over `limit`.
pub async fn within<T>(what: &str, limit: Duration, fut: impl Future<Output = T>) -> T {
    future::or(fut, async {
        async_io::Timer::after(limit).await;
        panic!("{what} did not finish within {limit:?}");
    })
    .await
}

/// Re-checks `check` whenever something [`changed`] (and every 20 ms)
/// until it gives `Some`; panics naming `what` after `limit`.
pub async fn wait_until<T>(what: &str, limit: Duration, check: impl FnMut() -> Option<T>) -> T {
    first_some(limit, check)
        .await
        .unwrap_or_else(|| panic!("timed out after {limit:?} waiting for {what}"))
}

/// [`wait_until`] for a thread outside any executor.
pub fn wait_until_blocking<T>(what: &str, limit: Duration, check: impl FnMut() -> Option<T>) -> T {
    poll_until(limit, check)
        .unwrap_or_else(|| panic!("timed out after {limit:?} waiting for {what}"))
}

/// Like [`wait_until_blocking`], but `None` after `limit`, for a caller
/// that names the failure with more than a phrase.
pub fn poll_until<T>(limit: Duration, check: impl FnMut() -> Option<T>) -> Option<T> {
    smol::block_on(first_some(limit, check))
}

async fn first_some<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        let listener = CHANGED.listen();
        if let Some(value) = check() {
            return Some(value);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        future::or(listener, async {
            async_io::Timer::at(deadline.min(now + POLL)).await;
        })
        .await;
    }
}

/// The simulator's first event matching `pred` — one that already happened
/// or the next — waiting at most `limit`; panics naming `what`.
pub fn sim_saw(
    sim: &smolcord_sim::Simulator,
    what: &str,
    limit: Duration,
    pred: impl FnMut(&smolcord_sim::SimEvent) -> bool,
) -> smolcord_sim::SimEvent {
    smol::block_on(sim.wait_for(limit, pred))
        .unwrap_or_else(|| panic!("the simulator never saw {what} within {limit:?}"))
}

/// The next simulator event on `rx` matching `pred`; panics naming `what`
/// after [`SOON`]. Subscribe before acting to catch only what follows.
pub async fn next_sim_event(
    rx: &smol::channel::Receiver<smolcord_sim::SimEvent>,
    what: &str,
    pred: impl FnMut(&smolcord_sim::SimEvent) -> bool,
) -> smolcord_sim::SimEvent {
    smolcord_sim::next_matching(rx, SOON, pred)
        .await
        .unwrap_or_else(|| panic!("timed out waiting for the simulator to see {what}"))
}
