//! The reactor: one epoll instance per thread that runs [`super::block_on`],
//! holding that thread's timers and I/O sources.
//!
//! Three kinds of registration share the epoll set:
//!
//! - an eventfd ([`NOTIFY`]): other threads write it to wake the thread
//!   (a waker called from the blocking pool, a timer added from elsewhere);
//! - a timerfd ([`TIMER`]): armed for the earliest timer, so a sleeping
//!   thread wakes exactly once per expiry, with nanosecond precision (an
//!   epoll timeout is whole milliseconds, rounded up);
//! - I/O sources, edge-triggered for reading and writing: a socket wakes the
//!   thread once per arrival, and nothing needs re-arming after an event.
//!
//! Only the driving thread waits on the epoll set, so an idle process has one
//! thread asleep in `epoll_wait` and wakes for its own timers and sockets.
//! Sources and timers may still be used from other threads (their state is
//! behind mutexes); the driver must keep running for them to make progress.

use rustix::event::{epoll, eventfd, EventfdFlags};
use rustix::time::{timerfd_create, timerfd_settime, Itimerspec, Timespec};
use rustix::time::{TimerfdClockId, TimerfdFlags, TimerfdTimerFlags};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// The eventfd's key in the epoll set.
const NOTIFY: u64 = 0;
/// The timerfd's key.
const TIMER: u64 = 1;
/// Events taken per `epoll_wait` (more wait for the next turn).
const EVENTS_PER_TURN: usize = 64;

thread_local! {
    /// This thread's reactor (created by its first `block_on`).
    static REACTOR: RefCell<Option<Arc<Reactor>>> = const { RefCell::new(None) };
    /// How many `block_on` calls run on this thread right now.
    static DRIVING: Cell<usize> = const { Cell::new(0) };
}

/// The reactor this thread drives, if a `block_on` runs on it now (new
/// timers and I/O bind to it; elsewhere they bind to async-io).
pub(crate) fn current() -> Option<Arc<Reactor>> {
    if DRIVING.with(Cell::get) == 0 {
        return None;
    }
    REACTOR.with(|reactor| reactor.borrow().clone())
}

/// Marks this thread as driving its reactor (created on first use) until
/// the guard drops. The reactor lives as long as the thread, so what one
/// `block_on` registered keeps working in the next one on this thread.
pub(crate) fn enter() -> io::Result<(Arc<Reactor>, Driving)> {
    let existing = REACTOR.with(|reactor| reactor.borrow().clone());
    let reactor = match existing {
        Some(reactor) => reactor,
        None => {
            let reactor = Arc::new(Reactor::new()?);
            REACTOR.with(|slot| *slot.borrow_mut() = Some(reactor.clone()));
            reactor
        }
    };
    DRIVING.with(|depth| depth.set(depth.get() + 1));
    Ok((reactor, Driving(())))
}

/// While alive, this thread is inside a `block_on`.
pub(crate) struct Driving(());

impl Drop for Driving {
    fn drop(&mut self) {
        DRIVING.with(|depth| depth.set(depth.get() - 1));
    }
}

/// Timers, sources and the timerfd's state.
struct State {
    timers: BTreeMap<(Instant, u64), Waker>,
    sources: HashMap<u64, Arc<Source>>,
    next_key: u64,
    /// The deadline the timerfd is armed for.
    armed: Option<Instant>,
}

/// One thread's epoll set, timers and sources.
pub(crate) struct Reactor {
    epoll: OwnedFd,
    notify: OwnedFd,
    timerfd: OwnedFd,
    driver: ThreadId,
    state: Mutex<State>,
}

/// The buffer one turn reads events into (owned by `block_on`: epoll
/// events carry a pointer-sized union, so they stay on their thread).
pub(crate) struct Events(Vec<epoll::Event>);

impl Events {
    pub(crate) fn new() -> Events {
        Events(Vec::with_capacity(EVENTS_PER_TURN))
    }
}

/// Poisoning cannot leave these maps inconsistent (no user code runs under
/// the lock), so a poisoned lock is used as is.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl std::fmt::Debug for Reactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reactor")
            .field("driver", &self.driver)
            .finish()
    }
}

