//! rt: smolcord's single-threaded runtime — one thread that both runs the
//! tasks and waits on the sockets and timers.
//!
//! smol's own stack splits that in two: async-io keeps its reactor on an
//! "async-io" thread, and an executor parked elsewhere is woken by it, so
//! every timer expiry and every readable socket costs two threads a
//! wake-up each (and `async_io::block_on` adds a reactor thread that backs
//! off in short sleeps after each event). An idle bot wakes for little but
//! its heartbeat: the beat's timer and the ACK's socket. Here [`block_on`]
//! polls the future and, when it waits, sleeps in `epoll_wait` on this
//! thread's own epoll set, armed for the earliest [`Timer`]: one wake-up
//! per expiry or per arrival, which is the floor (two per heartbeat).
//! Wakers called from other threads (the blocking pool, async-io's thread)
//! write an eventfd in the same set.
//!
//! Built from the parts of smol-rs's stack smolcord already links: tasks
//! stay on `async_executor::LocalExecutor` (run inside [`block_on`]), the
//! epoll, eventfd and timerfd calls are rustix's (as in `polling`, without
//! its `unsafe` registration API: this module has no `unsafe`).
//!
//! Subprocesses (`offload::run_command`) wait here too: their pipes and
//! pidfd are [`Async`] sources, their timeouts [`Timer`]s. What is not on
//! the idle path stays on async-io (the signal pipe): while idle its
//! thread blocks in `epoll_wait` without a timeout.
//! And every type here binds to a reactor when first used: inside
//! [`block_on`] to this one, elsewhere to async-io's — so the library's
//! types keep working on any smol executor (`smol::block_on`, tests).
//!
//! Linux only (epoll, timerfd); elsewhere [`block_on`] is futures-lite's
//! and every type binds to async-io.
//!
//! ```
//! use smolcord::rt::{self, Timer};
//! use std::time::Duration;
//!
//! let ex = smol::LocalExecutor::new();
//! let answer = rt::block_on(ex.run(async {
//!     let task = ex.spawn(async {
//!         Timer::after(Duration::from_millis(5)).await;
//!         42
//!     });
//!     task.await
//! }));
//! assert_eq!(answer, 42);
//! ```

#[cfg(any(target_os = "linux", target_os = "android"))]
mod block_on;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod io;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod reactor;
mod slice;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod tcp;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod timer;

#[cfg(any(target_os = "linux", target_os = "android"))]
pub use {block_on::block_on, io::Async, tcp::TcpStream, timer::Timer};

pub use slice::Slice;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub use {async_io::Async, async_io::Timer, futures_lite::future::block_on};

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests;
