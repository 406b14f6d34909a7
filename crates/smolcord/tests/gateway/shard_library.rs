//! The shard as a library user meets it: which seq is safe to persist, and
//! a close code of the caller's choosing.

use crate::support;

use smolcord::protocol::CloseCode;
use smolcord::shard::{Shard, ShardError, ShardHandle};
use std::time::Duration;
use support::shard::*;
use support::wait::*;

const BOUND: Duration = Duration::from_secs(20);

#[test]
fn resume_state_holds_the_last_dispatch_taken_not_the_last_received() {
    let sim = sim(5_000);
    run_local(shard_config(&sim), |handle, _| async move {
        let ready = wait_dispatch(&handle, "READY").await;
        for i in 0..3 {
            sim.send_dm(42, "alice", &format!("m{i}"));
        }
        let first = wait_dispatch(&handle, "MESSAGE_CREATE").await;
        // The other two arrive and wait in the queue, untaken.
        wait_until("all three received", BOUND, || {
            let seq = handle.status().state.session?.seq;
            (seq >= first.seq + 2).then_some(())
        })
        .await;
        let status = handle.status();
        assert!(status.state.session.as_ref().unwrap().seq >= first.seq + 2);
        let saved = status.resume_state().session.expect("a session");
        assert_eq!(saved.seq, first.seq, "the seq of the last dispatch taken");
        assert!(saved.seq > ready.seq);
    });
}

#[test]
fn resume_state_before_anything_is_taken_is_the_ready() {
    let sim = sim(5_000);
    let (shard, handle) = Shard::new(shard_config(&sim));
    let ex = smol::LocalExecutor::new();
    let _driver = ex.spawn(shard.run());
    smol::block_on(ex.run(async {
        let ready = wait_until("READY received", BOUND, || {
            Some(handle.status().state.session?.seq)
        })
        .await;
        sim.send_dm(42, "alice", "untaken");
        wait_until("the DM received", BOUND, || {
            let seq = handle.status().state.session?.seq;
            (seq > ready).then_some(())
        })
        .await;
        // Nothing taken, not even READY: a restart must resume from READY's
        // seq, so the queued DM is replayed rather than lost.
        let saved = handle.status().resume_state().session.expect("a session");
        assert_eq!(saved.seq, ready, "{saved:?}");
        handle.shutdown();
    }));
}

/// Runs a shard to READY, stops it with `stop`, and returns the close codes
/// the simulator saw and the handle.
fn closes_after(stop: impl FnOnce(&ShardHandle)) -> (Vec<Option<u16>>, ShardHandle) {
    let sim = sim(5_000);
    let (shard, handle) = Shard::new(shard_config(&sim));
    let ex = smol::LocalExecutor::new();
    let driver = ex.spawn(shard.run());
    smol::block_on(ex.run(async {
        wait_dispatch(&handle, "READY").await;
        stop(&handle);
        within("the driver to stop", BOUND, driver)
            .await
            .expect("a clean stop");
    }));
    let closes = sim
        .stats()
        .connections
        .iter()
        .map(|c| c.client_close_code)
        .collect();
    (closes, handle)
}

#[test]
fn closing_with_1000_ends_the_session_and_forgets_it() {
    let (closes, handle) = closes_after(|h| h.close(CloseCode::NORMAL));
    assert_eq!(closes, vec![Some(1000)]);
    let status = handle.status();
    assert!(status.state.session.is_none(), "{:?}", status.state);
    assert!(status.resume_state().session.is_none());
}

#[test]
fn shutdown_closes_resumably_and_keeps_the_session() {
    let (closes, handle) = closes_after(ShardHandle::shutdown);
    assert_eq!(closes, vec![Some(4000)]);
    assert!(handle.status().resume_state().session.is_some());
}

#[test]
fn a_config_discord_would_refuse_stops_before_connecting() {
    let sim = sim(5_000);
    let mut config = shard_config(&sim);
    // Discord's Identify accepts a large_threshold of 50-250.
    config.large_threshold = Some(10);
    let (shard, handle) = Shard::new(config);
    let error = smol::block_on(shard.run()).unwrap_err();
    assert!(
        matches!(
            error,
            ShardError::InvalidConfig {
                field: "large_threshold",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("50-250"), "{error}");
    // The consumer hears it too, and the gateway never saw a connection.
    assert_eq!(smol::block_on(handle.next_event()).unwrap_err(), error);
    assert!(sim.stats().connections.is_empty());
}
