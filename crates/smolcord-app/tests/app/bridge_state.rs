//! End-to-end: restart markers, resume after a restart, replay skipping,
//! the restart-failure counter and safe mode, background state files.
// Tests may block (std::fs); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use crate::support;

use smolcord::protocol::Intents;
use smolcord_app::bridge::BridgeOutcome;
use smolcord_app::status::socket;
use smolcord_sim::{SimEvent, SimGuild};
use std::time::Duration;
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(10);

fn runtime(rig: &Rig) -> serde_json::Value {
    rig.json("runtime.json").unwrap_or_default()
}

#[test]
fn restart_markers_and_resume_after_restart() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));

        let first = rig.start(&ex, config.clone(), tunables()).await;
        let SimEvent::Identified { session_id, .. } = rig.session_ready(T).await else {
            panic!("expected a fresh identify");
        };
        let (_, owner_dm) = rig.sim.send_dm(OWNER, "owner", "before");
        rig.message_containing(owner_dm, "before", T).await;
        let (restart_id, _) = rig.sim.send_dm(OWNER, "owner", "!restart");
        let outcome = first.finished().await;
        assert!(
            matches!(outcome, BridgeOutcome::RestartRequested),
            "{outcome:?}"
        );
        rig.message_containing(owner_dm, "Restarting", T).await;
        let marker = rig.json("restart.json").expect("restart marker");
        assert_eq!(marker["requested_by"], OWNER.to_string());
        assert_eq!(marker["channel_id"], owner_dm.to_string());
        assert_eq!(
            runtime(&rig)["processed"][owner_dm.to_string()],
            restart_id.to_string()
        );
        let session = rig.json("session.json").expect("session saved");
        assert_eq!(session["session"]["session_id"], session_id.as_str());

        // While we are down, Alice writes. And pretend the last session save
        // was old (a crash before the heartbeat save): the resume then
        // replays messages we already answered, `!restart` included.
        let (_, alice_dm) = rig.sim.send_dm(ALICE, "alice", "while down");
        let mut session = session;
        session["session"]["seq"] = 1.into();
        std::fs::write(rig.path("session.json"), session.to_string()).unwrap();

        let events = rig.sim.subscribe();
        let second = rig.start(&ex, config, tunables()).await;
        let resumed = smolcord_sim::next_matching(&events, T, |e| {
            matches!(e, SimEvent::Resumed { .. } | SimEvent::Identified { .. })
        })
        .await
        .expect("a session");
        let SimEvent::Resumed {
            session_id: resumed_id,
            seq,
            replayed,
            ..
        } = resumed
        else {
            panic!("a restart must resume, not identify: {resumed:?}");
        };
        assert_eq!((resumed_id.as_str(), seq), (session_id.as_str(), 1));
        assert!(replayed >= 3, "replayed {replayed}");

        rig.message_containing(owner_dm, "Back online", T).await;
        wait_until("the marker removed", T, || {
            rig.read("restart.json").is_none().then_some(())
        })
        .await;
        rig.message_containing(alice_dm, "while down", T).await;
        wait_until("replays skipped", T, || {
            (second.counters.snapshot().replays_skipped >= 2).then_some(())
        })
        .await;
        // "before" and "while down" reached the agent once each, and the
        // replayed `!restart` did not restart us again.
        assert_eq!(line_count(&calls), 2);
        assert!(!second.outcome.is_finished());
        assert_eq!(rig.sim.stats().totals.identifies, 1);
        let outcome = second.stop().await;
        assert!(matches!(outcome, BridgeOutcome::Stopped), "{outcome:?}");
    });
}

#[test]
fn restart_failure_counter_and_safe_mode() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        config.safe_mode_after_failures = 2;

        // Two start-ups that crash before a turn count up.
        for expected in 1..=2 {
            let bridge = rig.start(&ex, config.clone(), tunables()).await;
            assert_eq!(runtime(&rig)["failed_starts"], expected);
            assert!(!bridge.safe_mode);
            // A crash: the run ends without its stop (no drain, no save).
            drop(bridge.outcome);
            bridge.shard.shutdown();
            assert_eq!(runtime(&rig)["failed_starts"], expected);
        }
        // The third is over the threshold: safe mode.
        let bridge = rig.start(&ex, config.clone(), tunables()).await;
        assert!(bridge.safe_mode);
        assert!(bridge.counters.snapshot().safe_mode);
        let owner_dm = rig.sim.dm_channel_of(OWNER);
        rig.message_containing(owner_dm, "safe mode", T).await;
        let (_, alice_dm) = rig.sim.send_dm(ALICE, "alice", "hello?");
        let (_, stranger_dm) = rig.sim.send_dm(STRANGER, "stranger", "hello?");
        wait_until("two refusals", T, || {
            (bridge.counters.snapshot().refused >= 2).then_some(())
        })
        .await;
        assert!(rig.sim.messages_in(alice_dm).is_empty());
        assert!(
            rig.sim.messages_in(stranger_dm).is_empty(),
            "no pairing in safe mode"
        );
        rig.sim.send_dm(OWNER, "owner", "owner only");
        rig.message_containing(owner_dm, "owner only", T).await;
        assert_eq!(line_count(&calls), 1);
        // The first successful turn clears the counter.
        wait_until("the counter cleared", T, || {
            (runtime(&rig)["failed_starts"] == 0).then_some(())
        })
        .await;
        bridge.stop().await;
        let bridge = rig.start(&ex, config, tunables()).await;
        assert!(!bridge.safe_mode);
        bridge.stop().await;
    });
}

