//! The session history after a scripted sequence of gateway faults: every
//! session is recorded with how it started and the cause that ended it, and
//! `smolcord status` draws that timeline.

use crate::support;

use smolcord::shard::{EndReason, ShardError, ShardEvent, ShardHandle, StartKind};
use smolcord_app::chart::Charset;
use smolcord_app::status::{now_unix_ms, StatusSnapshot};
use smolcord_sim::Fault;
use std::time::{Duration, Instant};
use support::shard::*;
use support::wait::*;

const INTERVAL_MS: u64 = 300;

/// Waits for the next heartbeat ACK the shard reports.
async fn acked_beat(handle: &ShardHandle) {
    let _ = wait_shard(handle, SOON, |e| matches!(e, Ok(ShardEvent::Heartbeat(_)))).await;
}

#[test]
fn every_session_ends_with_its_cause() {
    let sim = sim(INTERVAL_MS);
    let mut config = shard_config(&sim);
    // Three identifies: with Discord's 5 s window between them the last
    // waits about 5 s of its 10 s bound, too close on a loaded machine;
    // the pacing is not what this test is about.
    config.identify_window = Duration::from_millis(500);
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        acked_beat(&handle).await;
        let resumes = [
            Fault::Reconnect,
            Fault::InvalidSession(true),
            Fault::Close(4000),
            Fault::DropTcp,
        ];
        for fault in resumes {
            sim.fault(fault);
            wait_dispatch(&handle, "RESUMED").await;
        }
        // A zombie: the next beat goes unanswered.
        acked_beat(&handle).await;
        sim.fault(Fault::DropAcks(1));
        wait_dispatch(&handle, "RESUMED").await;
        for fault in [Fault::InvalidSession(false), Fault::Close(4009)] {
            sim.fault(fault);
            wait_dispatch(&handle, "READY").await;
        }
        sim.fault(Fault::Close(4004));
        let error = wait_shard(&handle, SOON, |e| e.is_err()).await.unwrap_err();
        assert!(
            matches!(error, ShardError::Fatal { code: 4004, .. }),
            "{error:?}"
        );

        let status = handle.status();
        let records: Vec<_> = status.state.history.records().cloned().collect();
        let summary: Vec<(StartKind, Option<EndReason>)> =
            records.iter().map(|r| (r.start, r.end)).collect();
        use EndReason::*;
        use StartKind::*;
        assert_eq!(
            summary,
            [
                (Identify, Some(Reconnect)),
                (Resume, Some(InvalidSession { resumable: true })),
                (Resume, Some(Closed { code: 4000 })),
                (Resume, Some(Dropped)),
                (Resume, Some(Zombie)),
                (Resume, Some(InvalidSession { resumable: false })),
                (Identify, Some(Closed { code: 4009 })),
                (Identify, Some(Closed { code: 4004 })),
            ]
        );
        for record in &records {
            let up = record.up_unix_ms.expect("every session was up");
            let ended = record.ended_unix_ms.expect("every session ended");
            assert!(record.started_unix_ms <= up && up <= ended, "{record:?}");
        }
        assert!(records[0].beats >= 1, "{:?}", records[0]);
        assert!(records[4].beats >= 1, "the zombie's beat: {:?}", records[4]);
        assert!(records[7].end.is_some_and(EndReason::is_fatal));

        // What `smolcord status` draws from it.
        let now = now_unix_ms();
        let text = StatusSnapshot::capture(&status, None).render(now, Charset::Ascii);
        let start = text.find("  gateway sessions").expect("a timeline");
        let timeline: Vec<&str> = text[start..].lines().collect();
        assert_eq!(timeline[0], "  gateway sessions (newest last; 8 of 8 kept)");
        let ends: Vec<&str> = timeline[2..10]
            .iter()
            .map(|line| line[48..].trim())
            .collect();
        assert_eq!(
            ends,
            [
                "op 7 reconnect",
                "op 9 resumable",
                "close 4000 unknown error",
                "dropped (no close frame)",
                "zombie (no ACK)",
                "op 9 not resumable",
                "close 4009 session timed out",
                "fatal 4004 authentication failed",
            ],
            "{text}"
        );
        assert_eq!(
            timeline[10],
            "  flaps: 8 in the last hour, 8 in the last day (any end but a shutdown)"
        );
    });
}

#[test]
fn a_shutdown_ends_the_session_and_is_not_a_flap() {
    let sim = sim(INTERVAL_MS);
    let mut config = shard_config(&sim);
    // Three identifies: with Discord's 5 s window between them the last
    // waits about 5 s of its 10 s bound, too close on a loaded machine;
    // the pacing is not what this test is about.
    config.identify_window = Duration::from_millis(500);
    run_local(config, |handle, _| async move {
        wait_dispatch(&handle, "READY").await;
        acked_beat(&handle).await;
        handle.shutdown();
        let deadline = Instant::now() + SOON;
        let last = loop {
            let history = handle.status().state.history;
            if let Some(last) = history.records().last().filter(|r| !r.is_open()) {
                break last.clone();
            }
            assert!(Instant::now() < deadline, "the session never ended");
            async_io::Timer::after(Duration::from_millis(10)).await;
        };
        assert_eq!(last.start, StartKind::Identify);
        assert_eq!(last.end, Some(EndReason::Shutdown));
        assert!(last.beats >= 1, "{last:?}");
        let history = handle.status().state.history;
        assert_eq!(history.flaps_since(0).count, 0);
    });
}
