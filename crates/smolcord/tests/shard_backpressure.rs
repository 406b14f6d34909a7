//! Bounded by design: a consumer that stops reading slows the shard's
//! reader instead of growing memory, heartbeats keep their schedule through
//! a flood, a peer that floods us and stops reading is left within the
//! zombie bound, and a message over the size limit is refused.
#![allow(clippy::disallowed_methods)] // reads /proc/self/status

use smolcord_testkit as support;

use smolcord::protocol::Message;
use smolcord::shard::ShardEvent;
use smolcord_sim::{Fault, SimConfig, SimEvent, Simulator, FLOOD_USER_ID};
use std::time::{Duration, Instant};
use support::shard::*;
use support::wait::*;

fn sim_beating(interval_ms: u64) -> Simulator {
    Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(interval_ms),
        command_limit: 100_000,
        // Lenient 4009 clock: this test judges the client's beats itself.
        heartbeat_grace: 100.0,
        ..SimConfig::default()
    })
    .expect("simulator starts")
}

/// Resident memory of this test process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS in /proc/self/status")
        * 1024
}

#[test]
fn a_consumer_that_stops_reading_bounds_memory_not_heartbeats() {
    const FLOOD: u64 = 200_000;
    const INTERVAL_MS: u64 = 500;
    let sim = sim_beating(INTERVAL_MS);
    let config = shard_config(&sim);
    let max_queued = config.queue.max_events;
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        let before = rss();
        sim.fault(Fault::Flood(FLOOD));
        // The consumer does not read for 5 s while the simulator floods.
        async_io::Timer::after(Duration::from_secs(5)).await;
        let grown = rss().saturating_sub(before);
        assert!(
            handle.queued_events() <= max_queued,
            "{} dispatches queued",
            handle.queued_events()
        );
        // Unbounded, the reader ran ahead by tens of MiB here (43 MiB in a debug build).
        assert!(grown < 16 << 20, "RSS grew by {} MiB", grown >> 20);

        // The events arrive afterwards, in order, exactly once. The first
        // DRAINED are read (the queue fills and the reader waits and goes
        // on some 300 times in them): reading all 200 000 took 35 s in a
        // debug build, the CI's longest wait, and proved nothing more. The
        // flood stays that large for the memory check above: unbounded,
        // the reader needs that much to run ahead by tens of MiB.
        const DRAINED: u64 = 20_000;
        let mut expected = 0u64;
        let mut last_seq = 0;
        let deadline = Instant::now() + Duration::from_secs(120);
        while expected < DRAINED {
            assert!(
                Instant::now() < deadline,
                "only {expected} of {DRAINED} arrived"
            );
            match wait_shard(&handle, SOON, |_| true).await {
                Ok(ShardEvent::Dispatch(d)) if d.name == "MESSAGE_CREATE" => {
                    let message: Message = d.data().expect("a MESSAGE_CREATE");
                    assert_eq!(message.author.id.get(), FLOOD_USER_ID);
                    assert_eq!(message.content, format!("flood {expected}"));
                    assert!(d.seq > last_seq, "seq {} after {last_seq}", d.seq);
                    last_seq = d.seq;
                    expected += 1;
                }
                Ok(ShardEvent::Disconnected { reason }) => panic!("disconnected: {reason}"),
                _ => {}
            }
        }

        // Heartbeats kept going on the simulator's clock, with no zombie
        // verdict for the ACKs we chose not to read. (A beat that waited for
        // the consumer would show a gap of 5 s; the bound leaves room for a
        // loaded CI machine. The tight figures are flood_bench's.)
        let stats = sim.stats();
        assert_eq!(stats.connections.len(), 1, "one connection throughout");
        let worst = stats.connections[0].worst_gap_ms;
        assert!(
            worst <= INTERVAL_MS as f64 * 4.0,
            "worst heartbeat gap {worst} ms at a {INTERVAL_MS} ms interval"
        );
        let status = handle.status();
        assert_eq!(status.heartbeat.lifetime.zombies, 0);
        assert_eq!(status.sessions_started, 1);
    });
}

/// The peer stops reading ours, then sends `pings` pings: the shard must
/// leave it and resume on a new connection within the zombie bound (two
/// intervals while the peer keeps sending, then the close bound and a short
/// backoff: about a second here; stuck, it would be the whole 60 s stall).
fn left_and_resumed_after(pings: u64) {
    const INTERVAL_MS: u64 = 300;
    let sim = sim_beating(INTERVAL_MS);
    let rx = sim.subscribe();
    let mut config = shard_config(&sim);
    config.close_timeout = Duration::from_millis(300);
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        let start = Instant::now();
        sim.fault(Fault::Stall(Duration::from_secs(60)));
        sim.fault(Fault::PingFlood(pings));
        next_sim_event(
            &rx,
            "a second connection",
            |e| matches!(e, SimEvent::Connected { conn, .. } if *conn > 1),
        )
        .await;
        let took = start.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "left the peer only after {took:?}"
        );
        wait_dispatch(&handle, "RESUMED").await;
    });
}

#[test]
fn a_peer_that_floods_pings_and_stops_reading_is_left_and_resumed() {
    // Pings faster than we read them, for far longer than the test.
    left_and_resumed_after(50_000_000);
}

#[test]
fn a_ping_flood_then_silence_is_a_zombie_not_a_hang() {
    left_and_resumed_after(100_000);
}

#[test]
fn an_oversized_fragmented_message_is_refused() {
    let sim = sim_beating(1000);
    let rx = sim.subscribe();
    let config = shard_config(&sim);
    // DIRECT_MESSAGES only: 1 MiB is the default limit.
    assert!(config.max_message_bytes.is_none());
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        let before = rss();
        sim.fault(Fault::Fragmented {
            total: 60 << 20,
            fragment: 256 << 10,
        });
        match wait_shard(&handle, SOON, |e| {
            matches!(e, Ok(ShardEvent::Disconnected { .. }))
        })
        .await
        {
            Ok(ShardEvent::Disconnected { reason }) => {
                assert!(reason.contains("more than 1048576 bytes"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert!(
            rss().saturating_sub(before) < 16 << 20,
            "the refused message was buffered"
        );
        // The shard carries on: a new connection resumes the session.
        next_sim_event(
            &rx,
            "a second connection",
            |e| matches!(e, SimEvent::Connected { conn, .. } if *conn > 1),
        )
        .await;
        wait_dispatch(&handle, "RESUMED").await;
    });
}
