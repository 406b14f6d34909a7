//! The restart lifecycle, end to end against the simulator: clean stops do
//! not count as failed start-ups, safe mode lifts after the owner's first
//! turn, and the "working…" placeholder never follows the reply.
// Tests may block (std::fs); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use crate::support;

use smolcord_app::bridge::{BridgeOutcome, PLACEHOLDER};
use smolcord_sim::{next_matching, RestFault, RestFaultKind, SimEvent};
use std::time::{Duration, Instant};
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(10);

fn failed_starts(rig: &Rig) -> serde_json::Value {
    rig.json("runtime.json").unwrap_or_default()["failed_starts"].clone()
}

#[test]
fn three_clean_restarts_without_traffic_do_not_enter_safe_mode() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let mut config = rig.config();
        config.safe_mode_after_failures = 3;
        // A Pi rebooted three times overnight: start, READY, SIGTERM, four
        // times over; the fourth start is past the threshold if stops count.
        for start in 1..=4 {
            let sessions = rig.sim.subscribe();
            let bridge = rig.start(&ex, config.clone(), tunables()).await;
            assert!(!bridge.safe_mode, "start {start} entered safe mode");
            assert_eq!(failed_starts(&rig), 1, "start {start} is counted");
            next_matching(&sessions, T, |e| {
                matches!(e, SimEvent::Identified { .. } | SimEvent::Resumed { .. })
            })
            .await
            .expect("a gateway session");
            let outcome = bridge.stop().await;
            assert!(matches!(outcome, BridgeOutcome::Stopped), "{outcome:?}");
            assert_eq!(failed_starts(&rig), 0, "a clean stop clears the counter");
        }
    });
}

#[test]
fn safe_mode_lifts_after_the_owners_first_turn() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        config.safe_mode_after_failures = 2;
        // Two start-ups that never completed a turn (crashes) before this one.
        rig.write_atomic("runtime.json", r#"{"failed_starts": 2}"#);
        let bridge = rig.start(&ex, config, tunables()).await;
        assert!(bridge.safe_mode);
        rig.session_ready(T).await;

        let (_, alice_dm) = rig.sim.send_dm(ALICE, "alice", "refused in safe mode");
        wait_until("Alice refused", T, || {
            (bridge.counters.snapshot().refused >= 1).then_some(())
        })
        .await;
        let (_, owner_dm) = rig.sim.send_dm(OWNER, "owner", "owner turn");
        rig.message_containing(owner_dm, "owner turn", T).await;
        wait_until("safe mode lifted", T, || {
            (!bridge.counters.snapshot().safe_mode).then_some(())
        })
        .await;

        // Allowed users are answered again, without a restart.
        rig.sim.send_dm(ALICE, "alice", "answered now");
        rig.message_containing(alice_dm, "answered now", T).await;
        assert!(
            rig.sim
                .messages_in(alice_dm)
                .iter()
                .all(|m| !m.content.contains("refused in safe mode")),
            "a message refused in safe mode stays refused"
        );
        assert_eq!(line_count(&calls), 2);
        bridge.stop().await;
    });
}

#[test]
fn a_hung_typing_call_neither_delays_the_reply_nor_lets_a_placeholder_follow_it() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; sleep 1; echo the reply"));
        let mut tunables = tunables();
        // Due while the agent runs: only the hung typing call holds it back.
        tunables.placeholder_after = Some(Duration::from_millis(300));
        let dm = rig.sim.dm_channel_of(ALICE);
        // The first typing call hangs far past the agent's run (and past the
        // REST client's own 15 s timeout).
        rig.sim.rest_fault(RestFault {
            kind: RestFaultKind::Delay(Duration::from_secs(60)),
            count: 1,
            path_prefix: Some(format!("/api/v10/channels/{dm}/typing")),
        });
        let bridge = rig.start(&ex, config, tunables).await;
        rig.session_ready(T).await;

        let sent = Instant::now();
        rig.sim.send_dm(ALICE, "alice", "quick question");
        let reply = rig.message_containing(dm, "the reply", T).await;
        let took = sent.elapsed();
        // The agent takes 1 s; the hung typing call used to hold the reply
        // for the REST timeout (15 s), then post the placeholder before it.
        assert!(took < Duration::from_secs(6), "the reply waited {took:?}");
        assert_eq!(reply.edits, 0, "no placeholder to replace");
        let placeholders = rig
            .sim
            .rest_requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.body["content"] == PLACEHOLDER)
            .count();
        assert_eq!(placeholders, 0, "a placeholder after the agent finished");
        assert_eq!(rig.sim.messages_in(dm).len(), 1);
        bridge.stop().await;
    });
}
