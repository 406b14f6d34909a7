//! Coming back after faults, promptly: once the gateway answers again (a
//! Hello arrived), op 9 is followed by a fresh identify within the storm
//! guard, not after the outage's backoff; a zombie verdict on a healthy
//! session resumes at once; and every wait is logged at its real length.

use crate::support;

use smolcord::protocol::Intents;
use smolcord::rest::RestClient;
use smolcord::shard::{Backoff, ShardConfig, ShardEvent};
use smolcord_sim::{
    next_matching, Fault, RestFault, RestFaultKind, SimConfig, SimEvent, Simulator,
};
use std::time::{Duration, Instant};
use support::logs;
use support::shard::*;
use support::wait::*;

/// A simulator on `listen` (port 0: any), beating every 5 s.
fn gateway_on(listen: std::net::SocketAddr) -> Simulator {
    Simulator::start(SimConfig {
        listen,
        heartbeat_interval: Duration::from_secs(5),
        command_limit: 100_000,
        ..SimConfig::default()
    })
    .expect("simulator starts")
}

/// The `retrying in X s` waits logged so far.
fn refused_connects() -> Vec<String> {
    logs::warnings_with("retrying in")
}

#[test]
fn op_9_after_an_outage_identifies_within_5_s_of_the_first_hello() {
    let _serial = logs::serial();
    let first = gateway_on("127.0.0.1:0".parse().unwrap());
    let addr = first.local_addr();
    let mut config = shard_config(&first);
    // The storm guard as shipped, and a backoff that an outage grows as
    // Discord's would (doubling, full jitter; 100 ms base so that the
    // outage below takes seconds, not minutes).
    config.invalid_session_wait =
        ShardConfig::new(config.token.clone(), Intents::DIRECT_MESSAGES).invalid_session_wait;
    config.backoff = Backoff::new(
        Duration::from_millis(100),
        Duration::from_secs(60),
        Duration::from_secs(60),
    );
    // Discord's identify window (5 s from the last identify) is the
    // identify queue's to keep, and is long past after a real outage.
    config.identify_window = Duration::from_millis(100);
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        // The outage: the gateway goes away with every session it held,
        // and connects are refused ...
        first.shutdown();
        wait_until("seven refused connects", Duration::from_secs(60), || {
            (refused_connects().len() >= 7).then_some(())
        })
        .await;
        // ... until it is back (on the same address, knowing no session).
        let second = gateway_on(addr);
        let events = second.subscribe();
        // The client is waiting out its backoff (up to 12.8 s by now; the
        // identify used to wait up to twice that on top of the storm guard).
        next_matching(&events, Duration::from_secs(60), |e| {
            matches!(e, SimEvent::Connected { .. })
        })
        .await
        .expect("the client comes back");
        let hello = Instant::now();
        next_matching(&events, SOON, |e| {
            matches!(
                e,
                SimEvent::InvalidSession {
                    resumable: false,
                    ..
                }
            )
        })
        .await
        .expect("its Resume is answered with op 9 false");
        let identified = next_matching(&events, SOON, |e| matches!(e, SimEvent::Identified { .. }))
            .await
            .map(|_| hello.elapsed());
        let logged: Vec<String> = logs::captured()
            .into_iter()
            .filter(|line| line.contains("identifying afresh in"))
            .collect();
        let identified = identified.expect("a fresh identify");
        assert!(
            identified < Duration::from_secs(5),
            "identified {identified:?} after the first Hello ({} refused connects; logged: {logged:?})",
            refused_connects().len()
        );
        wait_dispatch(&handle, "READY").await;
        let ready = hello.elapsed();
        eprintln!("after the first Hello: Identify {identified:?}, READY {ready:?}");
        assert!(
            ready < Duration::from_secs(6),
            "READY {ready:?} after Hello"
        );
        // The wait is logged at its real length: the storm guard, 1–3 s.
        let [line] = &logged[..] else {
            panic!("one wait logged: {logged:?}")
        };
        let secs: f64 = line
            .rsplit("identifying afresh in ")
            .next()
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no figure in {line}"));
        assert!((1.0..=3.0).contains(&secs), "{line}");
        let slack = 1.5; // a reconnect and a handshake on a busy CI core
        assert!(
            (secs - 0.05..secs + slack).contains(&identified.as_secs_f64()),
            "logged {secs} s, identified after {identified:?}"
        );
        assert_eq!(handle.status().sessions_started, 2);
    });
}

