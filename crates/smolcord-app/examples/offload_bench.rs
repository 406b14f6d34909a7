//! What offload costs on this machine: atomic fsync'd JSON writes per second
//! on this disk, and the overhead of `run_command`, with a probe showing how
//! long the event loop itself was held up meanwhile.
//!
//! ```text
//! cargo run --release --example offload_bench [-- DIR]
//! ```
//!
//! DIR (default: a temp dir under the current directory) should be on the
//! disk the bot's state lives on: /tmp is often tmpfs, where fsync is free.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use async_io::Timer;
use serde::Serialize;
use smol::LocalExecutor;
use smolcord::offload::{self, CommandSpec};

#[path = "common/bench.rs"]
mod bench;

const ROUNDS: usize = 5;
const WRITES_PER_ROUND: usize = 100;
const COMMANDS_PER_ROUND: usize = 40;
/// The probe's tick: lateness beyond this much slack means the loop was busy.
const PROBE_TICK: Duration = Duration::from_millis(1);

/// About the size of a session/state file.
#[derive(Serialize)]
struct State<'a> {
    session_id: &'a str,
    resume_gateway_url: &'a str,
    seq: u64,
    allowed_users: Vec<u64>,
}

fn main() {
    let dir_arg = std::env::args_os().nth(1).map(PathBuf::from);
    // A guard that removes the temp dir at the end, unless DIR was given.
    let temp = match &dir_arg {
        Some(_) => None,
        None => {
            Some(tempfile::tempdir_in(".").unwrap_or_else(|e| fail("create a temp dir here", e)))
        }
    };
    let dir = dir_arg.unwrap_or_else(|| {
        temp.as_ref()
            .map(|t| t.path().to_path_buf())
            .unwrap_or_default()
    });
    println!(
        "offload_bench: {ROUNDS} rounds each; files in {}",
        dir.display()
    );

    let ex = LocalExecutor::new();
    smolcord::rt::block_on(ex.run(async {
        bench_writes(&ex, &dir, false).await;
        bench_writes(&ex, &dir, true).await;
        bench_commands(&ex).await;

        heartbeat_under_load(&ex, &dir).await;
    }));
    drop(temp);
}

async fn bench_writes(ex: &LocalExecutor<'_>, dir: &Path, with_backup: bool) {
    let path = dir.join("bench-state.json");
    let users: Vec<u64> = (0..20).map(|i| 100_000_000_000_000_000 + i).collect();
    let mut rates = Vec::new();
    let mut loop_max = Duration::ZERO;
    for _ in 0..ROUNDS {
        let (elapsed, late) = probed(ex, async {
            let started = Instant::now();
            for seq in 0..WRITES_PER_ROUND as u64 {
                let state = State {
                    session_id: "0123456789abcdef0123456789abcdef",
                    resume_gateway_url: "wss://gateway-us-east1-b.discord.gg",
                    seq,
                    allowed_users: users.clone(),
                };
                let written = if with_backup {
                    offload::write_json_atomic_with_backup(&path, &state).await
                } else {
                    offload::write_json_atomic(&path, &state).await
                };
                written.unwrap_or_else(|e| fail("write", e));
            }
            started.elapsed()
        })
        .await;
        rates.push(WRITES_PER_ROUND as f64 / elapsed.as_secs_f64());
        loop_max = loop_max.max(late);
    }
    rates.sort_by(f64::total_cmp);
    let what = if with_backup {
        "atomic JSON writes + .bak (fsync)"
    } else {
        "atomic JSON writes (fsync)      "
    };
    println!(
        "{what}: median {:>6.0}/s  (min {:.0}, max {:.0}; {} writes/round)  loop held up at most {:?}",
        rates[ROUNDS / 2],
        rates[0],
        rates[ROUNDS - 1],
        WRITES_PER_ROUND,
        loop_max,
    );
}

