//! The typed sections of the status snapshot: the heartbeat account, the
//! loop stalls and the bridge's counters. The bridge fills
//! [`CountersSnapshot`]; the library's heartbeat account and stall counts
//! are copied in at capture (they serialise but do not read back). Reading
//! is lenient: every field defaults, so a file from an older build still
//! draws, and a section that is not what it should be reads as empty (see
//! `lenient`) rather than making the whole file unreadable.
//!
//! Fields are declared in alphabetical order: these sections used to be
//! written as JSON maps, whose keys sort, and `status.json` keeps the bytes
//! it had (`the_sections_write_what_the_maps_wrote` checks it).

use serde::{Deserialize, Deserializer, Serialize};
use smolcord::heartbeat;
use smolcord::loopwatch::TaskStalls;
use std::time::Duration;

/// The heartbeat account (see [`smolcord::heartbeat::Account`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeartbeatAccount {
    /// Since the process started.
    pub lifetime: Summary,
    /// Since the current session's READY.
    pub session: Summary,
}

/// A heartbeat summary (see [`smolcord::heartbeat::Summary`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Summary {
    /// ACKs matched to a beat.
    pub acks: u64,
    /// Scheduled beats sent.
    pub beats_sent: u64,
    /// Deadlines that passed entirely during a stall.
    pub deadlines_skipped: u64,
    /// Beats later than the warning threshold.
    pub late_warnings: u64,
    /// Lateness distribution.
    pub lateness: HistogramData,
    /// Smallest margin left before a full interval passed without a beat,
    /// ms.
    pub min_slack_ms: Option<f64>,
    /// Extra beats the server asked for (op 1).
    pub requested_beats: u64,
    /// Round-trip distribution.
    pub rtt: HistogramData,
    /// Mean round trip, ms.
    pub rtt_avg_ms: Option<f64>,
    /// Latest round trip, ms.
    pub rtt_latest_ms: Option<f64>,
    /// Recent round trips, ms, newest first.
    pub rtt_recent_ms: Vec<f64>,
    /// Largest gap between two beats, as a fraction of the interval.
    pub worst_gap_ratio: f64,
    /// Zombie verdicts.
    pub zombies: u64,
}

/// A [`smolcord::heartbeat::Histogram`] as the status shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistogramData {
    /// Non-empty buckets.
    pub buckets: Vec<Bucket>,
    /// Samples.
    pub count: u64,
    /// Largest sample, ms.
    pub max_ms: Option<f64>,
    /// Median bucket bound, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile bucket bound, ms.
    pub p99_ms: Option<f64>,
}

/// One non-empty bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Bucket {
    /// Samples in it.
    pub count: u64,
    /// Upper bound in µs; `None` for the last, unbounded bucket.
    pub le_us: Option<u64>,
}

/// Slow polls of one task (see [`smolcord::loopwatch::TaskStalls`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stalls {
    /// How many polls exceeded the threshold.
    pub count: u64,
    /// All of them together, ms.
    pub total_ms: f64,
    /// The longest, ms.
    pub worst_ms: f64,
}

