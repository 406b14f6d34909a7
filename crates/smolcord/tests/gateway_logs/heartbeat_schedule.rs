//! The heartbeat against the simulator: on schedule by both sides' clocks,
//! zombies found within two intervals, no false zombie after a local stall,
//! and a blocking task named as the culprit.
#![allow(clippy::disallowed_methods)] // tests block the loop on purpose

use crate::support;

use smolcord::heartbeat::BeatRecord;
use smolcord::shard::{ShardEvent, ShardHandle};
use smolcord_sim::{Fault, SimConfig, SimEvent, Simulator};
use std::time::{Duration, Instant};
use support::logs::captured;
use support::shard::*;
use support::wait::*;

fn sim_with(interval_ms: u64, grace: f64) -> Simulator {
    Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(interval_ms),
        heartbeat_grace: grace,
        command_limit: 100_000,
        ..SimConfig::default()
    })
    .expect("simulator starts")
}

async fn next_beat(handle: &ShardHandle) -> BeatRecord {
    match wait_shard(handle, SOON, |e| matches!(e, Ok(ShardEvent::Heartbeat(_)))).await {
        Ok(ShardEvent::Heartbeat(record)) => record,
        other => panic!("{other:?}"),
    }
}

/// Waits until the driver has sent one more beat than `before`.
async fn beat_sent_after(handle: &ShardHandle, before: u64) {
    let deadline = Instant::now() + SOON;
    while handle.status().heartbeat.lifetime.beats_sent <= before {
        assert!(Instant::now() < deadline, "no beat sent");
        async_io::Timer::after(Duration::from_millis(1)).await;
    }
}

#[test]
fn beats_land_on_schedule_and_both_clocks_agree() {
    let interval = 200;
    let sim = sim_with(interval, 1.5);
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        let mut client = Vec::new();
        for _ in 0..8 {
            client.push(next_beat(&handle).await);
        }
        let stats = sim.stats();
        let conn = &stats.connections[0];
        assert!(conn.beats.len() >= 8, "{}", conn.beats.len());
        // The first client gap is None (no previous beat); the simulator's
        // first gap is measured from Hello. Compare the rest pairwise: they
        // agree within a few ms at the median; one delayed arrival (a busy
        // CI core) shifts two neighbouring gaps, so single pairs get slack.
        let mut differences: Vec<f64> = client
            .iter()
            .zip(&conn.beats)
            .skip(1)
            .map(|(ours, theirs)| {
                let ours_ms = ours.gap.expect("gap").as_secs_f64() * 1000.0;
                (ours_ms - theirs.gap_ms).abs()
            })
            .collect();
        differences.sort_by(f64::total_cmp);
        let median = differences[differences.len() / 2];
        assert!(
            median < 5.0,
            "client and simulator gaps differ by {differences:?} ms"
        );
        assert!(differences.iter().all(|d| *d < 100.0), "{differences:?}");
        // A skipped beat would show as a gap of two intervals; below that,
        // a loaded CI core may delay one arrival (tight figures: the bench).
        assert!(
            conn.worst_gap_ms < interval as f64 * 1.9,
            "worst gap {} ms",
            conn.worst_gap_ms
        );
        let account = handle.status().heartbeat;
        assert_eq!(account.lifetime.zombies, 0);
        assert!(account.lifetime.rtt_avg_ms.expect("rtt") < 100.0);
        // As for the simulator's view above: below two intervals (a skipped
        // beat); a loaded core may delay one beat by tens of ms (1.27 × was
        // seen with other test binaries building beside this one).
        assert!(
            account.lifetime.worst_gap_ratio < 1.9,
            "{}",
            account.lifetime.worst_gap_ratio
        );
    });
}

#[test]
fn a_zombie_is_detected_within_two_intervals_and_resumed() {
    let interval = 300;
    let sim = sim_with(interval, 10.0);
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        next_beat(&handle).await;
        let start = Instant::now();
        sim.fault(Fault::DropAcks(1));
        let SimEvent::ClientClosed { code, .. } =
            next_sim_event(&rx, "the client closing the zombie", |e| {
                matches!(e, SimEvent::ClientClosed { .. })
            })
            .await
        else {
            unreachable!()
        };
        let detected = start.elapsed();
        assert_eq!(code, Some(4000), "a zombie is closed with a resumable code");
        assert!(
            detected <= Duration::from_millis(2 * interval + 250),
            "zombie detected after {detected:?}"
        );
        wait_dispatch(&handle, "RESUMED").await;
        let status = handle.status();
        assert_eq!(status.heartbeat.lifetime.zombies, 1);
        assert_eq!(status.sessions_started, 1);
        // The new connection starts with clean ACK state: no second zombie.
        next_beat(&handle).await;
        next_beat(&handle).await;
        assert_eq!(handle.status().heartbeat.lifetime.zombies, 1);
    });
}