async fn bench_commands(ex: &LocalExecutor<'_>) {
    let mut per_call = Vec::new();
    let mut loop_max = Duration::ZERO;
    for _ in 0..ROUNDS {
        let (times, late) = probed(ex, async {
            let mut times = Vec::new();
            for _ in 0..COMMANDS_PER_ROUND {
                let started = Instant::now();
                let spec = CommandSpec::new(vec!["true".into()], Duration::from_secs(10));
                let out = offload::run_command(spec)
                    .await
                    .unwrap_or_else(|e| fail("run `true`", e));
                if !out.success() {
                    fail("run `true`", format!("{out:?}"));
                }
                times.push(started.elapsed());
            }
            times
        })
        .await;
        per_call.extend(times);
        loop_max = loop_max.max(late);
    }
    per_call.sort();
    let at = |q: f64| per_call[((per_call.len() - 1) as f64 * q) as usize];
    println!(
        "run_command(`true`) wall time : median {:?}, p90 {:?}, max {:?} ({} calls)  loop held up at most {:?}",
        at(0.5),
        at(0.9),
        at(1.0),
        per_call.len(),
        loop_max,
    );
}

/// Runs `work` while a probe task on the same executor ticks every
/// [`PROBE_TICK`]; returns the work's output and the probe's worst lateness
/// (how long the loop could not run it).
async fn probed<T>(
    ex: &LocalExecutor<'_>,
    work: impl std::future::Future<Output = T>,
) -> (T, Duration) {
    let stop = Rc::new(Cell::new(false));
    let probe = ex.spawn({
        let stop = stop.clone();
        async move {
            let mut worst = Duration::ZERO;
            while !stop.get() {
                let due = Instant::now() + PROBE_TICK;
                Timer::at(due).await;
                worst = worst.max(Instant::now().saturating_duration_since(due));
            }
            worst
        }
    });
    let out = work.await;
    stop.set(true);
    (out, probe.await)
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("offload_bench: cannot {what}: {e}");
    std::process::exit(1)
}

/// Heartbeat lateness (100 ms interval, real shard against the simulator)
/// idle, then while 8 subprocesses of 2 s and 100 fsync'd writes/s run
/// through offload — measured side by side in one run.
async fn heartbeat_under_load(ex: &LocalExecutor<'_>, dir: &Path) {
    const PHASE: Duration = Duration::from_secs(6);
    let sim = bench::start_sim(Duration::from_millis(100));
    let handle = bench::spawn_shard(ex, &sim, false);
    bench::ready(&handle).await;
    println!(
        "\nheartbeat (100 ms interval) lateness, {} s per phase:",
        PHASE.as_secs()
    );
    let (idle, _) = bench::beats_during(&handle, PHASE).await;
    bench::print_lateness("  idle", &idle);

    let load_end = Instant::now() + PHASE;
    let commands = ex.spawn(async move {
        let mut done = 0;
        while Instant::now() < load_end {
            let batch = (0..8).map(|_| {
                let spec =
                    CommandSpec::new(vec!["sleep".into(), "2".into()], Duration::from_secs(10));
                async move {
                    offload::run_command(spec)
                        .await
                        .is_ok_and(|out| out.success())
                }
            });
            done += join_all(batch.collect()).await;
        }
        done
    });
    let path = dir.join("heartbeat-load.json");
    let writes = ex.spawn(async move {
        let mut written = 0u64;
        let mut next = Instant::now();
        while Instant::now() < load_end {
            let state = State {
                session_id: "abc",
                resume_gateway_url: "wss://x",
                seq: written,
                allowed_users: vec![1, 2, 3],
            };
            offload::write_json_atomic(&path, &state)
                .await
                .expect("write");
            written += 1;
            next += Duration::from_millis(10);
            Timer::at(next).await;
        }
        written
    });
    let (busy, _) = bench::beats_during(&handle, PHASE).await;
    let (subprocesses, written) = (commands.await, writes.await);
    bench::print_lateness(
        &format!("  8 × sleep 2 + 100 fsync writes/s ({subprocesses} runs, {written} writes)"),
        &busy,
    );
    let stats = sim.stats();
    println!(
        "  simulator: worst gap {:.1} ms, {} late beats of {}",
        stats.connections[0].worst_gap_ms,
        stats.connections[0].late,
        stats.connections[0].heartbeats
    );
    handle.shutdown();
}

/// Runs the futures concurrently; counts those that gave `true`.
async fn join_all<F: std::future::Future<Output = bool>>(futures: Vec<F>) -> usize {
    use std::task::Poll;
    let mut slots: Vec<_> = futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut succeeded = 0;
    futures_lite::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in &mut slots {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    Poll::Ready(ok) => {
                        succeeded += usize::from(ok);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    succeeded
}