/// The bridge's counters at one point in time (the bridge fills it from
/// its live counters). Reads leniently: a field missing from an older
/// status file reads as 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CountersSnapshot {
    /// Agent runs that failed or timed out.
    pub agent_failures: u64,
    /// Agent command runs.
    pub agent_runs: u64,
    /// Replies a server channel refused for good (403, or the channel is
    /// gone).
    pub channel_refusals: u64,
    /// Messages in an answered server channel that mentioned the bot from
    /// someone not allowed there (nothing is posted); counted in `refused`
    /// too.
    pub channel_strangers: u64,
    /// Failures reported to the recorder.
    pub failures: u64,
    /// DM fallback command runs.
    pub fallbacks_run: u64,
    /// Files an agent left that did not go with its reply (named to the
    /// user instead): over the upload limit, not a regular file, past the
    /// last message, or refused by Discord as too large.
    pub files_left_out: u64,
    /// Server channel messages not taken: the channel is not in
    /// `channels`, or a required mention is missing.
    pub guild_messages_skipped: u64,
    /// The most messages queued or being handled at once in this run.
    pub jobs_peak: u64,
    /// Messages dropped unhandled because the bridge was busy (only from
    /// people it would not answer anyway: strangers, or anyone but the
    /// owner in safe mode); counted in `refused` too.
    pub messages_dropped: u64,
    /// Messages from allowed users taken into handling.
    pub messages_handled: u64,
    /// Pairing codes issued.
    pub pairing_codes_issued: u64,
    /// Messages from people not allowed (or not answered in safe mode).
    pub refused: u64,
    /// Replayed messages skipped (already processed before a restart).
    pub replays_skipped: u64,
    /// Replies and results that reached Discord (one per reply, however many chunks).
    pub replies_delivered: u64,
    /// Spooled results delivered.
    pub results_delivered: u64,
    /// Result files moved aside as malformed.
    pub results_malformed: u64,
    /// Result files refused unread (too large, or not a regular file).
    pub results_rejected: u64,
    /// Whether this run is in safe mode.
    pub safe_mode: bool,
    /// Tasks written to `spool/tasks`.
    pub tasks_spooled: u64,
    /// Voice notes that could not be transcribed.
    pub transcription_failures: u64,
    /// Voice notes transcribed.
    pub transcriptions: u64,
    /// Replies that could not be delivered (archived with the outcome).
    pub undelivered: u64,
}