#[test]
fn a_local_stall_is_not_mistaken_for_a_zombie() {
    let interval = 300;
    let sim = sim_with(interval, 10.0);
    let rx = sim.subscribe();
    run_local(shard_config(&sim), |handle, ex| async move {
        wait_dispatch(&handle, "READY").await;
        next_beat(&handle).await;
        // ACKs arrive 30 ms after each beat: during the stall below.
        sim.fault(Fault::Delay(Duration::from_millis(30)));
        let before = handle.status().heartbeat.lifetime.beats_sent;
        beat_sent_after(&handle, before).await;
        // Block the loop for more than an interval right after a beat went
        // out: the ACK lands in the socket while nobody reads it.
        ex.spawn(smolcord::loopwatch::watch("stall-test-blocker", async {
            std::thread::sleep(Duration::from_millis(450));
        }))
        .await;
        // Two more beats after the stall, on the same connection.
        next_beat(&handle).await;
        next_beat(&handle).await;
        let status = handle.status();
        assert_eq!(
            status.heartbeat.lifetime.zombies, 0,
            "a local stall became a zombie"
        );
        assert!(
            status.heartbeat.lifetime.lateness.max() >= Duration::from_millis(100),
            "the stall did not delay a beat: {:?}",
            status.heartbeat.lifetime.lateness.max()
        );
        assert!(sim
            .events()
            .iter()
            .all(|e| !matches!(e, SimEvent::ClientClosed { .. })));
        assert_eq!(sim.stats().totals.connections, 1);
        drop(rx);
    });
}

#[test]
fn a_blocking_task_makes_beats_late_and_is_named() {
    let interval = 300;
    let sim = sim_with(interval, 10.0);
    let mut config = shard_config(&sim);
    config.heartbeat_warn = Duration::from_millis(100);
    run_local(config, |handle, ex| async move {
        wait_dispatch(&handle, "READY").await;
        next_beat(&handle).await;
        let before = handle.status().heartbeat.lifetime.beats_sent;
        beat_sent_after(&handle, before).await;
        ex.spawn(smolcord::loopwatch::watch("named-blocker", async {
            std::thread::sleep(Duration::from_millis(500));
        }))
        .await;
        // The first ACK after the stall may be for the beat sent before it.
        let lateness = next_beat(&handle)
            .await
            .lateness
            .max(next_beat(&handle).await.lateness);
        assert!(lateness >= Duration::from_millis(150), "{lateness:?}");
        let stalls = smolcord::loopwatch::stalls();
        assert!(stalls["named-blocker"].worst_ms >= 450.0, "{stalls:?}");
        let logs = captured();
        assert!(
            logs.iter().any(|line| line.contains("heartbeat sent")
                && line.contains("late")
                && line.contains("task \"named-blocker\" blocked the event loop")),
            "no warning naming the culprit in {logs:#?}"
        );
        assert_eq!(handle.status().heartbeat.lifetime.late_warnings, 1);
        // The simulator saw the same gap from outside.
        let worst = sim.stats().connections[0].worst_gap_ms;
        assert!(worst >= 450.0, "simulator's worst gap {worst} ms");
    });
}

#[test]
fn a_peer_that_stopped_reading_is_left_within_the_close_bound() {
    let interval = 300;
    let sim = sim_with(interval, 100.0);
    let rx = sim.subscribe();
    let mut config = shard_config(&sim);
    config.close_timeout = Duration::from_millis(500);
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        next_beat(&handle).await;
        let start = Instant::now();
        // The peer stops reading: no ACKs, and no answer to our close frame.
        sim.fault(Fault::Stall(Duration::from_secs(30)));
        next_sim_event(
            &rx,
            "a second connection",
            |e| matches!(e, SimEvent::Connected { conn, .. } if *conn > 1),
        )
        .await;
        let took = start.elapsed();
        // Zombie verdict within two intervals, then at most the close bound
        // and a short backoff: far less than the 30 s stall.
        assert!(
            took < Duration::from_secs(3),
            "reconnected only after {took:?}"
        );
        wait_dispatch(&handle, "RESUMED").await;
    });
}

#[test]
fn status_counts_each_ack_when_it_arrives() {
    let sim = sim_with(150, 1.5);
    run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        for _ in 0..3 {
            next_beat(&handle).await;
            let heartbeat = handle.status().heartbeat;
            // Copied when the ACK arrives, not when the next beat is sent.
            assert_eq!(heartbeat.session.acks, heartbeat.session.beats_sent);
        }
    });
}
