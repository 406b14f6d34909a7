//! offload: the only place that may block.
//!
//! Everything that would stall the event loop — fsync'd writes, subprocesses,
//! blocking library calls — goes through this module, which moves it to the
//! `blocking` thread pool or to `async-process`.

use std::future::Future;

/// Runs a blocking closure on the `blocking` thread pool and awaits its result.
///
/// This is the one sanctioned door for blocking library calls (for example
/// the REST client's synchronous HTTP stack).
pub fn unblock<T, F>(f: F) -> impl Future<Output = T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    blocking::unblock(f)
}
