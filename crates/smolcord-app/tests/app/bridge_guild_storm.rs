//! A storm of GUILD_CREATEs on a fresh session keeps the heartbeat on
//! schedule, and a DM sent right after it is answered (issue 22): each
//! event costs what it carries, not what the channel directory holds, and
//! the directory is serialised once per debounced write, off the loop.

use crate::support;

use serde_json::{json, Value};
use smolcord::protocol::Intents;
use smolcord_sim::SimConfig;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use support::bridge::*;
use support::wait::wait_until;

const INTERVAL_MS: u64 = 1_000;
/// GUILD_CREATEs in the storm...
const GUILDS: u64 = 1_000;
/// ... of this many channels each.
const CHANNELS: u64 = 50;

/// GUILD_CREATE payloads as Discord sends them (the fields the directory
/// reads, and a few it skips).
fn storm() -> Vec<Value> {
    (0..GUILDS)
        .map(|g| {
            let channels: Vec<Value> = (0..CHANNELS)
                .map(|c| {
                    json!({"id": (1_610_000_000_000_000_000 + g * 1_000 + c).to_string(),
                           "type": 0, "name": format!("channel-{c}"), "position": c,
                           "permission_overwrites": [], "nsfw": false})
                })
                .collect();
            json!({"id": (1_600_000_000_000_000_000 + g).to_string(),
                   "name": format!("guild {g}"), "unavailable": false, "large": false,
                   "member_count": 2, "roles": [], "emojis": [], "features": [],
                   "channels": channels, "threads": [], "members": [], "presences": []})
        })
        .collect()
}

#[test]
fn a_guild_create_storm_keeps_the_beat_and_the_dm_after_it_is_answered() {
    let rig = Rig::with_sim(SimConfig {
        heartbeat_interval: Duration::from_millis(INTERVAL_MS),
        command_limit: 100_000,
        ..SimConfig::default()
    });
    let payloads = storm();
    let fed = AtomicBool::new(false);
    let (rig, fed) = (&rig, &fed);
    std::thread::scope(|scope| {
        run(Duration::from_secs(180), |ex| async move {
            let mut config = rig.config();
            config.agent_cmd = Some(sh("cat >/dev/null; echo ok"));
            config.intents = Intents::DIRECT_MESSAGES.union(Intents::GUILDS).bits();
            let bridge = rig.start(&ex, config, tunables()).await;
            rig.session_ready(Duration::from_secs(30)).await;
            // The storm, from a thread of its own as from a gateway: the
            // simulator queues each event as fast as it can.
            scope.spawn(move || {
                for d in payloads {
                    rig.sim.dispatch("GUILD_CREATE", d);
                }
                fed.store(true, Ordering::SeqCst);
            });
            wait_until("the storm queued", Duration::from_secs(60), || {
                fed.load(Ordering::SeqCst).then_some(())
            })
            .await;
            let sent = Instant::now();
            let (_, dm) = rig.sim.send_dm(OWNER, "owner", "after the storm");
            rig.message_containing(dm, "ok", Duration::from_secs(20))
                .await;
            let answered = sent.elapsed();
            // A few beats more: the directory's debounced writes fall inside.
            let beats = rig.sim.stats().connections[0].heartbeats;
            wait_until("3 more beats", Duration::from_secs(30), || {
                (rig.sim.stats().connections[0].heartbeats >= beats + 3).then_some(())
            })
            .await;
            bridge.stop().await;

            let stats = rig.sim.stats();
            assert_eq!(
                stats.totals.connections, 1,
                "the gateway connection was lost"
            );
            let conn = &stats.connections[0];
            // Generous for 2 noisy cores: before the fix, the loop stalled
            // for seconds (each GUILD_CREATE cloned and serialised the
            // whole directory).
            assert!(
                conn.worst_gap_ms < INTERVAL_MS as f64 * 2.0,
                "a {:.0} ms gap between beats during the storm (interval {INTERVAL_MS} ms)",
                conn.worst_gap_ms
            );
            assert_eq!(conn.missed_deadlines, 0);
            assert!(
                answered < Duration::from_secs(10),
                "the DM after the storm took {answered:?}"
            );
            // Nothing lost: every channel is in the directory (written at
            // the latest by the final save), beside the simulator's own
            // guild.
            let file = rig.json("channels.json").expect("channels.json");
            assert_eq!(file["guilds"].as_object().unwrap().len() as u64, GUILDS + 1);
            assert!(file["channels"].as_object().unwrap().len() as u64 >= GUILDS * CHANNELS);
        })
    });
}
