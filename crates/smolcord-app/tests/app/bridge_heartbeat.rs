//! Heartbeats stay on schedule, by the simulator's clock, while the bridge
//! has several 2 s transcriptions and agent runs in flight (issue 6).

use crate::support;

use smolcord_app::bridge::Tunables;
use smolcord_sim::SimConfig;
use std::time::Duration;
use support::bridge::*;

const INTERVAL_MS: u64 = 300;

#[test]
fn heartbeats_stay_on_schedule_through_slow_transcriptions() {
    let rig = Rig::with_sim(SimConfig {
        heartbeat_interval: Duration::from_millis(INTERVAL_MS),
        command_limit: 100_000,
        ..SimConfig::default()
    });
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.allowed_user_ids.push(BOB.to_string());
        config.transcribe_cmd = Some(sh("sleep 2; echo heard a voice note"));
        config.agent_cmd = Some(sh("sleep 1; echo done"));
        config.agent_concurrency = 4;
        let tunables = Tunables {
            transcribe_concurrency: 4,
            ..tunables()
        };
        let bridge = rig.start(&ex, config, tunables).await;
        rig.session_ready(Duration::from_secs(10)).await;
        let beats_before = rig.sim.stats().connections[0].beats.len();
        let mut channels = Vec::new();
        for (user, name) in [(ALICE, "alice"), (OWNER, "owner"), (BOB, "bob")] {
            for _ in 0..2 {
                let note =
                    rig.sim
                        .send_voice_dm(user, name, b"OggS\0x".to_vec(), Duration::from_secs(2));
                channels.push(note.channel_id);
            }
        }
        channels.dedup();
        for channel in &channels {
            rig.messages(*channel, 2, Duration::from_secs(30)).await;
        }
        let counters = bridge.counters.snapshot();
        assert_eq!(counters.transcriptions, 6);
        let shard = bridge.shard.status();
        bridge.stop().await;

        let stats = rig.sim.stats();
        assert_eq!(
            stats.totals.connections, 1,
            "the gateway connection was lost"
        );
        let conn = &stats.connections[0];
        let during: Vec<f64> = conn
            .beats
            .iter()
            .skip(beats_before)
            .map(|b| b.gap_ms)
            .collect();
        assert!(
            during.len() >= 8,
            "only {} beats during the work",
            during.len()
        );
        let worst = during.iter().copied().fold(0.0, f64::max);
        assert!(
            worst < INTERVAL_MS as f64 * 1.5,
            "a {worst:.0} ms gap between beats while transcriptions ran"
        );
        assert_eq!(conn.missed_deadlines, 0);
        let p99 = shard
            .heartbeat
            .lifetime
            .lateness
            .quantile(0.99)
            .expect("beats");
        assert!(
            p99 <= Duration::from_millis(100),
            "client lateness p99 {p99:?}"
        );
    });
}
