//! The reference bot (`examples/bot.rs`, written only against the library)
//! runs against the simulator: two shards in one process, both READY, a DM
//! `!ping` answered with `pong`, SIGTERM closes every shard and exits 0.
#![cfg(feature = "sim")]
#![allow(clippy::disallowed_methods)] // waits on a child process

use smolcord::sim::{SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(20);

/// `cargo test` builds the examples next to the test binaries' directory.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let debug = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    debug.join("examples").join(name)
}

#[test]
fn the_reference_bot_runs_two_shards_answers_and_stops_cleanly() {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(1000),
        recommended_shards: 2,
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let mut bot = Command::new(example("bot"))
        .env_clear()
        .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
        .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
        .env("SMOLCORD_API_BASE", sim.api_base())
        .env("SMOLCORD_SHARDS", "auto")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the example bot starts (cargo test builds examples)");

    let ready = |shard: u32| move |e: &SimEvent| matches!(e, SimEvent::Identified { identify, .. } if identify.shard == Some([shard, 2]));
    for shard in 0..2 {
        smol::block_on(sim.wait_for(BOUND, ready(shard)))
            .unwrap_or_else(|| panic!("shard {shard} never identified"));
    }
    let (_, channel) = sim.send_dm(4242, "pinger", "!ping");
    let deadline = Instant::now() + BOUND;
    while !sim.messages_in(channel).iter().any(|m| m.content == "pong") {
        assert!(Instant::now() < deadline, "no pong in the DM");
        std::thread::sleep(Duration::from_millis(20));
    }

    rustix::process::kill_process(
        rustix::process::Pid::from_child(&bot),
        rustix::process::Signal::TERM,
    )
    .expect("SIGTERM");
    let deadline = Instant::now() + BOUND;
    let status = loop {
        if let Some(status) = bot.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "the bot did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = String::from_utf8_lossy(&bot.wait_with_output().unwrap().stderr).into_owned();
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
}
