//! The before/after proof of issue 5: the same slow work — a 1.5 s
//! subprocess and 50 fsync'd writes — done through `offload` leaves the
//! heartbeat on schedule; done inline on the loop it opens a gap the
//! simulator sees and the stall detector names. Both halves assert, so the
//! test shows it can tell the difference.
#![allow(clippy::disallowed_methods)] // the BEFORE half blocks on purpose

use crate::support;

use smolcord::offload::{self, CommandSpec};
use smolcord::shard::ShardEvent;
use smolcord_sim::{SimConfig, Simulator};
use std::time::Duration;
use support::shard::*;
use support::wait::*;

const INTERVAL_MS: u64 = 200;

fn sim() -> Simulator {
    Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(INTERVAL_MS),
        // Keep the connection open through the BEFORE stall so the gap is
        // measured instead of ending in 4009.
        heartbeat_grace: 20.0,
        command_limit: 100_000,
        ..SimConfig::default()
    })
    .expect("simulator starts")
}

/// Waits for `n` acknowledged beats.
async fn beats(handle: &smolcord::shard::ShardHandle, n: usize) {
    for _ in 0..n {
        wait_shard(handle, SOON, |e| matches!(e, Ok(ShardEvent::Heartbeat(_))))
            .await
            .expect("beat");
    }
}

/// Worst gap between beats the simulator saw after the first `skip` beats.
fn worst_gap_after(sim: &Simulator, skip: usize) -> f64 {
    sim.stats().connections[0]
        .beats
        .iter()
        .skip(skip)
        .map(|beat| beat.gap_ms)
        .fold(0.0, f64::max)
}

#[test]
fn after_offloaded_work_leaves_the_heartbeat_on_schedule() {
    let sim = sim();
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_owned();
    run_local(shard_config(&sim), |handle, ex| async move {
        wait_dispatch(&handle, "READY").await;
        beats(&handle, 2).await;
        let before = sim.stats().connections[0].beats.len();
        let subprocess = ex.spawn(async {
            let spec =
                CommandSpec::new(vec!["sleep".into(), "1.5".into()], Duration::from_secs(10));
            offload::run_command(spec).await.expect("sleep runs")
        });
        let writes = ex.spawn(async move {
            for n in 0..50 {
                let path = dir_path.join(format!("state-{}.json", n % 5));
                offload::write_json_atomic(&path, &serde_json::json!({ "n": n }))
                    .await
                    .expect("atomic write");
            }
        });
        writes.await;
        let output = subprocess.await;
        assert!(output.success() && output.duration >= Duration::from_millis(1400));
        beats(&handle, 2).await;
        let worst = worst_gap_after(&sim, before);
        // Inline, the same work opens a gap of ≥ 1.4 s (the test below);
        // the bound leaves a loaded CI core room (tight figures: offload_bench).
        assert!(
            worst < INTERVAL_MS as f64 * 2.0,
            "AFTER: a {worst:.0} ms gap while work was offloaded"
        );
        let lateness = handle.status().heartbeat.lifetime.lateness;
        let p99 = lateness.quantile(0.99).expect("beats");
        assert!(
            p99 <= Duration::from_millis(150),
            "AFTER: lateness p99 {p99:?}"
        );
    });
}

#[test]
fn before_inline_work_opens_a_gap_and_is_named() {
    let sim = sim();
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_owned();
    run_local(shard_config(&sim), |handle, ex| async move {
        wait_dispatch(&handle, "READY").await;
        beats(&handle, 2).await;
        let before = sim.stats().connections[0].beats.len();
        ex.spawn(smolcord::loopwatch::watch(
            "inline-blocking-work",
            async move {
                // What the Python bridge did: the subprocess and the fsyncs on the loop.
                std::process::Command::new("sleep")
                    .arg("1.5")
                    .status()
                    .expect("sleep runs");
                for n in 0..50 {
                    let path = dir_path.join(format!("state-{}.json", n % 5));
                    let mut file = std::fs::File::create(&path).expect("create");
                    std::io::Write::write_all(&mut file, b"{}").expect("write");
                    file.sync_all().expect("fsync");
                }
            },
        ))
        .await;
        beats(&handle, 2).await;
        let worst = worst_gap_after(&sim, before);
        assert!(worst >= 1400.0, "BEFORE: worst gap only {worst:.0} ms");
        let stalls = smolcord::loopwatch::stalls();
        let named = stalls
            .get("inline-blocking-work")
            .expect("stall detector names the task");
        assert!(named.worst_ms >= 1400.0, "{named:?}");
        assert!(handle.status().heartbeat.lifetime.lateness.max() >= Duration::from_millis(1000));
    });
}
