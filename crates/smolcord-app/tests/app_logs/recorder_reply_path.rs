//! The response path: recording a failure on a stalled journal does not
//! delay a reply. A stand-in "reply" (build a small body, record a failure,
//! return) is timed with the journal stalled and with recording disabled.
//! The end-to-end variant (the bridge's reply as the simulator's REST side
//! sees it) belongs with the bridge and is added when it is merged.

use crate::support;

use std::time::{Duration, Instant};

use smolcord_app::recorder::{read_journal, Admission, FailureKind, Recorder, RecorderConfig};
use support::logs::serial;
use support::recorder::{failure, SinkEvent, StallSink};
use support::wait::wait_until;

const CALLS: usize = 100;

/// What a reply does around a failure: a little work, a record, return.
fn reply(recorder: &Recorder, n: usize) -> (String, Admission) {
    let body =
        serde_json::json!({ "content": format!("could not deliver result {n}"), "tts": false })
            .to_string();
    let admission = recorder.record(failure(FailureKind::Delivery, n));
    (body, admission)
}

/// Each call's duration, sorted.
fn time_calls(recorder: &Recorder) -> (Vec<Duration>, Vec<Admission>) {
    let mut times = Vec::with_capacity(CALLS);
    let mut admissions = Vec::with_capacity(CALLS);
    for n in 0..CALLS {
        let started = Instant::now();
        let (body, admission) = reply(recorder, n);
        times.push(started.elapsed());
        assert!(
            body.contains(&format!("result {n}")),
            "the reply is unchanged"
        );
        admissions.push(admission);
    }
    times.sort();
    (times, admissions)
}

fn summary(times: &[Duration]) -> String {
    format!(
        "median {:?}, p90 {:?}, max {:?}",
        times[times.len() / 2],
        times[times.len() * 9 / 10],
        times[times.len() - 1]
    )
}

#[test]
fn a_stalled_journal_does_not_delay_the_reply_path() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("failures.jsonl");
    let sink = StallSink::new(&path);
    let mut config = RecorderConfig::new(&path);
    // Room for every call, so each one takes the admitting (costlier) path.
    config.capacity = CALLS;
    config.deadline = Duration::from_secs(60);
    config.op_timeout = Duration::from_secs(60);
    let stalled = Recorder::with_sink(config, sink.clone());
    let disabled = Recorder::disabled();

    let (off, _) = time_calls(&disabled);
    let (on, admissions) = time_calls(&stalled);
    assert!(admissions.iter().all(|a| *a == Admission::Admitted));
    eprintln!("reply, recording disabled:       {}", summary(&off));
    eprintln!("reply, journal stalled (100 in): {}", summary(&on));
    let difference = on[CALLS / 2].saturating_sub(off[CALLS / 2]);
    assert!(
        difference < Duration::from_millis(5),
        "recording added {difference:?} to the median reply"
    );

    smol::block_on(async {
        wait_until("every append stalled", Duration::from_secs(10), || {
            (sink.count(SinkEvent::AppendStarted) == CALLS).then_some(())
        })
        .await;
        assert_eq!(
            sink.count(SinkEvent::AppendReturned),
            0,
            "all replies ran during the stall"
        );
        sink.gate.open();
        assert_eq!(stalled.wait_idle(Duration::from_secs(10)).await, 0);
        let journal = read_journal(&path).await.expect("read");
        assert_eq!(journal.entries.len(), CALLS);
    });
}
