//! End-to-end: access control and pairing against the simulator.
// Tests may block (std::fs, std::process); the loop rule is for the crate.
#![allow(clippy::disallowed_methods)]

use crate::support;

use smolcord::protocol::{Intents, Snowflake};
use smolcord_app::bridge::access::pairing::PairingFile;
use smolcord_app::bridge::{AccessFile, PairingRules};
use std::time::Duration;
use support::binary::Smolcord;
use support::bridge::*;
use support::wait::*;

const T: Duration = Duration::from_secs(10);

/// Runs `smolcord pair CODE` against the rig's state dir (hermetic env).
async fn pair_cli(rig: &Rig, code: &str) -> (i32, String) {
    let state = rig.state().display().to_string();
    let code = code.to_owned();
    blocking::unblock(move || {
        let mut pair = Smolcord::spawn(
            &["pair", &code],
            [("SMOLCORD_STATE_DIR", state.as_str()), ("RUST_LOG", "warn")],
        );
        let status = pair.wait(Duration::from_secs(20));
        let text = format!("{}{}", pair.stdout(), pair.stderr());
        (status.code().unwrap_or(-1), text)
    })
    .await
}

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

#[test]
fn pairing_code_is_approved_by_the_cli_while_the_bridge_runs() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;

        let (_, dm) = rig.sim.send_dm(STRANGER, "stranger", "let me in");
        let offer = rig.message_containing(dm, "smolcord pair ", T).await;
        let code = code_in(&offer.content);
        assert_eq!(code.len(), 8);
        // Nothing else is disclosed: no ids, no names.
        for secret in [OWNER.to_string(), ALICE.to_string(), "smolbot".into()] {
            assert!(!offer.content.contains(&secret), "{}", offer.content);
        }
        let book: PairingFile = serde_json::from_value(rig.json("pairing.json").unwrap()).unwrap();
        assert_eq!(book.codes.len(), 1);
        assert_eq!(book.codes[0].user_id, Snowflake::new(STRANGER));
        assert_eq!(line_count(&calls), 0, "a stranger reached the agent");

        // The operator approves (any case, dashes allowed) while the bridge runs.
        let typed = format!("{}-{}", &code[..4], code[4..].to_lowercase());
        let (status, out) = pair_cli(&rig, &typed).await;
        assert_eq!(status, 0, "{out}");
        assert!(out.contains("approved"), "{out}");
        assert!(access(&rig)
            .allowed_user_ids
            .contains(&Snowflake::new(STRANGER)));
        assert!(rig.read("access.json.bak").is_some() || rig.read("access.json").is_some());

        // The running bridge notices by itself and tells the user.
        rig.message_containing(dm, "You have been approved", T)
            .await;
        rig.sim.send_dm(STRANGER, "stranger", "now hello agent");
        rig.message_containing(dm, "now hello agent", T).await;
        assert_eq!(line_count(&calls), 1);
        let counters = bridge.counters.snapshot();
        assert_eq!(counters.pairing_codes_issued, 1);
        assert_eq!(counters.refused, 1);
        let (_, journal) = bridge.stop_and_read_journal(rig.state()).await;
        assert_eq!(
            journal
                .iter()
                .filter(|e| e.kind == "access_refused")
                .count(),
            1
        );
        let all = format!("{journal:?}");
        assert!(!all.contains("let me in"), "{all}");
        // The refusal names whom it refused (to pair or allow them), and
        // nothing of what they wrote.
        let refusal = journal.iter().find(|e| e.kind == "access_refused").unwrap();
        assert_eq!(
            refusal.message,
            format!("message from a user not allowed (user {STRANGER})")
        );
        // The code is used up.
        let book: PairingFile = serde_json::from_value(rig.json("pairing.json").unwrap()).unwrap();
        assert!(book.codes.is_empty(), "{book:?}");
    });
}

#[test]
fn wrong_and_expired_codes_are_refused() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        let mut tunables = tunables();
        tunables.pairing = PairingRules {
            ttl: Duration::from_millis(700),
            reply_interval: Duration::ZERO,
            ..PairingRules::default()
        };
        let bridge = rig.start(&ex, config, tunables).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(STRANGER, "stranger", "hi");
        let code = code_in(
            &rig.message_containing(dm, "smolcord pair ", T)
                .await
                .content,
        );

        let (status, out) = pair_cli(&rig, "WRNGCD23").await;
        assert_eq!(status, 1, "{out}");
        assert!(out.contains("no pending pairing code"), "{out}");
        // It names where it looked: a wrong state dir is the other cause.
        let looked = rig.path("pairing.json");
        assert!(
            out.contains(&format!("looked in {}", looked.display())),
            "{out}"
        );

        // Wait (bounded) for the clock to pass the code's expiry.
        let book: PairingFile = serde_json::from_value(rig.json("pairing.json").unwrap()).unwrap();
        let expires = book.codes[0].expires_unix_ms;
        wait_until("the code to expire", T, || {
            (smolcord_app::status::now_unix_ms() > expires).then_some(())
        })
        .await;
        let (status, out) = pair_cli(&rig, &code).await;
        assert_eq!(status, 1, "{out}");
        assert!(out.contains("expired"), "{out}");
        assert!(!access(&rig)
            .allowed_user_ids
            .contains(&Snowflake::new(STRANGER)));

        // A new DM gets a new code; the stranger still never reaches the agent.
        rig.sim.send_dm(STRANGER, "stranger", "again");
        let messages = rig.messages(dm, 2, T).await;
        let second = code_in(&messages[1].content);
        assert_ne!(second, code);
        assert_eq!(line_count(&calls), 0);
        bridge.stop().await;
    });
}

