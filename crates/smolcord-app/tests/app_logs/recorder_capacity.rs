//! Capacity: with the journal stalled, 40 failures at once admit exactly 32
//! and drop 8, each drop warned about by kind only; when the stall clears
//! all 32 land and the next failure is admitted again.

use crate::support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use smolcord_app::recorder::{read_journal, Admission, Recorder, RecorderConfig};
use support::logs::{serial, warnings_with};
use support::recorder::{failure, place, SinkEvent, StallSink, KINDS};
use support::wait::wait_until;

#[test]
fn forty_failures_on_a_stalled_journal_admit_32_drop_8_with_kind_only_warnings() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("failures.jsonl");
    let sink = StallSink::new(&path);
    // Limits far beyond the test: this one is about capacity, not deadlines.
    let mut config = RecorderConfig::new(&path);
    config.deadline = Duration::from_secs(60);
    config.op_timeout = Duration::from_secs(60);
    assert_eq!(config.capacity, 32, "the default capacity");
    let recorder = Recorder::with_sink(config, sink.clone());

    smol::block_on(async {
        let mut admitted = Vec::new();
        let mut dropped = Vec::new();
        let mut slowest = Duration::ZERO;
        for n in 0..40 {
            let started = Instant::now();
            let kind = KINDS[n % KINDS.len()];
            match recorder.record(failure(kind, n)) {
                Admission::Admitted => admitted.push(n),
                Admission::Dropped => dropped.push((n, kind)),
            }
            slowest = slowest.max(started.elapsed());
        }
        assert_eq!(admitted, (0..32).collect::<Vec<_>>());
        assert_eq!(dropped.len(), 8);
        // Each call returned at once even though nothing could be written.
        assert!(
            slowest < Duration::from_millis(50),
            "slowest record() {slowest:?}"
        );
        eprintln!("slowest of 40 record() calls on a stalled journal: {slowest:?}");

        let drops = warnings_with("dropped");
        assert_eq!(drops.len(), 8, "{drops:#?}");
        for (warning, (_, kind)) in drops.iter().zip(&dropped) {
            assert!(warning.contains(&format!("`{kind}`")), "{warning}");
            for secret in [
                "place-",
                "message-",
                "912345678901234567",
                "hunter2",
                "500",
                "53",
            ] {
                assert!(!warning.contains(secret), "{warning:?} shows {secret:?}");
            }
        }

        wait_until("32 stalled appends", Duration::from_secs(10), || {
            (sink.count(SinkEvent::AppendStarted) == 32).then_some(())
        })
        .await;
        assert_eq!(recorder.in_flight(), 32);
        assert_eq!(sink.count(SinkEvent::AppendReturned), 0);
        let before = read_journal(&path).await.expect("read");
        assert!(before.entries.is_empty(), "nothing lands while stalled");

        sink.gate.open();
        assert_eq!(recorder.wait_idle(Duration::from_secs(10)).await, 0);
        let after = read_journal(&path).await.expect("read");
        assert!(after.notices.is_empty(), "{:?}", after.notices);
        let places: BTreeSet<String> = after.entries.iter().map(|e| e.place.clone()).collect();
        assert_eq!(places, admitted.iter().map(|n| place(*n)).collect());

        assert_eq!(recorder.record(failure(KINDS[0], 40)), Admission::Admitted);
        assert_eq!(recorder.wait_idle(Duration::from_secs(10)).await, 0);
        let last = read_journal(&path).await.expect("read");
        assert_eq!(last.entries.len(), 33);
        assert_eq!(last.entries[32].place, place(40));

        let stats = recorder.stats();
        assert_eq!(
            (
                stats.admitted,
                stats.dropped,
                stats.written,
                stats.timed_out
            ),
            (33, 8, 33, 0)
        );
    });
}
