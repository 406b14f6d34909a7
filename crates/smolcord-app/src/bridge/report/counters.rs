//! What the bridge has done, as counters anyone may read while it runs
//! (the status snapshot, the demo report): the bridge fills the status's
//! [`CountersSnapshot`]. Atomics behind an `Arc`, so a
//! read never waits for the bridge and the handle can cross threads.

use crate::status::CountersSnapshot;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A cheap, cloneable handle on the bridge's counters.
#[derive(Clone, Debug, Default)]
pub struct BridgeCounters {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    messages_handled: AtomicU64,
    replies_delivered: AtomicU64,
    transcriptions: AtomicU64,
    transcription_failures: AtomicU64,
    agent_runs: AtomicU64,
    agent_failures: AtomicU64,
    tasks_spooled: AtomicU64,
    results_delivered: AtomicU64,
    results_malformed: AtomicU64,
    results_rejected: AtomicU64,
    fallbacks_run: AtomicU64,
    undelivered: AtomicU64,
    failures: AtomicU64,
    refused: AtomicU64,
    pairing_codes_issued: AtomicU64,
    replays_skipped: AtomicU64,
    messages_dropped: AtomicU64,
    channel_strangers: AtomicU64,
    guild_messages_skipped: AtomicU64,
    channel_refusals: AtomicU64,
    files_left_out: AtomicU64,
    jobs_peak: AtomicU64,
    safe_mode: AtomicBool,
}

/// Which counter to bump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counter {
    MessagesHandled,
    RepliesDelivered,
    Transcriptions,
    TranscriptionFailures,
    AgentRuns,
    AgentFailures,
    TasksSpooled,
    ResultsDelivered,
    ResultsMalformed,
    ResultsRejected,
    FallbacksRun,
    Undelivered,
    Failures,
    Refused,
    PairingCodesIssued,
    ReplaysSkipped,
    MessagesDropped,
    ChannelStrangers,
    GuildMessagesSkipped,
    ChannelRefusals,
    FilesLeftOut,
}

impl BridgeCounters {
    pub(crate) fn bump(&self, counter: Counter) {
        self.bump_by(counter, 1);
    }

    /// Adds `n` to `counter` (several files left out of one reply, say).
    pub(crate) fn bump_by(&self, counter: Counter, n: u64) {
        let i = &self.inner;
        let cell = match counter {
            Counter::MessagesHandled => &i.messages_handled,
            Counter::RepliesDelivered => &i.replies_delivered,
            Counter::Transcriptions => &i.transcriptions,
            Counter::TranscriptionFailures => &i.transcription_failures,
            Counter::AgentRuns => &i.agent_runs,
            Counter::AgentFailures => &i.agent_failures,
            Counter::TasksSpooled => &i.tasks_spooled,
            Counter::ResultsDelivered => &i.results_delivered,
            Counter::ResultsMalformed => &i.results_malformed,
            Counter::ResultsRejected => &i.results_rejected,
            Counter::FallbacksRun => &i.fallbacks_run,
            Counter::Undelivered => &i.undelivered,
            Counter::Failures => &i.failures,
            Counter::Refused => &i.refused,
            Counter::PairingCodesIssued => &i.pairing_codes_issued,
            Counter::ReplaysSkipped => &i.replays_skipped,
            Counter::MessagesDropped => &i.messages_dropped,
            Counter::ChannelStrangers => &i.channel_strangers,
            Counter::GuildMessagesSkipped => &i.guild_messages_skipped,
            Counter::ChannelRefusals => &i.channel_refusals,
            Counter::FilesLeftOut => &i.files_left_out,
        };
        cell.fetch_add(n, Ordering::Relaxed);
    }

    /// Notes how many jobs are queued or being handled now.
    pub(crate) fn jobs_now(&self, jobs: usize) {
        self.inner
            .jobs_peak
            .fetch_max(jobs as u64, Ordering::Relaxed);
    }

    pub(crate) fn set_safe_mode(&self, on: bool) {
        self.inner.safe_mode.store(on, Ordering::Relaxed);
    }

    /// The counters now (what the status snapshot shows, see
    /// [`crate::status::StatusSnapshot::capture`]).
    pub fn snapshot(&self) -> CountersSnapshot {
        let i = &self.inner;
        let get = |cell: &AtomicU64| cell.load(Ordering::Relaxed);
        CountersSnapshot {
            messages_handled: get(&i.messages_handled),
            replies_delivered: get(&i.replies_delivered),
            transcriptions: get(&i.transcriptions),
            transcription_failures: get(&i.transcription_failures),
            agent_runs: get(&i.agent_runs),
            agent_failures: get(&i.agent_failures),
            tasks_spooled: get(&i.tasks_spooled),
            results_delivered: get(&i.results_delivered),
            results_malformed: get(&i.results_malformed),
            results_rejected: get(&i.results_rejected),
            fallbacks_run: get(&i.fallbacks_run),
            undelivered: get(&i.undelivered),
            failures: get(&i.failures),
            refused: get(&i.refused),
            pairing_codes_issued: get(&i.pairing_codes_issued),
            replays_skipped: get(&i.replays_skipped),
            messages_dropped: get(&i.messages_dropped),
            channel_strangers: get(&i.channel_strangers),
            guild_messages_skipped: get(&i.guild_messages_skipped),
            channel_refusals: get(&i.channel_refusals),
            files_left_out: get(&i.files_left_out),
            jobs_peak: get(&i.jobs_peak),
            safe_mode: i.safe_mode.load(Ordering::Relaxed),
        }
    }
}

impl Serialize for BridgeCounters {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.snapshot().serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_counter_has_one_label() {
        let counters = BridgeCounters::default();
        for counter in [
            Counter::MessagesHandled,
            Counter::RepliesDelivered,
            Counter::Transcriptions,
            Counter::TranscriptionFailures,
            Counter::AgentRuns,
            Counter::AgentFailures,
            Counter::TasksSpooled,
            Counter::ResultsDelivered,
            Counter::ResultsMalformed,
            Counter::ResultsRejected,
            Counter::FallbacksRun,
            Counter::Undelivered,
            Counter::Failures,
            Counter::Refused,
            Counter::PairingCodesIssued,
            Counter::ReplaysSkipped,
            Counter::MessagesDropped,
            Counter::ChannelStrangers,
            Counter::GuildMessagesSkipped,
            Counter::ChannelRefusals,
            Counter::FilesLeftOut,
        ] {
            let before = counters.snapshot().labelled();
            counters.bump(counter);
            let after = counters.snapshot().labelled();
            let changed: Vec<_> = before
                .iter()
                .zip(&after)
                .filter(|(b, a)| b != a)
                .map(|(_, (label, _))| *label)
                .collect();
            assert_eq!(changed.len(), 1, "{counter:?} moves {changed:?}");
        }
        counters.jobs_now(3);
        assert!(counters
            .snapshot()
            .labelled()
            .contains(&("most at once", 3)));
        // The JSON form has one more field, the safe_mode flag.
        let json = serde_json::to_value(counters.snapshot()).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 23);
        let back: CountersSnapshot = serde_json::from_value(json).unwrap();
        assert_eq!(back, counters.snapshot());
    }
}