#[test]
fn pairing_replies_are_rate_limited_and_strangers_never_reach_the_agent() {
    let rig = Rig::new();
    run(Duration::from_secs(40), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        config.intents = Intents::DIRECT_MESSAGES
            .union(Intents::GUILDS)
            .union(Intents::GUILD_MESSAGES)
            .bits();
        let general = smolcord_sim::SimGuild::example().channels[0].id;
        config.channels = vec![smolcord_app::config::ChannelConfig::new(general)];
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(STRANGER, "stranger", "1");
        for n in 2..=5 {
            rig.sim.send_dm(STRANGER, "stranger", &n.to_string());
        }
        // A stranger who mentions the bot in an answered guild channel
        // gets silence, not a code.
        rig.sim
            .post_in_channel(
                &smolcord_sim::ChannelPost::new(general, STRANGER, "stranger", "hello?")
                    .mentioning(),
            )
            .unwrap();
        wait_until("six refusals", T, || {
            (bridge.counters.snapshot().refused >= 6).then_some(())
        })
        .await;
        let replies = rig.sim.messages_in(dm);
        assert_eq!(replies.len(), 1, "one code reply for five DMs: {replies:?}");
        assert!(rig.sim.messages_in(general).is_empty());
        let book: PairingFile = serde_json::from_value(rig.json("pairing.json").unwrap()).unwrap();
        assert_eq!(book.codes.len(), 1, "one live code per user");
        assert_eq!(bridge.counters.snapshot().pairing_codes_issued, 1);
        assert_eq!(line_count(&calls), 0);
        bridge.stop().await;
    });
}

#[test]
fn tofu_makes_the_first_user_the_owner() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.owner_id = None;
        config.allowed_user_ids = Vec::new();
        config.tofu = true;
        config.agent_cmd = Some(echo_agent(&calls));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(BOB, "bob", "first!");
        rig.message_containing(dm, "owner", T).await;
        rig.message_containing(dm, "first!", T).await;
        assert_eq!(access(&rig).owner_id, Some(Snowflake::new(BOB)));
        // The second user is a stranger.
        let (_, other) = rig.sim.send_dm(STRANGER, "stranger", "me too");
        rig.message_containing(other, "smolcord pair ", T).await;
        assert_eq!(line_count(&calls), 1);
        bridge.stop().await;
    });
}

#[test]
fn access_is_restored_from_the_backup_before_any_decision() {
    let rig = Rig::new();
    // A wiped state dir: access.json empty, the backup names the owner.
    let file = AccessFile {
        owner_id: Some(Snowflake::new(OWNER)),
        allowed_user_ids: Default::default(),
    };
    std::fs::write(
        rig.path("access.json.bak"),
        serde_json::to_vec(&file).unwrap(),
    )
    .unwrap();
    std::fs::write(rig.path("access.json"), b"").unwrap();
    run(Duration::from_secs(30), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        // Only the files know the owner; TOFU would hand the bot to the
        // first stranger if the restore rule were missing.
        config.owner_id = None;
        config.allowed_user_ids = Vec::new();
        config.tofu = true;
        config.agent_cmd = Some(echo_agent(&calls));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(STRANGER, "stranger", "am I the owner now?");
        rig.message_containing(dm, "smolcord pair ", T).await;
        assert_eq!(access(&rig), file, "access.json restored from the backup");
        let (_, owner_dm) = rig.sim.send_dm(OWNER, "owner", "owner here");
        rig.message_containing(owner_dm, "owner here", T).await;
        assert_eq!(line_count(&calls), 1);
        bridge.stop().await;
    });
}

#[test]
fn an_approval_is_picked_up_on_reload_and_on_the_next_message() {
    let rig = Rig::new();
    run(Duration::from_secs(30), |ex| async move {
        let calls = rig.path("agent-calls");
        let mut config = rig.config();
        config.agent_cmd = Some(echo_agent(&calls));
        // The results poller (which also watches approvals) stays out of it.
        config.results_poll_ms = 600_000;
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (_, dm) = rig.sim.send_dm(STRANGER, "stranger", "hi");
        let code = code_in(
            &rig.message_containing(dm, "smolcord pair ", T)
                .await
                .content,
        );
        let (status, out) = pair_cli(&rig, &code).await;
        assert_eq!(status, 0, "{out}");
        // SIGHUP's path.
        bridge.reload.reload();
        rig.message_containing(dm, "You have been approved", T)
            .await;

        // And without any reload: a message from a user not (yet) allowed
        // re-reads access.json first.
        let (_, bob_dm) = rig.sim.send_dm(BOB, "bob", "hi");
        let bob_code = code_in(
            &rig.message_containing(bob_dm, "smolcord pair ", T)
                .await
                .content,
        );
        let (status, out) = pair_cli(&rig, &bob_code).await;
        assert_eq!(status, 0, "{out}");
        rig.sim.send_dm(BOB, "bob", "bob for the agent");
        rig.message_containing(bob_dm, "bob for the agent", T).await;
        assert_eq!(line_count(&calls), 1);
        bridge.stop().await;
    });
}
