//! End to end: with the failure journal's disk stalled, a bridge reply that
//! records a failure reaches the simulator as fast as with recording
//! disabled (issue 7's response-path rule, through the real bridge).

use crate::support;

use smolcord_app::recorder::{journal_path, Recorder, RecorderConfig};
use std::time::{Duration, Instant};
use support::bridge::*;
use support::recorder::{SinkEvent, StallSink};

const MESSAGES: usize = 8;

/// Sends voice notes whose transcription fails (a recorded failure and a
/// plain notice to the user); returns each notice's time to arrive.
fn reply_times(recorder: Recorder) -> Vec<Duration> {
    let rig = Rig::new();
    run(Duration::from_secs(60), |ex| async move {
        let mut config = rig.config();
        config.transcribe_cmd = Some(sh("exit 3"));
        let bridge = rig
            .start_with_recorder(&ex, config, tunables(), recorder)
            .await;
        rig.session_ready(Duration::from_secs(10)).await;
        let mut times = Vec::new();
        let channel = rig.sim.dm_channel_of(ALICE);
        for n in 0..MESSAGES {
            let start = Instant::now();
            rig.sim
                .send_voice_dm(ALICE, "alice", b"OggS\0x".to_vec(), Duration::from_secs(1));
            rig.messages(channel, n + 1, Duration::from_secs(10)).await;
            times.push(start.elapsed());
        }
        assert_eq!(
            bridge.counters.snapshot().transcription_failures,
            MESSAGES as u64
        );
        bridge.stop().await;
        times
    })
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

#[test]
fn a_stalled_journal_does_not_delay_replies() {
    let disabled = median(reply_times(Recorder::disabled()));

    let dir = tempfile::tempdir().unwrap();
    let sink = StallSink::new(&journal_path(dir.path()));
    let recorder = Recorder::with_sink(RecorderConfig::in_state_dir(dir.path()), sink.clone());
    let stalled = median(reply_times(recorder.clone()));
    // Every failure was admitted and is stuck at the "disk".
    assert_eq!(recorder.in_flight(), MESSAGES);
    assert_eq!(sink.count(SinkEvent::AppendReturned), 0);

    // A reply path that waited on the journal would wait out its op
    // timeout (1 s) per reply; half of it leaves room for a loaded machine
    // (a 50 ms bound failed at load 9 on 2 cores).
    let bound = RecorderConfig::DEFAULT_OP_TIMEOUT / 2;
    assert!(
        stalled < disabled + bound,
        "replies took {stalled:?} (median) with the journal stalled, {disabled:?} without recording"
    );
    sink.gate.open();
    smol::block_on(async {
        assert_eq!(recorder.shutdown(Duration::from_secs(5)).await, 0);
    });
    assert_eq!(sink.count(SinkEvent::AppendReturned), MESSAGES);
    println!("reply median: recording disabled {disabled:?}, journal stalled {stalled:?}");
}
