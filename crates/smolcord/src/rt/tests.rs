//! The runtime's own tests: timers in order and on time, cross-thread
//! wakes, socket readiness, many tasks, no starvation, the async-io
//! fallback, and what an idle wait costs the thread.
// Tests may block their own threads (peers, sleeps in helper threads).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use super::{block_on, Timer};
use futures_lite::future;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use smol::LocalExecutor;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Generous: CI shares two noisy cores.
const LATE: Duration = Duration::from_millis(500);

#[test]
fn timers_fire_in_deadline_order_and_not_early() {
    let ex = LocalExecutor::new();
    let fired = Rc::new(RefCell::new(Vec::new()));
    let started = Instant::now();
    block_on(ex.run(async {
        let tasks: Vec<_> = [50u64, 10, 40, 20, 30, 0]
            .into_iter()
            .map(|ms| {
                let fired = fired.clone();
                ex.spawn(async move {
                    let due = started + Duration::from_millis(ms);
                    let at = Timer::at(due).await;
                    assert_eq!(at, due, "a timer reports its own deadline");
                    fired.borrow_mut().push((ms, Instant::now()));
                })
            })
            .collect();
        for task in tasks {
            task.await;
        }
    }));
    let fired = fired.borrow();
    let order: Vec<u64> = fired.iter().map(|(ms, _)| *ms).collect();
    assert_eq!(order, [0, 10, 20, 30, 40, 50]);
    for (ms, at) in fired.iter() {
        let due = started + Duration::from_millis(*ms);
        assert!(*at >= due, "{ms} ms timer fired early");
        assert!(*at < due + LATE, "{ms} ms timer fired {:?} late", *at - due);
    }
}

#[test]
fn a_timer_is_rearmed_by_set_at_and_fires_once() {
    block_on(async {
        let mut timer = Timer::after(Duration::from_millis(5));
        (&mut timer).await;
        // Fired: it stays quiet until re-armed (as async_io::Timer).
        assert!(future::poll_once(&mut timer).await.is_none());
        let due = Instant::now() + Duration::from_millis(20);
        timer.set_at(due);
        assert!(future::poll_once(&mut timer).await.is_none(), "early");
        assert_eq!((&mut timer).await, due);
        // Moved before it fires: only the new deadline counts.
        timer.set_at(Instant::now() + Duration::from_secs(3600));
        let soon = Instant::now() + Duration::from_millis(10);
        timer.set_at(soon);
        let started = Instant::now();
        assert_eq!((&mut timer).await, soon);
        assert!(started.elapsed() < LATE);
    });
}

#[test]
fn a_dropped_timer_never_wakes_anyone() {
    block_on(async {
        let mut early = Timer::after(Duration::from_millis(10));
        assert!(future::poll_once(&mut early).await.is_none());
        drop(early);
        // The later timer alone decides when this returns.
        let started = Instant::now();
        Timer::after(Duration::from_millis(40)).await;
        assert!(started.elapsed() >= Duration::from_millis(40));
    });
}

#[test]
fn another_thread_wakes_the_sleeping_loop() {
    let (tx, rx) = smol::channel::bounded::<u32>(1);
    let sender = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        tx.send_blocking(7).unwrap();
    });
    let started = Instant::now();
    let got = block_on(async {
        future::or(async { rx.recv().await.ok() }, async {
            Timer::after(Duration::from_secs(10)).await;
            None
        })
        .await
    });
    assert_eq!(got, Some(7));
    assert!(started.elapsed() < Duration::from_secs(5));
    sender.join().unwrap();
    // And the blocking pool's completions come back the same way.
    assert_eq!(block_on(blocking::unblock(|| 6 * 7)), 42);
}

#[test]
fn a_busy_task_does_not_starve_timers_or_sockets() {
    let ex = LocalExecutor::new();
    block_on(ex.run(async {
        let spinner = ex.spawn(async {
            loop {
                future::yield_now().await;
            }
        });
        let started = Instant::now();
        Timer::after(Duration::from_millis(20)).await;
        assert!(started.elapsed() < Duration::from_millis(20) + LATE);
        spinner.cancel().await;
    }));
}

