//! Many processes, one identify queue: two reference bots
//! (`crates/smolcord/examples/bot.rs`) of 8 shards each (0-7/16 and 8-15/16) share the
//! simulator's gateway-queue stand-in (`GET /queue?shard=N`, one answer per
//! `max_concurrency` bucket per window) and never identify twice in one
//! bucket's window — the simulator enforces Discord's rate (op 9 when too
//! early) and counts every too early Identify. Each process on its own
//! queue would collide: both would start bucket 0 at once.
#![allow(clippy::disallowed_methods)] // starts and waits on child processes

use crate::support;

use smolcord_sim::{SessionStartLimit, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::Duration;
use support::binary::{example, Smolcord};

/// Shortened from Discord's 5 s; the simulator's slack (a tenth) is then
/// 200 ms, more than a loaded CI core delays one Identify against the next.
const WINDOW: Duration = Duration::from_secs(2);
/// All 16 need 3 windows after the first (4 buckets); the rest is room.
const BOUND: Duration = Duration::from_secs(30);

/// The reference bot on `shards` (`FIRST-LAST/COUNT`), asking `queue` before
/// each identify when given.
fn bot(sim: &Simulator, shards: &str, queue: Option<&str>) -> Smolcord {
    let mut command = Command::new(example("bot"));
    command
        .env_clear()
        .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
        .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
        .env("SMOLCORD_API_BASE", sim.api_base())
        .env("SMOLCORD_SHARDS", shards)
        // The simulator's window, for the bot's own floor between two
        // identifies of a bucket.
        .env(
            "SMOLCORD_IDENTIFY_WINDOW_MS",
            WINDOW.as_millis().to_string(),
        )
        // The remote queue says at debug level when a shard may identify.
        .env("RUST_LOG", "info,smolcord::shard::identify_queue=debug");
    if let Some(url) = queue {
        command.env("SMOLCORD_IDENTIFY_QUEUE_URL", url);
    }
    Smolcord::start(command)
}

/// The shards the queue let through, from a bot's log.
fn queued_shards(stderr: &str) -> BTreeSet<u32> {
    stderr
        .lines()
        .filter_map(|line| {
            let rest = line.split("identify queue: shard ").nth(1)?;
            let (id, tail) = rest.split_once(' ')?;
            tail.starts_with("may identify").then(|| id.parse().ok())?
        })
        .collect()
}

#[test]
fn two_processes_on_one_gateway_queue_never_identify_twice_in_a_bucket_window() {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(1000),
        command_limit: 100_000,
        enforce_identify_concurrency: true,
        identify_window: WINDOW,
        recommended_shards: 16,
        session_start_limit: SessionStartLimit {
            max_concurrency: 4,
            ..SessionStartLimit::default()
        },
        ..SimConfig::default()
    })
    .expect("simulator starts");
    let queue = sim.identify_queue_url();
    let events = sim.subscribe();
    let mut bots = [
        bot(&sim, "0-7/16", Some(&queue)),
        bot(&sim, "8-15/16", Some(&queue)),
    ];

    let mut ready = BTreeSet::new();
    let all_ready = smol::block_on(smolcord_sim::next_matching(&events, BOUND, |event| {
        if let SimEvent::Identified { identify, .. } = event {
            ready.extend(identify.shard.map(|[id, _]| id));
        }
        ready.len() == 16
    }));
    let totals = sim.stats().totals;
    let logs = || {
        format!(
            "\n--- bot 0-7:\n{}\n--- bot 8-15:\n{}",
            bots[0].stderr(),
            bots[1].stderr()
        )
    };
    assert!(
        all_ready.is_some(),
        "READY for shards {ready:?} only within {BOUND:?}; {totals:?}{}",
        logs()
    );
    assert_eq!(
        (totals.identifies_too_early, totals.invalid_sessions),
        (0, 0),
        "two identifies of one bucket within {WINDOW:?} (too early, op 9); shortest gap {:?} ms{}",
        totals.min_identify_gap_ms,
        logs()
    );
    assert_eq!(totals.sessions_started, 16, "{totals:?}");
    assert_eq!(
        totals.identifies_by_bucket,
        BTreeMap::from([(0, 4), (1, 4), (2, 4), (3, 4)]),
        "{totals:?}"
    );
    // Each process went through the queue for every one of its shards.
    assert_eq!(
        queued_shards(&bots[0].stderr()),
        (0..8).collect(),
        "{}",
        logs()
    );
    assert_eq!(
        queued_shards(&bots[1].stderr()),
        (8..16).collect(),
        "{}",
        logs()
    );

    for bot in &bots {
        bot.terminate();
    }
    for bot in &mut bots {
        let status = bot.wait(BOUND);
        assert!(status.success(), "{status}: {}", bot.stderr());
    }
}
