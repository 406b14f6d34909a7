//! The reference bot (`crates/smolcord/examples/bot.rs`, written only against the library)
//! runs against the simulator: two shards in one process, both READY, a DM
//! `!ping` answered with `pong`, SIGTERM closes every shard resumably,
//! saves the sessions and exits 0; the next start resumes both and answers
//! the `!ping` sent while it was down.
#![allow(clippy::disallowed_methods)] // waits on a child process

use crate::support;

use smolcord::protocol::Intents;
use smolcord_sim::{SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::process::Command;
use std::time::Duration;
use support::binary::{example, Smolcord};
use support::wait::{sim_saw, wait_until_blocking};

const BOUND: Duration = Duration::from_secs(20);

#[test]
fn the_reference_bot_runs_two_shards_answers_and_stops_cleanly() {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(1000),
        recommended_shards: 2,
        // The bot is told to ask for MESSAGE_CONTENT (its guild `!ping`):
        // as if enabled on the Developer Portal.
        enabled_privileged_intents: Intents::MESSAGE_CONTENT,
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let state = tempfile::tempdir().unwrap();
    let state_file = state.path().join("sessions.json");
    let bot_command = || {
        let mut command = Command::new(example("bot"));
        command
            .env_clear()
            .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
            .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
            .env("SMOLCORD_API_BASE", sim.api_base())
            .env("SMOLCORD_SHARDS", "auto")
            .env("SMOLCORD_BOT_MESSAGE_CONTENT", "1")
            .env("SMOLCORD_BOT_STATE", &state_file);
        command
    };
    let mut bot = Smolcord::start(bot_command());

    let ready = |shard: u32| move |e: &SimEvent| matches!(e, SimEvent::Identified { identify, .. } if identify.shard == Some([shard, 2]));
    for shard in 0..2 {
        sim_saw(
            &sim,
            &format!("shard {shard} identify"),
            BOUND,
            ready(shard),
        );
    }
    let (_, channel) = sim.send_dm(4242, "pinger", "!ping");
    wait_until_blocking("a pong in the DM", BOUND, || {
        sim.messages_in(channel)
            .iter()
            .any(|m| m.content == "pong")
            .then_some(())
    });

    bot.terminate();
    let status = bot.wait(BOUND);
    let stderr = bot.stderr();
    assert!(status.success(), "{status}: {stderr}");
    assert!(stderr.contains("running shards 0..=1 of 2"), "{stderr}");
    // Both shards closed with a resumable code.
    let closes: Vec<_> = sim
        .stats()
        .connections
        .iter()
        .map(|c| c.client_close_code)
        .collect();
    assert_eq!(closes, vec![Some(4000), Some(4000)], "{stderr}");
    assert!(state_file.exists(), "no sessions saved: {stderr}");

    // While it is down: a `!ping` the next start must not miss.
    let (_, channel) = sim.send_dm(4242, "pinger", "!ping");
    let identifies = || {
        sim.events()
            .iter()
            .filter(|e| matches!(e, SimEvent::Identified { .. }))
            .count()
    };
    let identified_before = identifies();
    let mut again = Smolcord::start(bot_command());
    wait_until_blocking("both shards resumed", BOUND, || {
        let resumed = sim
            .events()
            .iter()
            .filter(|e| matches!(e, SimEvent::Resumed { .. }))
            .count();
        (resumed == 2).then_some(())
    });
    wait_until_blocking("the missed !ping answered", BOUND, || {
        (sim.messages_in(channel)
            .iter()
            .filter(|m| m.content == "pong")
            .count()
            == 2)
            .then_some(())
    });
    again.terminate();
    let status = again.wait(BOUND);
    assert!(status.success(), "{status}: {}", again.stderr());
    assert_eq!(
        identifies(),
        identified_before,
        "resumed, not identified afresh"
    );
}
