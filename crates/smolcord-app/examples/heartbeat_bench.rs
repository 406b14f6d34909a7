//! Heartbeat punctuality while the loop is busy with dispatch traffic.
//!
//! Runs the real shard against the embedded simulator with a 100 ms
//! heartbeat, first idle, then while the simulator floods it with DMs (the
//! shard decodes and hands each one over), and prints beat lateness (sent −
//! scheduled, from the client's account) and the worst gap the simulator saw,
//! side by side in one run.
//!
//! ```text
//! cargo run --release --example heartbeat_bench [-- SECONDS_PER_PHASE]
//! ```

#[path = "common/bench.rs"]
mod bench;

use smol::LocalExecutor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const INTERVAL: Duration = Duration::from_millis(100);
/// DMs injected per second during the busy phase.
const DM_RATE: u64 = 5000;

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    let phase = Duration::from_secs(seconds);
    let sim = bench::start_sim(INTERVAL);
    let ex = LocalExecutor::new();
    smolcord::rt::block_on(ex.run(async {
        let handle = bench::spawn_shard(&ex, &sim, false);
        bench::ready(&handle).await;
        println!("heartbeat every {INTERVAL:?}; {seconds} s per phase\n");

        let (idle, _) = bench::beats_during(&handle, phase).await;
        let idle_gap = worst_gap(&sim);
        bench::print_lateness("idle", &idle);

        // The flood runs on its own thread, as another process would.
        let flooding = Arc::new(AtomicBool::new(true));
        let injector = {
            let sim = sim.clone();
            let flooding = flooding.clone();
            std::thread::spawn(move || {
                let mut sent = 0u64;
                let start = std::time::Instant::now();
                while flooding.load(Ordering::Relaxed) {
                    let due = (start.elapsed().as_secs_f64() * DM_RATE as f64) as u64;
                    while sent < due {
                        sim.send_dm(42, "flood", "a message of ordinary length, like a person would type");
                        sent += 1;
                    }
                    std::thread::yield_now();
                }
                sent
            })
        };
        let (busy, dispatches) = bench::beats_during(&handle, phase).await;
        flooding.store(false, Ordering::Relaxed);
        let injected = injector.join().unwrap_or(0);
        bench::print_lateness(&format!("busy ({:.0} dispatches/s decoded)", dispatches as f64 / seconds as f64), &busy);

        let stats = sim.stats();
        let conn = &stats.connections[0];
        println!(
            "\nsimulator: {} beats, worst gap idle {:.1} ms / overall {:.1} ms ({:.2} × interval), {} late (> 1.05 × interval), {} DMs injected",
            conn.heartbeats,
            idle_gap,
            conn.worst_gap_ms,
            conn.worst_gap_ms / INTERVAL.as_secs_f64() / 1000.0,
            conn.late,
            injected
        );
        let account = handle.status().heartbeat.lifetime;
        println!(
            "client account: {} beats, {} zombies, rtt avg {:.2} ms",
            account.beats_sent,
            account.zombies,
            account.rtt_avg_ms.unwrap_or(0.0)
        );
    }));
}

fn worst_gap(sim: &smolcord_sim::Simulator) -> f64 {
    sim.stats().connections[0].worst_gap_ms
}
