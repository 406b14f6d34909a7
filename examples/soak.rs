//! Soak: random gateway faults while DMs flow, then count what arrived.
//!
//! The simulator injects numbered DMs at a steady rate and, every so often,
//! a random fault the shard must survive by resuming (op 7, TCP drop, close
//! 4000, op 9 `true`, dropped ACKs = zombie, stalls, delays, malformed
//! frames, server heartbeat requests). At the end it prints how many DMs
//! were delivered, lost and duplicated. Expected: all / 0 / 0.
//!
//! ```text
//! cargo run --release --example soak [-- FAULTS]
//! ```

#[path = "common/bench.rs"]
mod bench;

use smol::LocalExecutor;
use smolcord::protocol::Message;
use smolcord::shard::ShardEvent;
use smolcord::sim::Fault;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn random_fault() -> Fault {
    match fastrand::u8(0..9) {
        0 => Fault::Reconnect,
        1 => Fault::DropTcp,
        2 => Fault::Close(4000),
        3 => Fault::InvalidSession(true),
        4 => Fault::DropAcks(2),
        5 => Fault::Stall(Duration::from_millis(fastrand::u64(50..300))),
        6 => Fault::Malformed,
        7 => Fault::RequestHeartbeat,
        _ => Fault::Delay(Duration::from_millis(fastrand::u64(0..40))),
    }
}

fn main() {
    let faults: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let sim = bench::start_sim(Duration::from_millis(300));
    let ex = LocalExecutor::new();
    smol::block_on(ex.run(async {
        let handle = bench::spawn_shard(&ex, &sim, fastrand::bool());
        bench::ready(&handle).await;
        let running = Arc::new(AtomicBool::new(true));
        let chaos = {
            let (sim, running) = (sim.clone(), running.clone());
            // The chaos runs on its own thread (it plays Discord), so it may sleep.
            #[allow(clippy::disallowed_methods)]
            std::thread::spawn(move || {
                let mut sent = 0u64;
                let mut applied = BTreeMap::<String, usize>::new();
                for n in 0..faults {
                    for _ in 0..20 {
                        sim.send_dm(42, "soak", &sent.to_string());
                        sent += 1;
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let fault = random_fault();
                    let name = format!("{fault:?}");
                    let name = name.split('(').next().unwrap_or("?").to_owned();
                    *applied.entry(name).or_default() += 1;
                    sim.fault(fault);
                    if n % 5 == 4 {
                        sim.fault(Fault::Delay(Duration::ZERO));
                    }
                }
                sim.fault(Fault::Delay(Duration::ZERO));
                running.store(false, Ordering::Relaxed);
                (sent, applied)
            })
        };
        let mut received: BTreeMap<u64, u32> = BTreeMap::new();
        let mut quiet_since: Option<Instant> = None;
        loop {
            let next = futures_lite::future::or(async { Some(handle.next_event().await) }, async {
                async_io::Timer::after(Duration::from_millis(200)).await;
                None
            })
            .await;
            match next {
                Some(Ok(ShardEvent::Dispatch(d))) if d.name == "MESSAGE_CREATE" => {
                    if let Ok(message) = d.data::<Message>() {
                        if let Ok(n) = message.content.parse::<u64>() {
                            *received.entry(n).or_default() += 1;
                        }
                    }
                    quiet_since = None;
                }
                Some(Err(err)) => panic!("shard stopped: {err}"),
                Some(_) => {}
                None if !running.load(Ordering::Relaxed) => {
                    // Done injecting: wait for 5 s of quiet, then count.
                    let since = *quiet_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_secs(5) {
                        break;
                    }
                }
                None => {}
            }
        }
        let (sent, applied) = chaos.join().expect("chaos thread");
        let delivered = (0..sent).filter(|n| received.contains_key(n)).count();
        let duplicated: u32 = received.values().map(|count| count - 1).sum();
        let status = handle.status();
        println!("faults applied: {applied:?}");
        println!(
            "gateway: {} session(s) started, {} resumes, {} zombies detected, {} replayed duplicates dropped",
            status.sessions_started, status.resumes, status.heartbeat.lifetime.zombies, status.duplicates_dropped
        );
        println!(
            "dispatches delivered / lost / duplicated: {delivered} / {} / {duplicated}  (of {sent} sent)",
            sent as usize - delivered
        );
        if delivered as u64 != sent || duplicated != 0 {
            std::process::exit(1);
        }
    }));
}
