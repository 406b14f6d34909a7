//! [`Timer`]: the subset of `async_io::Timer` smolcord uses (`after`, `at`,
//! `set_at`, await once), kept by the reactor of the thread that polls it.
//!
//! A timer binds to a reactor when first polled: inside [`super::block_on`]
//! it joins that thread's timerfd; polled anywhere else (a test on
//! `smol::block_on`, the blocking pool) it is an `async_io::Timer`. So code
//! written against it runs on any smol executor, and costs no extra thread
//! or wake-up on ours.

use super::reactor::{self, Reactor};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Fires once at an instant; `set_at` re-arms it.
///
/// ```
/// use smolcord::rt::{self, Timer};
/// use std::time::{Duration, Instant};
///
/// let started = Instant::now();
/// rt::block_on(Timer::after(Duration::from_millis(10)));
/// assert!(started.elapsed() >= Duration::from_millis(10));
/// ```
#[derive(Debug)]
pub struct Timer {
    /// When it fires; `None` once fired (then it never fires again unless
    /// re-armed, as `async_io::Timer`).
    when: Option<Instant>,
    bound: Bound,
}

/// Where the timer waits.
#[derive(Debug, Default)]
enum Bound {
    /// Not polled yet (or not waiting).
    #[default]
    Unbound,
    /// In this runtime's reactor, with the waker it holds.
    Local {
        reactor: Arc<Reactor>,
        id: u64,
        waker: Waker,
    },
    /// In async-io's reactor (polled outside `rt::block_on`).
    Shared(async_io::Timer),
}

impl Timer {
    /// Fires after `duration` (never, if that overflows an `Instant`).
    pub fn after(duration: Duration) -> Timer {
        Timer {
            when: Instant::now().checked_add(duration),
            bound: Bound::Unbound,
        }
    }

    /// Fires at `instant`.
    pub fn at(instant: Instant) -> Timer {
        Timer {
            when: Some(instant),
            bound: Bound::Unbound,
        }
    }

    /// Re-arms it for `instant` (also after it fired).
    pub fn set_at(&mut self, instant: Instant) {
        match &mut self.bound {
            Bound::Shared(timer) => timer.set_at(instant),
            _ => self.unregister(),
        }
        self.when = Some(instant);
    }

    fn unregister(&mut self) {
        if let Bound::Local { reactor, id, .. } = std::mem::take(&mut self.bound) {
            if let Some(when) = self.when {
                reactor.remove_timer(when, id);
            }
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.unregister();
    }
}

impl Future for Timer {
    type Output = Instant;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Instant> {
        let this = &mut *self;
        if let Bound::Shared(timer) = &mut this.bound {
            let fired = std::task::ready!(Pin::new(timer).poll(cx));
            this.when = None;
            return Poll::Ready(fired);
        }
        let Some(when) = this.when else {
            return Poll::Pending;
        };
        if Instant::now() >= when {
            this.unregister();
            this.when = None;
            return Poll::Ready(when);
        }
        match &mut this.bound {
            Bound::Local { reactor, id, waker } => {
                if !waker.will_wake(cx.waker()) {
                    reactor.remove_timer(when, *id);
                    *waker = cx.waker().clone();
                    *id = reactor.insert_timer(when, waker.clone());
                }
            }
            Bound::Unbound => match reactor::current() {
                Some(reactor) => {
                    let id = reactor.insert_timer(when, cx.waker().clone());
                    this.bound = Bound::Local {
                        reactor,
                        id,
                        waker: cx.waker().clone(),
                    };
                }
                None => {
                    let mut timer = async_io::Timer::at(when);
                    let polled = Pin::new(&mut timer).poll(cx);
                    this.bound = Bound::Shared(timer);
                    if let Poll::Ready(fired) = polled {
                        this.when = None;
                        return Poll::Ready(fired);
                    }
                }
            },
            // Polled above.
            Bound::Shared(_) => {}
        }
        Poll::Pending
    }
}
