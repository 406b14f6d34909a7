//! The owner's slash commands end to end against the simulator: registered
//! at start for the bot's DM; `/approve` approves a pairing code and the
//! user is told, without the shell; anyone else's use is refused and
//! changes nothing; what touches the disk is deferred and then edited;
//! every answer is ephemeral; a use replayed (a resume, a restart) is not
//! acted on twice, `/restart` included; one left at a stop is named once
//! in the drain's list.
// Tests may block (std::fs); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use crate::support;

use smolcord::protocol::Snowflake;
use smolcord_app::bridge::access::pairing::PairingFile;
use smolcord_app::bridge::{AccessFile, BridgeOutcome};
use smolcord_sim::{InteractionAnswer, RestFault, RestFaultKind, SimEvent};
use std::time::Duration;
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(10);
const COMMANDS: [&str; 5] = ["approve", "deny", "revoke", "status", "restart"];

fn code_in(text: &str) -> String {
    let start = text
        .find("smolcord pair ")
        .expect("a pairing command in the message")
        + 14;
    text[start..start + 8].to_owned()
}

fn access(rig: &Rig) -> AccessFile {
    serde_json::from_value(rig.json("access.json").unwrap_or_default()).unwrap_or_default()
}

fn pending_codes(rig: &Rig) -> usize {
    let book: PairingFile =
        serde_json::from_value(rig.json("pairing.json").unwrap_or_default()).unwrap_or_default();
    book.codes.len()
}

/// Waits until the commands are registered (the bridge does it after READY).
async fn registered(rig: &Rig) {
    wait_until("the owner's commands registered", T, || {
        let (commands, _) = rig.sim.registered_commands();
        (commands.len() == COMMANDS.len()).then_some(())
    })
    .await;
}

/// Waits until the bot's answer to `interaction` is complete: there, and
/// with its text (a deferred one after its edit).
async fn answer(rig: &Rig, interaction: Snowflake) -> InteractionAnswer {
    wait_until("the bot's answer to the command", T, || {
        rig.sim
            .interaction_answer(interaction)
            .filter(|a| a.content.is_some())
    })
    .await
}

/// A stranger DMs the bot and gets a code: `(their DM, the code)`.
async fn stranger_code(rig: &Rig) -> (Snowflake, String) {
    let (_, dm) = rig.sim.send_dm(STRANGER, "stranger", "let me in");
    let offer = rig.message_containing(dm, "smolcord pair ", T).await;
    (dm, code_in(&offer.content))
}

#[test]
fn the_commands_are_registered_at_start_for_the_bots_dm_only() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        registered(&rig).await;
        let (commands, overwrites) = rig.sim.registered_commands();
        assert_eq!(overwrites, 1);
        let names: Vec<_> = commands
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, COMMANDS);
        for command in &commands {
            // Offered in the bot's DM only, never in a server.
            assert_eq!(command["contexts"], serde_json::json!([1]), "{command}");
        }
        assert_eq!(commands[0]["options"][0]["max_length"], 32);
        bridge.stop().await;
        // A second start (it resumes: no READY names the application)
        // overwrites with the same list: idempotent.
        let again = rig.start(&ex, rig.config(), tunables()).await;
        wait_until("a second overwrite", T, || {
            (rig.sim.registered_commands().1 == 2).then_some(())
        })
        .await;
        assert_eq!(rig.sim.registered_commands().0, commands);
        again.stop().await;
    });
}

#[test]
fn the_owner_approves_a_pairing_code_with_a_slash_command_and_the_user_is_told() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        registered(&rig).await;
        let (dm, code) = stranger_code(&rig).await;

        let used = rig
            .sim
            .use_command(OWNER, "owner", "approve", &[("code", &code.to_lowercase())])
            .unwrap();
        let answer = answer(&rig, used.interaction_id).await;
        // It writes access.json: deferred, then the text; only the owner
        // sees it; within Discord's 3 s.
        assert!(answer.deferred && answer.ephemeral, "{answer:?}");
        let text = answer.content.unwrap();
        assert!(
            text.contains("Approved") && text.contains(&STRANGER.to_string()),
            "{text}"
        );
        assert!(answer.after < Duration::from_secs(3), "{:?}", answer.after);
        assert!(!rig.sim.interaction_answered_late(used.interaction_id));
        assert!(access(&rig)
            .allowed_user_ids
            .contains(&Snowflake::new(STRANGER)));

        // The user is told, as after `smolcord pair`, and is answered now.
        rig.message_containing(dm, "You have been approved", T)
            .await;
        rig.sim.send_dm(STRANGER, "stranger", "hello agent");
        rig.message_containing(dm, "hello agent", T).await;
        assert_eq!(line_count(&calls), 1);
        assert_eq!(pending_codes(&rig), 0);
        bridge.stop().await;
    });
}

