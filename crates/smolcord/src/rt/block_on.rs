//! `block_on`: runs a future on this thread, which also drives the reactor
//! (I/O and timers) while the future waits.

use super::reactor::{self, Events, Reactor};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// The waker of the future `block_on` runs.
struct Unpark {
    /// Set by a wake; `block_on` polls again instead of sleeping.
    woken: AtomicBool,
    reactor: Arc<Reactor>,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // From this thread (a timer or socket it serves, a task it ran) the
        // flag is enough: it looks at it before it sleeps. From another
        // thread it may be asleep in epoll_wait: the eventfd wakes it. The
        // swap makes a burst of wakes one write.
        if !self.woken.swap(true, Ordering::SeqCst) && !self.reactor.on_driver_thread() {
            self.reactor.notify();
        }
    }
}

/// Runs `future` to completion on this thread. While it waits, the thread
/// sleeps in the reactor until one of its sockets or timers is ready or a
/// waker from another thread calls; between polls of a busy future it
/// still looks at I/O and timers without sleeping, so they are never
/// starved.
///
/// Panics if the reactor cannot be created (no epoll, eventfd or timerfd:
/// the process is out of file descriptors at start-up) or fails.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let (reactor, _driving) = reactor::enter().expect("cannot create the event loop (epoll)");
    let unpark = Arc::new(Unpark {
        woken: AtomicBool::new(false),
        reactor: reactor.clone(),
    });
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    let mut events = Events::new();
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        if unpark.woken.swap(false, Ordering::SeqCst) {
            // Busy: look at I/O and timers without sleeping, then poll.
            turn(&reactor, false, &mut events);
        } else {
            // Sleep until something wakes the future (an event for another
            // registration, or none at all, is not a reason to poll).
            while !unpark.woken.swap(false, Ordering::SeqCst) {
                turn(&reactor, true, &mut events);
            }
        }
    }
}

fn turn(reactor: &Reactor, block: bool, events: &mut Events) {
    if let Err(err) = reactor.turn(block, events) {
        panic!("the event loop failed: {err}");
    }
}
