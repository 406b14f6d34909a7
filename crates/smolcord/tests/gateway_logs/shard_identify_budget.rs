//! The identify budget guard end to end: when `GET /gateway/bot` says the
//! daily budget is nearly spent, the shard does not identify — it waits and
//! says so loudly — while a resumable session still resumes for free.

use crate::support;

use smolcord::rest::RestClient;
use smolcord::shard::{GatewayInfo, Session};
use smolcord_sim::{SessionStartLimit, SimConfig, SimEvent, Simulator};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::logs::captured;
use support::shard::*;
use support::wait::*;

fn sim_with_budget(remaining: u32) -> Simulator {
    Simulator::start(SimConfig {
        session_start_limit: SessionStartLimit {
            remaining,
            ..SessionStartLimit::default()
        },
        ..SimConfig::default()
    })
    .unwrap()
}

fn config_asking_the_gateway(sim: &Simulator) -> smolcord::shard::ShardConfig {
    let mut config = shard_config(sim);
    let rest = RestClient::new(&sim.api_base(), sim.config().token.clone());
    config.gateway_info = Some(Arc::new(move || {
        let rest = rest.clone();
        Box::pin(async move {
            let bot = rest.gateway_bot().await?;
            Ok(GatewayInfo {
                url: bot.url,
                session_start_limit: Some(bot.session_start_limit),
            })
        })
    }));
    config
}

#[test]
fn a_nearly_spent_budget_holds_the_identify_and_says_so() {
    let sim = sim_with_budget(3);
    run_local(config_asking_the_gateway(&sim), |_handle, _| async {
        let rx = sim.subscribe();
        // The guard asked the gateway for the budget ...
        next_sim_event(
            &rx,
            "GET /gateway/bot",
            |e| matches!(e, SimEvent::Rest { path, .. } if path.ends_with("/gateway/bot")),
        )
        .await;
        // ... and then does not identify (it would wait for the reset).
        let identified = smolcord_sim::next_matching(&rx, Duration::from_secs(2), |e| {
            matches!(e, SimEvent::Identified { .. } | SimEvent::Connected { .. })
        })
        .await;
        assert!(
            identified.is_none(),
            "identified with 3 left: {identified:?}"
        );
        let logs = captured();
        assert!(
            logs.iter()
                .any(|l| l.starts_with("ERROR")
                    && l.contains("identify budget nearly spent: 3 left")),
            "no loud warning in {logs:#?}"
        );
    });
    assert_eq!(sim.stats().totals.identifies, 0);
}

#[test]
fn a_saved_session_still_resumes_when_the_budget_is_low() {
    let sim = sim_with_budget(1000);
    let session: Session = run_local(shard_config(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        handle.status().state.session.expect("session")
    });
    // Restart with a budget source that says 3 identifies are left: resuming
    // spends none, so the guard must neither ask nor wait.
    let asked = Arc::new(AtomicU32::new(0));
    let mut config = shard_config(&sim);
    config.state.session = Some(session);
    let counter = asked.clone();
    config.gateway_info = Some(Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            Ok(GatewayInfo {
                url: String::new(),
                session_start_limit: Some(smolcord::protocol::SessionStartLimit {
                    total: 1000,
                    remaining: 3,
                    reset_after: 3_600_000,
                    max_concurrency: 1,
                }),
            })
        })
    }));
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "RESUMED").await;
        assert_eq!(handle.status().sessions_started, 0);
    });
    assert_eq!(
        asked.load(Ordering::SeqCst),
        0,
        "a resume consulted the identify budget"
    );
    assert_eq!(sim.stats().totals.identifies, 1);
}

#[test]
fn an_absurd_max_concurrency_from_gateway_bot_is_refused_and_the_shard_identifies() {
    // It used to allocate a slot per bucket: 4 294 967 295 of them, an
    // abort on every start.
    let sim = Simulator::start(SimConfig {
        session_start_limit: SessionStartLimit {
            max_concurrency: u32::MAX,
            ..SessionStartLimit::default()
        },
        ..SimConfig::default()
    })
    .unwrap();
    run_local(config_asking_the_gateway(&sim), |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        let logs = captured();
        assert!(
            logs.iter().any(|l| l.starts_with("ERROR")
                && l.contains("GET /gateway/bot: refusing its session_start_limit: max_concurrency 4294967295")),
            "{logs:#?}"
        );
    });
}

#[test]
fn the_log_gives_the_gateways_own_daily_budget() {
    let _serial = support::logs::serial();
    let sim = Simulator::start(SimConfig {
        session_start_limit: SessionStartLimit {
            total: 5000,
            remaining: 3,
            ..SessionStartLimit::default()
        },
        ..SimConfig::default()
    })
    .unwrap();
    run_local(config_asking_the_gateway(&sim), |_handle, _| async {
        wait_until("the budget warning", SOON, || {
            captured()
                .into_iter()
                .find(|l| l.contains("identify budget nearly spent"))
        })
        .await
    });
    let line = captured()
        .into_iter()
        .find(|l| l.contains("identify budget nearly spent"))
        .unwrap();
    assert!(line.contains("3 left of 5000 per 24 h"), "{line}");
}
