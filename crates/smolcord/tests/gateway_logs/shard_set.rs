//! Many shards on one thread: a set identifies in bucket order at the rate
//! Discord allows (the simulator refuses a too early Identify with op 9, as
//! Discord does) and resumes without queueing; two sets in different
//! "processes" sharing a gateway-queue compatible service never exceed the
//! rate; a queue service that is down delays identifies, loudly;
//! `send_all` reaches every shard though one of them cannot take commands.

use crate::support;

use smolcord::protocol::{Command, PresenceUpdate};
use smolcord::rest::RestClient;
use smolcord::shard::{
    BoxFuture, IdentifyPermit, IdentifyQueue, RemoteIdentifyQueue, ShardConfig, ShardEvent,
    ShardSet, ShardSetHandle,
};
use smolcord_sim::{Fault, RestFault, RestFaultKind, SimConfig, SimEvent, Simulator};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::logs::captured;
use support::shard::*;
use support::wait::*;

const WINDOW: Duration = Duration::from_millis(1000);

fn sim(max_concurrency: u32) -> Simulator {
    Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(1000),
        command_limit: 100_000,
        enforce_identify_concurrency: true,
        identify_window: WINDOW,
        session_start_limit: smolcord_sim::SessionStartLimit {
            max_concurrency,
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .expect("simulator starts")
}

/// A shard config that learns `max_concurrency` from the simulator's
/// `GET /gateway/bot`, as `smolcord run` does from Discord's.
fn set_config(sim: &Simulator) -> ShardConfig {
    let mut config = shard_config(sim);
    config.identify_window = WINDOW;
    let rest = RestClient::new(&sim.api_base(), sim.config().token.clone());
    config.gateway_info = Some(smolcord::shard::gateway_info_from(&rest));
    config
}

/// Runs the sets beside `body` on one thread, then shuts them down.
fn run_sets<T>(
    sets: Vec<(ShardSet, ShardSetHandle)>,
    body: impl std::future::Future<Output = T>,
) -> T {
    support::logs::capture();
    let ex = smol::LocalExecutor::new();
    let mut drivers = Vec::new();
    let mut handles = Vec::new();
    for (set, handle) in sets {
        drivers.push(ex.spawn(set.run()));
        handles.push(handle);
    }
    let result = smol::block_on(ex.run(body));
    for handle in &handles {
        handle.shutdown();
    }
    smol::block_on(ex.run(async {
        futures_lite::future::or(
            async {
                for driver in drivers {
                    let _ = driver.await;
                }
            },
            async {
                async_io::Timer::after(SOON).await;
            },
        )
        .await
    }));
    result
}

/// Waits until every shard in `ids` has had a READY (or RESUMED) event.
async fn all_see(handle: &ShardSetHandle, name: &str, ids: impl IntoIterator<Item = u32>) {
    let mut waiting: BTreeSet<u32> = ids.into_iter().collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !waiting.is_empty() {
        let next = futures_lite::future::or(async { Some(handle.next_event().await) }, async {
            async_io::Timer::at(deadline).await;
            None
        })
        .await;
        match next {
            Some(Ok((shard, ShardEvent::Dispatch(d)))) if d.name == name => {
                waiting.remove(&shard);
            }
            Some(Ok(_)) => {}
            Some(Err(err)) => panic!("{err}"),
            None => panic!("no {name} from shards {waiting:?}"),
        }
    }
}

fn identified_shards(sim: &Simulator) -> Vec<u32> {
    sim.events()
        .iter()
        .filter_map(|e| match e {
            SimEvent::Identified { identify, .. } => identify.shard.map(|[id, _]| id),
            _ => None,
        })
        .collect()
}

#[test]
fn a_set_identifies_in_bucket_order_at_the_allowed_rate_and_resumes_at_once() {
    let sim = sim(2);
    let rx = sim.subscribe();
    let (set, handle) =
        ShardSet::new(set_config(&sim), 0..=5, 6, |_| Default::default()).expect("shards exist");
    let events = handle.clone();
    run_sets(vec![(set, handle)], async move {
        let start = Instant::now();
        all_see(&events, "READY", 0..=5).await;
        let took = start.elapsed();
        let totals = sim.stats().totals;
        assert_eq!(totals.identifies_too_early, 0, "{totals:?}");
        assert_eq!(totals.invalid_sessions, 0);
        assert_eq!(totals.identifies_by_bucket.values().sum::<u64>(), 6);
        assert_eq!(totals.identifies_by_bucket.len(), 2);
        // Three rounds of two buckets: two windows at least.
        assert!(took >= WINDOW * 2, "all READY after {took:?}");
        let order = identified_shards(&sim);
        let rounds: Vec<BTreeSet<u32>> = order
            .chunks(2)
            .map(|c| c.iter().copied().collect())
            .collect();
        assert_eq!(
            rounds,
            vec![
                BTreeSet::from([0, 1]),
                BTreeSet::from([2, 3]),
                BTreeSet::from([4, 5])
            ],
            "identify order {order:?}"
        );
        for status in events.statuses() {
            assert_eq!(status.sessions_started, 1, "shard {:?}", status.shard);
        }

        // Every shard resumes at once: a resume never waits for the queue.
        let start = Instant::now();
        sim.fault(Fault::Reconnect);
        all_see(&events, "RESUMED", 0..=5).await;
        let took = start.elapsed();
        // Queued like identifies, six shards in two buckets would take two
        // windows at least.
        assert!(took < WINDOW * 2, "all resumed only after {took:?}");
        let resumes = std::iter::from_fn(|| rx.try_recv().ok())
            .filter(|e| matches!(e, SimEvent::Resumed { .. }))
            .count();
        assert_eq!(resumes, 6);
        assert_eq!(
            sim.stats()
                .totals
                .identifies_by_bucket
                .values()
                .sum::<u64>(),
            6
        );
    });
}

#[test]
fn two_processes_on_one_queue_service_never_exceed_the_rate() {
    let sim = sim(2);
    let mut config = set_config(&sim);
    config.identify_queue = Some(Arc::new(
        RemoteIdentifyQueue::new(sim.identify_queue_url()).with_window(WINDOW),
    ));
    // Two sets with no identify queue of their own in common: they stand
    // for two processes (or hosts) sharing only the queue service.
    let a = ShardSet::new(config.clone(), 0..=3, 8, |_| Default::default()).expect("shards exist");
    let b = ShardSet::new(config, 4..=7, 8, |_| Default::default()).expect("shards exist");
    let (events_a, events_b) = (a.1.clone(), b.1.clone());
    run_sets(vec![a, b], async move {
        futures_lite::future::zip(
            all_see(&events_a, "READY", 0..=3),
            all_see(&events_b, "READY", 4..=7),
        )
        .await;
        let totals = sim.stats().totals;
        assert_eq!(totals.identifies_too_early, 0, "{totals:?}");
        assert_eq!(totals.invalid_sessions, 0);
        assert_eq!(totals.identifies_by_bucket.values().sum::<u64>(), 8);
        let gap = totals.min_identify_gap_ms.expect("gaps measured");
        assert!(gap >= WINDOW.as_millis() as f64 * 0.9, "gap {gap} ms");
    });
}

#[test]
fn a_queue_service_that_is_down_delays_identifies_and_says_so() {
    let sim = sim(1);
    sim.rest_fault(RestFault {
        kind: RestFaultKind::ServerError(503),
        count: 2,
        path_prefix: Some("/queue".into()),
    });
    let mut config = set_config(&sim);
    config.identify_queue = Some(Arc::new(
        RemoteIdentifyQueue::new(sim.identify_queue_url()).with_window(WINDOW),
    ));
    let (set, handle) =
        ShardSet::new(config, 0..=0, 1, |_| Default::default()).expect("shards exist");
    let events = handle.clone();
    run_sets(vec![(set, handle)], async move {
        let start = Instant::now();
        all_see(&events, "READY", [0]).await;
        // Backoff 1 s, then 2 s, each jittered to ½–1×: never bypassed.
        assert!(
            start.elapsed() >= Duration::from_millis(1500),
            "{:?}",
            start.elapsed()
        );
        let said = captured()
            .iter()
            .filter(|l| l.contains("identify queue") && l.contains("answered HTTP 503"))
            .count();
        assert_eq!(said, 2, "{:#?}", captured());
    });
}

/// Grants every shard but shard 0, which never gets its turn (and so never
/// opens a session to send commands on).
struct NeverShardZero;

impl IdentifyQueue for NeverShardZero {
    fn permit(&self, shard_id: u32) -> BoxFuture<IdentifyPermit> {
        Box::pin(async move {
            if shard_id == 0 {
                futures_lite::future::pending::<()>().await;
            }
            IdentifyPermit::granted()
        })
    }
}

#[test]
fn send_all_is_not_held_up_by_a_shard_that_cannot_take_commands() {
    let sim = sim(2);
    let rx = sim.subscribe();
    let mut config = set_config(&sim);
    config.identify_queue = Some(Arc::new(NeverShardZero));
    let (set, handle) =
        ShardSet::new(config, 0..=1, 2, |_| Default::default()).expect("shards exist");
    let events = handle.clone();
    run_sets(vec![(set, handle)], async move {
        all_see(&events, "READY", [1]).await;
        let shard_1 = sim
            .events()
            .iter()
            .find_map(|e| match e {
                SimEvent::Identified { conn, identify, .. } if identify.shard == Some([1, 2]) => {
                    Some(*conn)
                }
                _ => None,
            })
            .expect("shard 1 identified");
        // Shard 0's command queue fills up (64) while it waits for a turn.
        let stuck = events.shard(0).expect("shard 0");
        for _ in 0..64 {
            within(
                "room in shard 0's queue",
                SOON,
                stuck.send(Command::PresenceUpdate(PresenceUpdate::online())),
            )
            .await
            .expect("shard 0 runs");
        }
        let mut dnd = PresenceUpdate::online();
        dnd.status = "dnd".into();
        let delivered = futures_lite::future::or(
            async {
                let sent = events.send_all(Command::PresenceUpdate(dnd)).await;
                panic!("send_all returned ({sent:?}) though shard 0 cannot take a command");
            },
            smolcord_sim::next_matching(&rx, SOON, |event| {
                matches!(event, SimEvent::CommandReceived { conn, op: 3, raw }
                    if *conn == shard_1 && raw.contains("\"dnd\""))
            }),
        )
        .await;
        assert!(
            delivered.is_some(),
            "shard 1 never got the presence update send_all sent"
        );
    });
}