#[test]
fn anyone_elses_use_is_refused_and_changes_nothing() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        registered(&rig).await;
        let (dm, code) = stranger_code(&rig).await;
        let before = access(&rig);

        // The stranger approves their own code; Alice (allowed, not the
        // owner) asks for a restart and revokes the owner.
        let uses = [
            rig.sim
                .use_command(STRANGER, "stranger", "approve", &[("code", &code)]),
            rig.sim.use_command(ALICE, "alice", "restart", &[]),
            rig.sim
                .use_command(ALICE, "alice", "revoke", &[("user", &OWNER.to_string())]),
        ];
        for used in uses {
            let answer = answer(&rig, used.unwrap().interaction_id).await;
            assert!(answer.ephemeral && !answer.deferred, "{answer:?}");
            assert!(answer.content.unwrap().contains("Only the owner"));
        }
        assert_eq!(access(&rig), before);
        assert_eq!(pending_codes(&rig), 1, "the code is still pending");
        assert!(!bridge.outcome.is_finished(), "restarted for someone else");
        assert!(!rig
            .sim
            .messages_in(dm)
            .iter()
            .any(|m| m.content.contains("You have been approved")));
        assert_eq!(
            bridge.counters.snapshot().refused,
            4,
            "the DM and three uses"
        );
        bridge.stop().await;
    });
}

#[test]
fn deny_revoke_and_status_answer_as_they_should() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        registered(&rig).await;

        // Status: from memory, answered at once, the facts of `smolcord
        // status` (healthy once a heartbeat was acknowledged).
        wait_until("a heartbeat ACK", T, || bridge.shard.status().last_ack).await;
        let used = rig.sim.use_command(OWNER, "owner", "status", &[]).unwrap();
        let status = answer(&rig, used.interaction_id).await;
        assert!(!status.deferred && status.ephemeral, "{status:?}");
        let text = status.content.unwrap();
        assert!(text.contains(": healthy"), "{text}");
        assert!(text.contains("gateway: connected"), "{text}");

        // Deny: deferred (it writes pairing.json); the code is gone.
        let (_, code) = stranger_code(&rig).await;
        let used = rig
            .sim
            .use_command(OWNER, "owner", "deny", &[("code", &code)])
            .unwrap();
        let denied = answer(&rig, used.interaction_id).await;
        assert!(denied.deferred && denied.edits == 1, "{denied:?}");
        assert!(denied.content.unwrap().contains("Denied"));
        assert_eq!(pending_codes(&rig), 0);
        let used = rig
            .sim
            .use_command(OWNER, "owner", "approve", &[("code", &code)])
            .unwrap();
        let late = answer(&rig, used.interaction_id).await;
        assert!(late.content.unwrap().contains("no pending pairing code"));
        assert!(!access(&rig)
            .allowed_user_ids
            .contains(&Snowflake::new(STRANGER)));

        // Revoke: Bob was approved earlier (access.json); a mention works.
        let mut file = access(&rig);
        file.allowed_user_ids.insert(Snowflake::new(BOB));
        rig.write_atomic("access.json", &serde_json::to_string(&file).unwrap());
        let used = rig
            .sim
            .use_command(OWNER, "owner", "revoke", &[("user", &format!("<@{BOB}>"))])
            .unwrap();
        let revoked = answer(&rig, used.interaction_id).await;
        assert!(
            revoked
                .content
                .as_deref()
                .unwrap_or_default()
                .contains("Revoked"),
            "{revoked:?}"
        );
        assert!(!access(&rig).allowed_user_ids.contains(&Snowflake::new(BOB)));
        // Alice is in the config: said so, not changed.
        let used = rig
            .sim
            .use_command(OWNER, "owner", "revoke", &[("user", &ALICE.to_string())])
            .unwrap();
        let kept = answer(&rig, used.interaction_id).await;
        assert!(kept.content.unwrap().contains("allowed_user_ids"));
        bridge.stop().await;
    });
}