#[test]
fn session_status_and_directory_are_saved_in_the_background() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo ok"));
        config.intents = Intents::DIRECT_MESSAGES.union(Intents::GUILDS).bits();
        let bridge = rig.start(&ex, config, tunables()).await;
        let SimEvent::Identified { session_id, .. } = rig.session_ready(T).await else {
            panic!("expected a fresh identify");
        };
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "hi");
        rig.message_containing(dm, "ok", T).await;
        // The live status answers on status.sock; status.json was written
        // when the session started (not per heartbeat, not by the message path).
        let deadline = std::time::Instant::now() + T;
        let live = loop {
            match socket::query(rig.state(), socket::QUERY_BOUND).await {
                socket::Query::Live(s) if s.bridge.is_some_and(|b| b.replies_delivered == 1) => {
                    break s
                }
                other => assert!(
                    std::time::Instant::now() < deadline,
                    "no live status with the reply counted: {other:?}"
                ),
            }
            async_io::Timer::after(Duration::from_millis(20)).await;
        };
        assert!(live.connected);
        assert_eq!(live.bridge.map(|b| b.messages_handled), Some(1));
        let status = wait_until("status.json", T, || rig.json("status.json")).await;
        assert_eq!(status["connected"], true);
        let session = wait_until("session.json", T, || rig.json("session.json")).await;
        assert_eq!(session["session"]["session_id"], session_id.as_str());

        // The channel directory follows GUILD_CREATE and CHANNEL_*.
        let guild = SimGuild::example();
        let general = guild.channels[0].id.to_string();
        wait_until("channels.json with #general", T, || {
            rig.json("channels.json")
                .filter(|d| d["channels"][&general]["name"] == "general")
        })
        .await;
        let fresh = rig
            .sim
            .create_channel(guild.id, "fresh")
            .unwrap()
            .to_string();
        wait_until("the new channel saved", T, || {
            rig.json("channels.json")
                .filter(|d| d["channels"][&fresh]["name"] == "fresh")
        })
        .await;
        rig.sim.delete_channel(guild.channels[1].id).unwrap();
        let gone = guild.channels[1].id.to_string();
        wait_until("the deleted channel dropped", T, || {
            rig.json("channels.json")
                .filter(|d| d["channels"].get(&gone).is_none())
        })
        .await;
        bridge.stop().await;
    });
}

#[test]
fn work_left_at_shutdown_is_bounded_and_replayed_after_the_restart() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let started = rig.path("agent-started");
        let mut config = rig.config();
        config.agent_cmd = Some(sh(&format!(
            "echo x >> '{}'; cat >/dev/null; sleep 20; echo too late",
            started.display()
        )));
        let mut tunables = tunables();
        tunables.drain_timeout = Duration::from_millis(300);
        let first = rig.start(&ex, config.clone(), tunables).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "slow work");
        wait_until("the agent started", T, || {
            (line_count(&started) == 1).then_some(())
        })
        .await;
        let stopping = std::time::Instant::now();
        let outcome = first.stop().await;
        let took = stopping.elapsed();
        assert!(matches!(outcome, BridgeOutcome::Stopped), "{outcome:?}");
        assert!(
            took < Duration::from_secs(3),
            "the drain is bounded: {took:?}"
        );
        // Work abandoned at the stop may be what keeps failing: not clean.
        assert_eq!(runtime(&rig)["failed_starts"], 1);

        // The unanswered message comes back on resume and is answered now.
        config.agent_cmd = Some(sh("cat >/dev/null; echo answered after restart"));
        let second = rig.start(&ex, config, tunables).await;
        rig.message_containing(dm, "answered after restart", T)
            .await;
        assert_eq!(rig.sim.messages_in(dm).len(), 1);
        assert!(matches!(
            rig.session_ready(T).await,
            SimEvent::Identified { .. }
        ));
        assert_eq!(rig.sim.stats().totals.resumes, 1);
        second.stop().await;
    });
}