#[test]
fn many_tasks_with_timers_all_finish() {
    let ex = LocalExecutor::new();
    let done = Rc::new(RefCell::new(0));
    block_on(ex.run(async {
        let tasks: Vec<_> = (0..2000u64)
            .map(|i| {
                let done = done.clone();
                ex.spawn(async move {
                    Timer::after(Duration::from_micros(i * 13 % 20_000)).await;
                    future::yield_now().await;
                    *done.borrow_mut() += 1;
                })
            })
            .collect();
        for task in tasks {
            task.await;
        }
    }));
    assert_eq!(*done.borrow(), 2000);
}

#[test]
fn tcp_reads_and_writes_through_the_reactor() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let peer = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut conn, _) = listener.accept().unwrap();
        // Nothing to read at first: the client must wait for readiness.
        std::thread::sleep(Duration::from_millis(50));
        conn.write_all(b"hello").unwrap();
        let mut buf = [0u8; 5];
        conn.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"world");
        // A big write: the client's reads drain it in pieces.
        conn.write_all(&vec![7u8; 1 << 20]).unwrap();
    });
    block_on(async {
        let mut stream = super::TcpStream::connect("127.0.0.1", port, Duration::from_secs(5))
            .await
            .unwrap();
        let mut buf = [0u8; 5];
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
        stream.write_all(b"world").await.unwrap();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest.len(), 1 << 20);
    });
    peer.join().unwrap();
}

#[test]
fn tcp_connect_fails_clearly() {
    // A port nobody listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = block_on(super::TcpStream::connect(
        "127.0.0.1",
        port,
        Duration::from_secs(5),
    ))
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
}

#[test]
fn outside_block_on_the_types_run_on_async_io() {
    let started = Instant::now();
    smol::block_on(Timer::after(Duration::from_millis(10)));
    assert!(started.elapsed() >= Duration::from_millis(10));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    smol::block_on(async {
        let mut stream = super::TcpStream::connect("127.0.0.1", port, Duration::from_secs(5))
            .await
            .unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        std::io::Write::write_all(&mut conn, b"hi").unwrap();
        let mut buf = [0u8; 2];
        stream.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hi");
    });
}

/// This thread's voluntary context switches (each is one sleep, so one
/// wake-up after it).
fn wakeups() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

#[test]
fn waiting_for_a_timer_or_a_socket_costs_the_thread_one_wake_up() {
    block_on(async {
        // Warm up: the reactor's fds exist, allocations are done.
        Timer::after(Duration::from_millis(1)).await;
        let before = wakeups();
        Timer::after(Duration::from_millis(200)).await;
        let timer = wakeups() - before;
        // One sleep; a little slack for page faults and the like.
        assert!(timer <= 2, "a 200 ms timer cost {timer} wake-ups");
    });
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let peer = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        std::io::Write::write_all(&mut conn, b"x").unwrap();
        std::thread::sleep(Duration::from_millis(100));
    });
    block_on(async {
        let mut stream = super::TcpStream::connect("127.0.0.1", port, Duration::from_secs(5))
            .await
            .unwrap();
        let before = wakeups();
        let mut buf = [0u8; 1];
        stream.read_exact(&mut buf).await.unwrap();
        let socket = wakeups() - before;
        assert!(socket <= 2, "a readable socket cost {socket} wake-ups");
    });
    peer.join().unwrap();
}

#[test]
fn what_one_block_on_registered_works_in_the_next_on_the_same_thread() {
    let mut timer = Timer::after(Duration::from_millis(30));
    // Bound to this thread's reactor by the first poll...
    assert!(block_on(future::poll_once(&mut timer)).is_none());
    // ...and fired by the next block_on's turns.
    let started = Instant::now();
    block_on(&mut timer);
    assert!(started.elapsed() < LATE);
}