#[test]
fn a_replayed_use_is_not_acted_on_or_answered_twice() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        registered(&rig).await;
        let (dm, code) = stranger_code(&rig).await;
        let used = rig
            .sim
            .use_command(OWNER, "owner", "approve", &[("code", &code)])
            .unwrap();
        answer(&rig, used.interaction_id).await;
        rig.message_containing(dm, "You have been approved", T)
            .await;
        wait_until("the interaction on record", T, || {
            rig.read("runtime.json")
                .filter(|text| text.contains(&used.interaction_id.to_string()))
        })
        .await;

        // The same INTERACTION_CREATE again, as a resume replays it.
        let skipped = bridge.counters.snapshot().replays_skipped;
        rig.sim.replay_interaction(used.interaction_id).unwrap();
        wait_until("the replay skipped", T, || {
            (bridge.counters.snapshot().replays_skipped > skipped).then_some(())
        })
        .await;
        let answer = rig.sim.interaction_answer(used.interaction_id).unwrap();
        assert_eq!(answer.refused_callbacks, 0, "answered twice: {answer:?}");
        assert_eq!(answer.edits, 1);
        let told = rig.sim.messages_in(dm);
        assert_eq!(
            told.iter()
                .filter(|m| m.content.contains("You have been approved"))
                .count(),
            1
        );
        bridge.stop().await;
    });
}

#[test]
fn a_restart_by_slash_command_happens_once_across_the_restart_and_its_replay() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let first = rig.start(&ex, rig.config(), tunables()).await;
        let SimEvent::Identified { session_id, .. } = rig.session_ready(T).await else {
            panic!("expected a fresh identify");
        };
        registered(&rig).await;
        let used = rig.sim.use_command(OWNER, "owner", "restart", &[]).unwrap();
        let outcome = first.finished().await;
        assert!(
            matches!(outcome, BridgeOutcome::RestartRequested),
            "{outcome:?}"
        );
        let answer = answer(&rig, used.interaction_id).await;
        assert!(answer.ephemeral, "{answer:?}");
        assert_eq!(answer.content.as_deref(), Some("Restarting…"));
        let marker = rig.json("restart.json").expect("restart marker");
        assert_eq!(marker["channel_id"], used.channel_id.to_string());

        // Pretend the last session save was old: the resume replays the
        // INTERACTION_CREATE of the `/restart`.
        let mut session = rig.json("session.json").expect("session saved");
        assert_eq!(session["session"]["session_id"], session_id.as_str());
        session["session"]["seq"] = 1.into();
        std::fs::write(rig.path("session.json"), session.to_string()).unwrap();
        let events = rig.sim.subscribe();
        let second = rig.start(&ex, rig.config(), tunables()).await;
        let resumed = smolcord_sim::next_matching(&events, T, |e| {
            matches!(e, SimEvent::Resumed { .. } | SimEvent::Identified { .. })
        })
        .await
        .expect("a session");
        assert!(matches!(resumed, SimEvent::Resumed { .. }), "{resumed:?}");
        rig.message_containing(used.channel_id, "Back online", T)
            .await;
        wait_until("the replayed /restart skipped", T, || {
            (second.counters.snapshot().replays_skipped >= 1).then_some(())
        })
        .await;
        assert!(!second.outcome.is_finished(), "restarted twice");
        let answer = rig.sim.interaction_answer(used.interaction_id).unwrap();
        assert_eq!(answer.refused_callbacks, 0, "answered twice: {answer:?}");
        let outcome = second.stop().await;
        assert!(matches!(outcome, BridgeOutcome::Stopped), "{outcome:?}");
    });
}

#[test]
fn a_use_cut_short_by_a_crash_runs_again_once_and_edits_its_answer() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let first = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        registered(&rig).await;
        let (dm, code) = stranger_code(&rig).await;
        let used = rig
            .sim
            .use_command(OWNER, "owner", "approve", &[("code", &code)])
            .unwrap();
        answer(&rig, used.interaction_id).await;
        rig.message_containing(dm, "You have been approved", T)
            .await;
        first.stop().await;

        // As if the process died after the work and the answer but before
        // the record: no interaction on record, and a resume from before it.
        let mut runtime = rig.json("runtime.json").unwrap();
        runtime.as_object_mut().unwrap().remove("interactions");
        std::fs::write(rig.path("runtime.json"), runtime.to_string()).unwrap();
        let mut session = rig.json("session.json").unwrap();
        session["session"]["seq"] = 1.into();
        std::fs::write(rig.path("session.json"), session.to_string()).unwrap();

        let second = rig.start(&ex, rig.config(), tunables()).await;
        // It runs again: the first answer is there (40060), so it is edited.
        wait_until("the answer edited again", T, || {
            rig.sim
                .interaction_answer(used.interaction_id)
                .filter(|a| a.edits == 2)
        })
        .await;
        let answer = rig.sim.interaction_answer(used.interaction_id).unwrap();
        assert_eq!(answer.refused_callbacks, 1, "{answer:?}");
        // The truth about the effect that happened: the code was used, by
        // a user now allowed (not "no pending pairing code").
        assert_eq!(
            answer.content.as_deref(),
            Some(format!("User {STRANGER} was already allowed; nothing to do.").as_str()),
            "{answer:?}"
        );
        // Approved once, told once; the owner's DM got nothing extra.
        assert!(access(&rig)
            .allowed_user_ids
            .contains(&Snowflake::new(STRANGER)));
        let told = rig.sim.messages_in(dm);
        let approvals = told
            .iter()
            .filter(|m| m.content.contains("You have been approved"))
            .count();
        assert_eq!(approvals, 1);
        assert!(rig.sim.messages_in(used.channel_id).is_empty());
        second.stop().await;
    });
}

