//! Deadlines: when a record's deadline (or an operation's own limit) fires
//! while its fsync is stalled, the record says so but keeps its capacity
//! slot until the fsync really returns.

use crate::support;

use std::time::{Duration, Instant};

use async_io::Timer;
use smolcord_app::recorder::{read_journal, Admission, FailureKind, Recorder, RecorderConfig};
use support::logs::{serial, warnings_with};
use support::recorder::{failure, place, SinkEvent, StallSink};
use support::wait::wait_until;

#[test]
fn a_record_past_its_deadline_keeps_its_slot_until_its_fsync_returns() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("failures.jsonl");
    let sink = StallSink::new(&path);
    let mut config = RecorderConfig::new(&path);
    config.capacity = 1;
    config.deadline = Duration::from_millis(300);
    config.op_timeout = Duration::from_secs(1); // longer: the deadline fires first
    let recorder = Recorder::with_sink(config, sink.clone());

    smol::block_on(async {
        let admitted_at = Instant::now();
        assert_eq!(
            recorder.record(failure(FailureKind::Agent, 1)),
            Admission::Admitted
        );
        wait_until("the deadline warning", Duration::from_secs(5), || {
            (!warnings_with("passed its 300ms deadline").is_empty()).then_some(())
        })
        .await;
        let fired_after = admitted_at.elapsed();
        assert!(
            fired_after >= Duration::from_millis(290),
            "fired after {fired_after:?}"
        );
        let warning = &warnings_with("passed its 300ms deadline")[0];
        assert!(
            warning.contains("`agent`") && warning.contains("slot stays taken"),
            "{warning}"
        );

        // The deadline has fired; the fsync has not returned: the slot is held.
        assert_eq!(sink.count(SinkEvent::AppendStarted), 1);
        assert_eq!(sink.count(SinkEvent::AppendReturned), 0);
        assert_eq!(recorder.in_flight(), 1);
        Timer::after(Duration::from_millis(300)).await;
        assert_eq!(recorder.in_flight(), 1, "still held well past the deadline");
        assert_eq!(
            recorder.record(failure(FailureKind::Rest, 2)),
            Admission::Dropped,
            "capacity 1 is still taken"
        );

        let opened_at = Instant::now();
        sink.gate.open();
        assert_eq!(recorder.wait_idle(Duration::from_secs(5)).await, 0);
        let returned = sink.times(SinkEvent::AppendReturned);
        assert_eq!(returned.len(), 1);
        assert!(
            returned[0] >= opened_at,
            "the fsync returned only after the stall cleared"
        );

        assert_eq!(
            recorder.record(failure(FailureKind::Rest, 3)),
            Admission::Admitted
        );
        assert_eq!(recorder.wait_idle(Duration::from_secs(5)).await, 0);
        let journal = read_journal(&path).await.expect("read");
        let places: Vec<&str> = journal.entries.iter().map(|e| e.place.as_str()).collect();
        assert_eq!(places, [place(1), place(3)], "the late write still landed");
        let stats = recorder.stats();
        assert_eq!((stats.timed_out, stats.written, stats.dropped), (1, 2, 1));
    });
}

#[test]
fn an_operation_limit_fires_inside_the_deadline_and_still_holds_the_slot() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("failures.jsonl");
    let sink = StallSink::new(&path);
    let mut config = RecorderConfig::new(&path);
    config.deadline = Duration::from_secs(10);
    config.op_timeout = Duration::from_millis(100);
    let recorder = Recorder::with_sink(config, sink.clone());

    smol::block_on(async {
        let admitted_at = Instant::now();
        assert_eq!(
            recorder.record(failure(FailureKind::Delivery, 1)),
            Admission::Admitted
        );
        wait_until(
            "the operation-limit warning",
            Duration::from_secs(5),
            || (!warnings_with("passed its 100ms limit").is_empty()).then_some(()),
        )
        .await;
        let fired_after = admitted_at.elapsed();
        assert!(
            fired_after >= Duration::from_millis(95) && fired_after < Duration::from_secs(5),
            "fired after {fired_after:?} (the deadline is 10 s)"
        );
        assert_eq!(recorder.in_flight(), 1);
        assert_eq!(sink.count(SinkEvent::AppendReturned), 0);

        sink.gate.open();
        assert_eq!(recorder.wait_idle(Duration::from_secs(5)).await, 0);
        assert_eq!(sink.count(SinkEvent::AppendReturned), 1);
    });
}