impl Reactor {
    fn new() -> io::Result<Reactor> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let notify = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        let timerfd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )?;
        // Level-triggered: readable until drained.
        for (fd, key) in [(&notify, NOTIFY), (&timerfd, TIMER)] {
            epoll::add(
                &epoll,
                fd,
                epoll::EventData::new_u64(key),
                epoll::EventFlags::IN,
            )?;
        }
        Ok(Reactor {
            epoll,
            notify,
            timerfd,
            driver: std::thread::current().id(),
            state: Mutex::new(State {
                timers: BTreeMap::new(),
                sources: HashMap::new(),
                next_key: TIMER + 1,
                armed: None,
            }),
        })
    }

    /// Whether the calling thread is the one that drives this reactor.
    pub(crate) fn on_driver_thread(&self) -> bool {
        std::thread::current().id() == self.driver
    }

    /// Wakes the driving thread if it sleeps (a no-op write otherwise: the
    /// eventfd is drained at the next turn).
    pub(crate) fn notify(&self) {
        let _ = rustix::io::write(&self.notify, &1u64.to_ne_bytes());
    }

    /// Adds a timer; its id for [`Reactor::remove_timer`].
    pub(crate) fn insert_timer(&self, when: Instant, waker: Waker) -> u64 {
        let id = {
            let mut state = lock(&self.state);
            let id = state.next_key;
            state.next_key += 1;
            state.timers.insert((when, id), waker);
            id
        };
        // The driver re-reads the timers before it sleeps; only a timer
        // added from elsewhere may need to wake it to re-arm.
        if !self.on_driver_thread() {
            self.notify();
        }
        id
    }

    /// Removes a timer (it may have fired already).
    pub(crate) fn remove_timer(&self, when: Instant, id: u64) {
        lock(&self.state).timers.remove(&(when, id));
    }

    /// Registers `fd` (edge-triggered, read and write).
    pub(crate) fn add_source(&self, fd: BorrowedFd<'_>) -> io::Result<Arc<Source>> {
        let source = {
            let mut state = lock(&self.state);
            let key = state.next_key;
            state.next_key += 1;
            let source = Arc::new(Source {
                key,
                ready: Mutex::new(Readiness::default()),
            });
            state.sources.insert(key, source.clone());
            source
        };
        let flags = epoll::EventFlags::IN
            | epoll::EventFlags::OUT
            | epoll::EventFlags::RDHUP
            | epoll::EventFlags::ET;
        if let Err(err) = epoll::add(
            &self.epoll,
            fd,
            epoll::EventData::new_u64(source.key),
            flags,
        ) {
            lock(&self.state).sources.remove(&source.key);
            return Err(err.into());
        }
        Ok(source)
    }

    /// Unregisters `fd` (before it is closed).
    pub(crate) fn remove_source(&self, source: &Source, fd: BorrowedFd<'_>) {
        let _ = epoll::delete(&self.epoll, fd);
        lock(&self.state).sources.remove(&source.key);
    }

    /// One turn: waits for I/O, a timer or a notification (or only looks,
    /// if `block` is false), then wakes whatever became ready.
    pub(crate) fn turn(&self, block: bool, events: &mut Events) -> io::Result<()> {
        let events = &mut events.0;
        events.clear();
        let timeout = if block && !self.arm_for_next_timer()? {
            None
        } else {
            Some(Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            })
        };
        match epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(events),
            timeout.as_ref(),
        ) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
        let mut wake = Vec::new();
        {
            let mut state = lock(&self.state);
            for event in events.iter() {
                // Copy out: the struct is packed on x86_64.
                let (key, flags) = (event.data.u64(), event.flags);
                match key {
                    NOTIFY => drain(&self.notify),
                    TIMER => {
                        drain(&self.timerfd);
                        state.armed = None;
                    }
                    key => {
                        if let Some(source) = state.sources.get(&key) {
                            source.on_event(flags, &mut wake);
                        }
                    }
                }
            }
            let now = Instant::now();
            while let Some(entry) = state.timers.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                wake.push(entry.remove());
            }
        }
        for waker in wake {
            waker.wake();
        }
        Ok(())
    }

    /// Arms the timerfd for the earliest timer (a syscall only when that
    /// changed). True when a timer is already due: do not sleep.
    fn arm_for_next_timer(&self) -> io::Result<bool> {
        let mut state = lock(&self.state);
        let next = state.timers.keys().next().map(|(when, _)| *when);
        let now = Instant::now();
        if next.is_some_and(|when| when <= now) {
            return Ok(true);
        }
        if next != state.armed {
            let value = match next {
                // Far deadlines are capped; the driver re-arms when it wakes.
                Some(when) => Timespec::try_from((when - now).min(MAX_ARM))
                    .map_err(|_| io::Error::other("timer deadline out of range"))?,
                None => Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
            };
            let zero = Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            timerfd_settime(
                &self.timerfd,
                TimerfdTimerFlags::empty(),
                &Itimerspec {
                    it_interval: zero,
                    it_value: value,
                },
            )?;
            state.armed = next;
        }
        Ok(false)
    }
}

/// The longest single timerfd arm (a year): a `Timer::after(Duration::MAX)`
/// must not overflow the kernel's time.
const MAX_ARM: Duration = Duration::from_secs(365 * 24 * 3600);

/// Reads an eventfd or timerfd until it is no longer readable.
fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 8];
    while matches!(rustix::io::read(fd, &mut buf), Ok(8)) {}
}

/// What an edge said about one direction.
#[derive(Default)]
struct Direction {
    /// An edge arrived since the waiter last looked.
    ready: bool,
    waker: Option<Waker>,
}

#[derive(Default)]
struct Readiness {
    read: Direction,
    write: Direction,
}

/// One registered file descriptor's readiness.
pub(crate) struct Source {
    key: u64,
    ready: Mutex<Readiness>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source").field("key", &self.key).finish()
    }
}

impl Source {
    fn on_event(&self, flags: epoll::EventFlags, wake: &mut Vec<Waker>) {
        use epoll::EventFlags as F;
        let mut ready = lock(&self.ready);
        let Readiness { read, write } = &mut *ready;
        let (readable, writable) = (
            flags.intersects(F::IN | F::HUP | F::ERR | F::RDHUP | F::PRI),
            flags.intersects(F::OUT | F::HUP | F::ERR),
        );
        for (fired, direction) in [(readable, read), (writable, write)] {
            if fired {
                direction.ready = true;
                wake.extend(direction.waker.take());
            }
        }
    }

    /// Ready if an edge arrived since the last call that returned Ready in
    /// this direction; else remembers the waker. Callers try their
    /// operation first and call this after `WouldBlock`: edge-triggered
    /// events never repeat, so the operation itself is the readiness test.
    pub(crate) fn poll_ready(&self, write: bool, cx: &mut Context<'_>) -> Poll<()> {
        let mut ready = lock(&self.ready);
        let direction = if write {
            &mut ready.write
        } else {
            &mut ready.read
        };
        if std::mem::take(&mut direction.ready) {
            return Poll::Ready(());
        }
        match &direction.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => direction.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}