#[test]
fn a_deferred_command_left_at_a_stop_is_named_once_in_the_drains_list() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        registered(&rig).await;
        // Its deferral hangs past the drain's 2 s: the stop finds it in
        // flight.
        rig.sim.rest_fault(RestFault {
            kind: RestFaultKind::Delay(Duration::from_secs(5)),
            count: 1,
            path_prefix: Some("POST /api/v10/interactions".into()),
        });
        let used = rig
            .sim
            .use_command(OWNER, "owner", "deny", &[("code", "ABCDEFGH")])
            .unwrap();
        let handled = format!("the owner's /deny (interaction {})", used.interaction_id);
        wait_until("the deny taken", T, || {
            support::logs::captured()
                .iter()
                .any(|line| line.contains(&handled))
                .then_some(())
        })
        .await;
        bridge.stop().await;
        let job = format!("command interaction {}", used.interaction_id);
        let left: Vec<String> = support::logs::warnings_with("unfinished after")
            .into_iter()
            .filter(|w| w.contains(&job))
            .collect();
        assert_eq!(left.len(), 1, "{left:#?}");
        assert_eq!(left[0].matches(&job).count(), 1, "{}", left[0]);
        assert!(left[0].contains("1 job(s) unfinished"), "{}", left[0]);
    });
}

#[test]
fn an_answer_past_the_deadline_goes_to_the_dm() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let bridge = rig.start(&ex, rig.config(), tunables()).await;
        rig.session_ready(T).await;
        registered(&rig).await;
        // Discord has given up on every interaction at once.
        rig.sim
            .set_interaction_deadlines(Duration::ZERO, Duration::from_secs(900));
        let used = rig.sim.use_command(OWNER, "owner", "status", &[]).unwrap();
        let sent = rig
            .message_containing(used.channel_id, "gateway: connected", T)
            .await;
        assert!(rig.sim.interaction_answered_late(used.interaction_id));
        assert!(rig.sim.interaction_answer(used.interaction_id).is_none());
        assert!(
            sent.content.starts_with("smolcord (pid"),
            "{}",
            sent.content
        );
        bridge.stop().await;
    });
}

#[test]
fn registration_is_retried_in_the_background_and_a_refusal_is_not() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let puts = || {
            rig.sim
                .rest_requests()
                .iter()
                .filter(|r| r.method == "PUT" && r.path.contains("/commands"))
                .count()
        };
        let fault = |kind, count| RestFault {
            kind,
            count,
            path_prefix: Some("PUT /api/v10/applications".into()),
        };
        // Every try of the first call fails (the REST client's 3).
        rig.sim
            .rest_fault(fault(RestFaultKind::ServerError(503), 3));
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        let bridge = rig.start(&ex, config.clone(), tunables()).await;
        rig.session_ready(T).await;
        // Meanwhile the bridge answers: the registration waits for nobody.
        let (_, dm) = rig.sim.send_dm(ALICE, "alice", "still there?");
        rig.message_containing(dm, "still there?", T).await;
        registered(&rig).await;
        assert_eq!(puts(), 4, "three failed tries, then one after the wait");
        bridge.stop().await;

        // A refusal (403: the invite lacks applications.commands) is
        // logged once and not tried again.
        rig.sim.rest_fault(fault(RestFaultKind::Forbidden, 1));
        let again = rig.start(&ex, config, tunables()).await;
        wait_until("the refused overwrite", T, || (puts() == 5).then_some(())).await;
        smol::Timer::after(Duration::from_secs(3)).await;
        assert_eq!(puts(), 5, "a refusal was tried again");
        again.stop().await;
    });
}