impl CountersSnapshot {
    /// Every counter with the words `smolcord status` prints for it, in
    /// the order a reader follows a message: taken in, answered, the work
    /// in between, then what went wrong.
    pub fn labelled(&self) -> [(&'static str, u64); 22] {
        [
            ("messages handled", self.messages_handled),
            ("most at once", self.jobs_peak),
            ("strangers refused", self.refused),
            ("dropped while busy", self.messages_dropped),
            ("replies delivered", self.replies_delivered),
            ("replies undelivered", self.undelivered),
            ("voice notes transcribed", self.transcriptions),
            ("transcription failures", self.transcription_failures),
            ("agent runs", self.agent_runs),
            ("agent failures", self.agent_failures),
            ("tasks spooled", self.tasks_spooled),
            ("results delivered", self.results_delivered),
            ("results malformed", self.results_malformed),
            ("results rejected", self.results_rejected),
            ("DM fallbacks run", self.fallbacks_run),
            ("pairing codes issued", self.pairing_codes_issued),
            ("replays skipped", self.replays_skipped),
            ("failures recorded", self.failures),
            ("channel strangers", self.channel_strangers),
            ("guild messages skipped", self.guild_messages_skipped),
            ("channel refusals", self.channel_refusals),
            ("files left out", self.files_left_out),
        ]
    }
}

impl From<&heartbeat::Account> for HeartbeatAccount {
    fn from(account: &heartbeat::Account) -> HeartbeatAccount {
        HeartbeatAccount {
            lifetime: Summary::from(&account.lifetime),
            session: Summary::from(&account.session),
        }
    }
}

impl From<&heartbeat::Summary> for Summary {
    fn from(s: &heartbeat::Summary) -> Summary {
        Summary {
            acks: s.acks,
            beats_sent: s.beats_sent,
            deadlines_skipped: s.deadlines_skipped,
            late_warnings: s.late_warnings,
            lateness: HistogramData::from(&s.lateness),
            min_slack_ms: s.min_slack_ms,
            requested_beats: s.requested_beats,
            rtt: HistogramData::from(&s.rtt),
            rtt_avg_ms: s.rtt_avg_ms,
            rtt_latest_ms: s.rtt_latest_ms,
            rtt_recent_ms: s.rtt_recent_ms.clone(),
            worst_gap_ratio: s.worst_gap_ratio,
            zombies: s.zombies,
        }
    }
}

impl From<&heartbeat::Histogram> for HistogramData {
    /// As the library serialises it: quantiles as bucket bounds, in ms.
    fn from(h: &heartbeat::Histogram) -> HistogramData {
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
        HistogramData {
            buckets: h
                .buckets()
                .filter(|&(_, count)| count > 0)
                .map(|(upper, count)| Bucket {
                    count,
                    le_us: upper.map(|d| d.as_micros() as u64),
                })
                .collect(),
            count: h.count(),
            max_ms: ms((h.count() > 0).then(|| h.max())),
            p50_ms: ms(h.quantile(0.5)),
            p99_ms: ms(h.quantile(0.99)),
        }
    }
}

impl From<TaskStalls> for Stalls {
    fn from(s: TaskStalls) -> Stalls {
        Stalls {
            count: s.count,
            total_ms: s.total_ms,
            worst_ms: s.worst_ms,
        }
    }
}

/// Reads a section, or its default when it is not what it should be (a
/// hand-edited file, another build's): the rest of the file still reads.
pub(crate) fn lenient<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned + Default,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

/// Reads the bridge's counters: none when the section is not an object (a
/// process without a bridge writes `null`), zeros when it is one that does
/// not read.
pub(crate) fn lenient_counters<'de, D>(
    deserializer: D,
) -> Result<Option<CountersSnapshot>, D::Error>
where
    D: Deserializer<'de>,
{
    let value = serde_json::Value::deserialize(deserializer)?;
    if !value.is_object() {
        return Ok(None);
    }
    Ok(Some(
        CountersSnapshot::deserialize(value).unwrap_or_default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use smolcord::heartbeat::Heartbeat;
    use std::time::Instant;

    #[test]
    fn the_sections_write_what_the_maps_wrote() {
        let hello = Instant::now();
        let mut hb = Heartbeat::new(hello, Duration::from_millis(100), 0.0);
        for n in 0..50u32 {
            let sent =
                hello + Duration::from_millis(100) * n + Duration::from_micros(u64::from(n) * 40);
            hb.on_sent(sent);
            hb.on_ack(sent + Duration::from_millis(30 + u64::from(n)));
        }
        hb.on_zombie();
        let account = hb.account();
        let as_map = serde_json::to_value(account).unwrap();
        let typed = HeartbeatAccount::from(account);
        assert_eq!(
            serde_json::to_string_pretty(&typed).unwrap(),
            serde_json::to_string_pretty(&as_map).unwrap()
        );
        assert_eq!(
            serde_json::from_value::<HeartbeatAccount>(as_map).unwrap(),
            typed
        );

        let stalls = TaskStalls {
            count: 2,
            worst_ms: 130.5,
            total_ms: 200.25,
        };
        assert_eq!(
            serde_json::to_string(&Stalls::from(stalls)).unwrap(),
            serde_json::to_value(stalls).unwrap().to_string()
        );

        let counters = CountersSnapshot {
            messages_handled: 3,
            safe_mode: true,
            ..CountersSnapshot::default()
        };
        let as_map = serde_json::to_value(counters).unwrap();
        assert_eq!(as_map.as_object().unwrap().len(), 23);
        assert_eq!(
            serde_json::to_string(&counters).unwrap(),
            as_map.to_string()
        );
    }

    #[test]
    fn a_section_that_does_not_read_reads_as_empty() {
        #[derive(Deserialize)]
        struct File {
            #[serde(default, deserialize_with = "lenient")]
            heartbeat: HeartbeatAccount,
            #[serde(default, deserialize_with = "lenient_counters")]
            bridge: Option<CountersSnapshot>,
        }
        let file: File = serde_json::from_str(r#"{"heartbeat": 7, "bridge": "nonsense"}"#).unwrap();
        assert_eq!(file.heartbeat, HeartbeatAccount::default());
        assert_eq!(file.bridge, None);
        let file: File = serde_json::from_str(r#"{"bridge": {"refused": "many"}}"#).unwrap();
        assert_eq!(file.bridge, Some(CountersSnapshot::default()));
        let file: File = serde_json::from_str("{}").unwrap();
        assert_eq!(file.bridge, None);
    }
}