#[test]
fn a_zombie_on_a_healthy_session_resumes_within_1_s_of_the_verdict() {
    let sim = sim(800);
    let mut config = shard_config(&sim);
    // A backoff grown by earlier faults of the same run (six failures in
    // a row, never a minute of health since): up to 60 s before the next
    // attempt.
    config.backoff = Backoff::new(
        Duration::from_secs(1),
        Duration::from_secs(60),
        Duration::from_secs(60),
    );
    for _ in 0..6 {
        config.backoff.next_delay();
    }
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        // A beat answered: the session is healthy. Then no more ACKs.
        wait_shard(&handle, SOON, |e| matches!(e, Ok(ShardEvent::Heartbeat(_))))
            .await
            .unwrap();
        assert_eq!(sim.fault(Fault::DropAcks(u32::MAX)), 1);
        wait_shard(&handle, SOON, |e| {
            matches!(e, Ok(ShardEvent::Disconnected { reason }) if reason.contains("no heartbeat ACK"))
        })
        .await
        .unwrap();
        let verdict = Instant::now();
        wait_dispatch(&handle, "RESUMED").await;
        let resumed = verdict.elapsed();
        eprintln!("RESUMED {resumed:?} after the zombie verdict");
        assert!(
            resumed < Duration::from_secs(1),
            "resumed {resumed:?} after the zombie verdict"
        );
        let status = handle.status();
        assert_eq!((status.sessions_started, status.resumes), (1, 1));
    });
}

#[test]
fn op_9s_in_a_row_without_a_ready_back_off() {
    let _serial = logs::serial();
    // Every Identify is answered op 9 false: the budget is spent.
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_secs(5),
        session_start_limit: smolcord_sim::SessionStartLimit {
            remaining: 0,
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let mut config = shard_config(&sim);
    config.identify_window = Duration::from_millis(50);
    run_local(config, |_handle, _| async move {
        let events = sim.subscribe();
        for n in 0..4 {
            next_matching(&events, SOON, |e| {
                matches!(
                    e,
                    SimEvent::InvalidSession {
                        resumable: false,
                        ..
                    }
                )
            })
            .await
            .unwrap_or_else(|| panic!("op 9 number {n}"));
        }
        let logged: Vec<String> = logs::captured()
            .into_iter()
            .filter(|line| line.contains("identifying afresh in"))
            .collect();
        assert!(
            !logged[0].contains("backoff"),
            "the first op 9 waits the storm guard alone: {logged:?}"
        );
        assert!(
            logged[1].contains("backoff") && logged[1].contains("2 times in a row"),
            "{logged:?}"
        );
        assert!(logged[2].contains("3 times in a row"), "{logged:?}");
    });
}

#[test]
fn a_hung_gateway_bot_does_not_hold_the_identify_after_op_9() {
    let _serial = logs::serial();
    let sim = sim(5_000);
    let mut config = shard_config(&sim);
    config.identify_window = Duration::from_millis(50);
    let rest = RestClient::new(&sim.api_base(), sim.config().token.clone());
    config.gateway_info = Some(smolcord::shard::gateway_info_from(&rest));
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        // GET /gateway/bot (asked before every identify, for the budget)
        // now answers 30 s late: REST is having a bad day.
        sim.rest_fault(RestFault {
            kind: RestFaultKind::Delay(Duration::from_secs(30)),
            count: 100,
            path_prefix: Some("/api/v10/gateway/bot".into()),
        });
        let events = sim.subscribe();
        sim.fault(Fault::InvalidSession(false));
        let op_9 = Instant::now();
        next_matching(&events, SOON, |e| matches!(e, SimEvent::Identified { .. }))
            .await
            .expect("a fresh identify");
        let identified = op_9.elapsed();
        eprintln!("identified {identified:?} after op 9 with GET /gateway/bot hung");
        // The guard (10-50 ms here), then at most 3 s for the answer.
        assert!(
            identified < Duration::from_secs(5),
            "identified {identified:?} after op 9"
        );
        assert!(
            !logs::warnings_with("GET /gateway/bot did not answer within 3.0 s").is_empty(),
            "{:?}",
            logs::warnings()
        );
    });
}
