//! Reactions (issue 31): with `reactions` configured, a user's message
//! gets one emoji when it is taken and another when it is answered or
//! failed; a slow reaction never delays the reply. Off by default.

use crate::support;

use smolcord::protocol::Snowflake;
use smolcord::rest::Emoji;
use smolcord_app::config::{ChannelConfig, Reactions};
use smolcord_sim::{ChannelPost, RestFault, RestFaultKind, SimGuild};
use std::time::{Duration, Instant};
use support::bridge::*;
use support::wait::wait_until;

const T: Duration = Duration::from_secs(20);

fn general() -> Snowflake {
    SimGuild::example().channels[0].id
}

fn reactions() -> Reactions {
    Reactions {
        taken: Some(Emoji::new("👀").unwrap()),
        done: Some(Emoji::new("✅").unwrap()),
        failed: Some(Emoji::new("⚠️").unwrap()),
    }
}

#[test]
fn taken_then_done_or_failed() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh(
            "read line; case \"$line\" in *fail*) exit 3;; esac; echo fine",
        ));
        config.channels = vec![ChannelConfig::new(general())];
        config.reactions = reactions();
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let ok = rig
            .sim
            .post_in_channel(&ChannelPost::new(general(), ALICE, "alice", "hello").mentioning())
            .unwrap();
        wait_until("taken and done", T, || {
            (rig.sim.reactions_on(general(), ok) == ["👀", "✅"]).then_some(())
        })
        .await;
        // In a DM too, and a failed agent gets the failed emoji.
        let (failing, dm) = rig.sim.send_dm(ALICE, "alice", "please fail");
        wait_until("taken and failed", T, || {
            (rig.sim.reactions_on(dm, failing) == ["👀", "⚠️"]).then_some(())
        })
        .await;
        bridge.stop().await;
    });
}

#[test]
fn a_slow_reaction_never_delays_the_reply() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo fine"));
        config.reactions = reactions();
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        // Every request about one message of the DM (its reactions; the
        // reply is a POST to the channel, not under it) answered 10 s late.
        let dm = rig.sim.dm_channel_of(ALICE);
        rig.sim.rest_fault(RestFault {
            kind: RestFaultKind::Delay(Duration::from_secs(10)),
            count: 10,
            path_prefix: Some(format!("/api/v10/channels/{dm}/messages/")),
        });
        let sent = Instant::now();
        let (asked, _) = rig.sim.send_dm(ALICE, "alice", "hi");
        rig.message_containing(dm, "fine", T).await;
        assert!(
            sent.elapsed() < Duration::from_secs(9),
            "the reply waited for the reaction: {:?}",
            sent.elapsed()
        );
        // The reaction was asked for (it takes effect; its answer is late).
        wait_until("the taken reaction", T, || {
            rig.sim.reactions_on(dm, asked).first().cloned()
        })
        .await;
        bridge.stop().await;
    });
}

#[test]
fn no_reactions_by_default() {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.agent_cmd = Some(sh("cat >/dev/null; echo fine"));
        let bridge = rig.start(&ex, config, tunables()).await;
        rig.session_ready(T).await;
        let (asked, dm) = rig.sim.send_dm(ALICE, "alice", "hi");
        rig.message_containing(dm, "fine", T).await;
        bridge.stop().await;
        assert!(rig.sim.reactions_on(dm, asked).is_empty());
        assert!(!rig
            .sim
            .rest_requests()
            .iter()
            .any(|r| r.path.contains("/reactions/")));
    });
}
