//! Shutdown: admission closes at once, the drain is bounded (~2 s), the
//! unfinished count is reported, and the journal is closed only after the
//! drain — never before.

use crate::support;

use std::time::{Duration, Instant};

use async_io::Timer;
use futures_lite::future;
use smolcord_app::recorder::{read_journal, Admission, FailureKind, Recorder, RecorderConfig};
use support::logs::{serial, warnings, warnings_with};
use support::recorder::{failure, place, SinkEvent, StallSink};
use support::wait::wait_until;

#[test]
fn shutdown_with_stalled_records_closes_admission_drains_for_the_bound_then_closes() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("failures.jsonl");
    let sink = StallSink::new(&path);
    let recorder = Recorder::with_sink(RecorderConfig::new(&path), sink.clone());

    smol::block_on(async {
        for n in 0..5 {
            assert_eq!(
                recorder.record(failure(FailureKind::Rest, n)),
                Admission::Admitted
            );
        }
        wait_until("5 stalled appends", Duration::from_secs(5), || {
            (sink.count(SinkEvent::AppendStarted) == 5).then_some(())
        })
        .await;

        let began = Instant::now();
        let late_record = async {
            Timer::after(Duration::from_millis(100)).await;
            recorder.record(failure(FailureKind::Agent, 99))
        };
        let (unfinished, late) = future::zip(
            recorder.shutdown(RecorderConfig::DEFAULT_SHUTDOWN_BOUND),
            late_record,
        )
        .await;
        let took = began.elapsed();

        assert_eq!(
            late,
            Admission::Dropped,
            "admission closed when shutdown began"
        );
        let refused = warnings_with("shutting down");
        assert_eq!(refused.len(), 1);
        assert!(refused[0].contains("`agent`") && !refused[0].contains("place-99"));

        assert!(
            took >= Duration::from_millis(1900) && took < Duration::from_secs(4),
            "drain took {took:?} (bound 2 s)"
        );
        assert_eq!(unfinished, 5);
        let counted = warnings_with("5 record(s) unfinished");
        assert_eq!(counted.len(), 1, "{:#?}", warnings());

        let closed = sink.times(SinkEvent::Closed);
        assert_eq!(closed.len(), 1, "closed once");
        assert!(
            closed[0] >= began + Duration::from_millis(1900),
            "closed {:?} after shutdown began: before the drain ended",
            closed[0] - began
        );
        assert_eq!(sink.count(SinkEvent::AppendReturned), 0);
        assert_eq!(
            recorder.in_flight(),
            5,
            "the stalled records keep their slots"
        );

        sink.gate.open();
        assert_eq!(recorder.wait_idle(Duration::from_secs(5)).await, 0);
    });
}

#[test]
fn shutdown_waits_for_records_that_finish_within_the_bound_and_closes_after_them() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("failures.jsonl");
    let sink = StallSink::new(&path);
    let recorder = Recorder::with_sink(RecorderConfig::new(&path), sink.clone());

    smol::block_on(async {
        for n in 0..3 {
            assert_eq!(
                recorder.record(failure(FailureKind::State, n)),
                Admission::Admitted
            );
        }
        wait_until("3 stalled appends", Duration::from_secs(5), || {
            (sink.count(SinkEvent::AppendStarted) == 3).then_some(())
        })
        .await;

        let began = Instant::now();
        let clear_stall = async {
            Timer::after(Duration::from_millis(200)).await;
            assert!(sink.times(SinkEvent::Closed).is_empty(), "closed mid-drain");
            sink.gate.open();
        };
        let (unfinished, ()) =
            future::zip(recorder.shutdown(Duration::from_secs(2)), clear_stall).await;
        assert_eq!(unfinished, 0);
        assert!(
            began.elapsed() < Duration::from_millis(1800),
            "{:?}",
            began.elapsed()
        );
        assert!(warnings_with("unfinished").is_empty());

        let returned = sink.times(SinkEvent::AppendReturned);
        let closed = sink.times(SinkEvent::Closed);
        assert_eq!((returned.len(), closed.len()), (3, 1));
        assert!(
            returned.iter().all(|r| *r <= closed[0]),
            "closed before a write returned"
        );

        let journal = read_journal(&path).await.expect("read");
        assert_eq!(journal.entries.len(), 3);
    });
}

#[test]
fn the_real_journal_keeps_what_was_admitted_before_shutdown_and_nothing_after() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let recorder = Recorder::new(RecorderConfig::in_state_dir(dir.path().join("state")));

    smol::block_on(async {
        assert_eq!(
            recorder.record(failure(FailureKind::Gateway, 1)),
            Admission::Admitted
        );
        assert_eq!(
            recorder.record(failure(FailureKind::Gateway, 2)),
            Admission::Admitted
        );
        assert_eq!(recorder.shutdown(Duration::from_secs(5)).await, 0);
        assert_eq!(
            recorder.record(failure(FailureKind::Gateway, 3)),
            Admission::Dropped
        );
        // A second shutdown is harmless.
        assert_eq!(recorder.shutdown(Duration::from_millis(10)).await, 0);

        let journal = read_journal(&dir.path().join("state/failures.jsonl"))
            .await
            .expect("read");
        let mut places: Vec<String> = journal.entries.into_iter().map(|e| e.place).collect();
        places.sort();
        assert_eq!(places, [place(1), place(2)]);
    });
}
