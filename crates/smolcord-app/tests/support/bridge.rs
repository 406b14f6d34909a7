//! The bridge's rig: a simulator on 127.0.0.1, a temp state dir, a shard
//! and a bridge on one local executor, and bounded waits on what the
//! simulator saw.

use smol::channel::Sender;
use smol::{LocalExecutor, Task};
use smolcord::protocol::{Intents, Snowflake};
use smolcord::rest::RestClient;
use smolcord::shard::{Backoff, Shard, ShardConfig, ShardHandle};
use smolcord::token::Token;
use smolcord_app::bridge::{self, Bridge, BridgeCounters, BridgeError, BridgeOutcome, Tunables};
use smolcord_app::config::Config;
use smolcord_app::recorder::{journal_path, read_journal, JournalEntry, Recorder, RecorderConfig};
use smolcord_sim::{BotMessage, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use super::logs;
use super::wait::{block_within, wait_until};

pub const OWNER: u64 = 1_200_000_000_000_000_010;
pub const ALICE: u64 = 1_200_000_000_000_000_011;
pub const STRANGER: u64 = 1_200_000_000_000_000_012;
pub const BOB: u64 = 1_200_000_000_000_000_013;

/// Runs a test body on a local executor (logs captured) with a hard bound.
pub fn run<T>(limit: Duration, body: impl FnOnce(Rc<LocalExecutor<'static>>) -> T) -> T::Output
where
    T: Future,
{
    logs::capture();
    let ex = Rc::new(LocalExecutor::new());
    let fut = body(ex.clone());
    block_within(limit, ex.run(fut))
}

pub struct Rig {
    pub sim: Simulator,
    pub dir: tempfile::TempDir,
}

pub struct Running {
    pub stop: Sender<()>,
    pub outcome: Task<Result<BridgeOutcome, BridgeError>>,
    pub counters: BridgeCounters,
    pub shard: ShardHandle,
    pub reload: bridge::ReloadHandle,
    pub safe_mode: bool,
    pub recorder: Recorder,
}

impl Running {
    /// Stops the bridge and the shard; returns the outcome.
    pub async fn stop(self) -> BridgeOutcome {
        let _ = self.stop.try_send(());
        let outcome = self.outcome.await.expect("bridge run");
        self.shard.shutdown();
        outcome
    }

    /// Stops the bridge, drains the recorder, and reads the failure journal.
    pub async fn stop_and_read_journal(
        self,
        state_dir: &Path,
    ) -> (BridgeOutcome, Vec<JournalEntry>) {
        let recorder = self.recorder.clone();
        let outcome = self.stop().await;
        assert_eq!(recorder.shutdown(Duration::from_secs(2)).await, 0);
        let journal = read_journal(&journal_path(state_dir))
            .await
            .expect("journal");
        (outcome, journal.entries)
    }

    /// Waits for the bridge to end by itself (e.g. `!restart`).
    pub async fn finished(self) -> BridgeOutcome {
        let outcome = self.outcome.await.expect("bridge run");
        self.shard.shutdown();
        outcome
    }
}

/// Fast tunables for tests.
pub fn tunables() -> Tunables {
    Tunables {
        typing_interval: Duration::from_millis(300),
        placeholder_after: None,
        drain_timeout: Duration::from_secs(2),
        save_timeout: Duration::from_secs(2),
        directory_debounce: Duration::from_millis(50),
        runtime_debounce: Duration::from_millis(20),
        ..Tunables::default()
    }
}

impl Rig {
    pub fn new() -> Rig {
        Rig::with_sim(SimConfig {
            heartbeat_interval: Duration::from_millis(500),
            ..SimConfig::default()
        })
    }

    pub fn with_sim(config: SimConfig) -> Rig {
        Rig {
            sim: Simulator::start(config).expect("simulator"),
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn state(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// A config for this rig: sim URLs, owner OWNER, allowed ALICE, fast poll.
    pub fn config(&self) -> Config {
        let mut config = Config::with_state_dir(self.dir.path());
        config.gateway_url = Some(self.sim.gateway_url());
        config.api_base = self.sim.api_base();
        config.owner_id = Some(OWNER.to_string());
        config.allowed_user_ids = vec![ALICE.to_string()];
        config.results_poll_ms = 50;
        config.agent_timeout_s = 10;
        config.transcribe_timeout_s = 5;
        config.dm_fallback_timeout_s = 5;
        config
    }

    pub fn token() -> Token {
        Token::new(DEFAULT_SIM_TOKEN).expect("token")
    }

    pub fn rest(&self) -> RestClient {
        RestClient::new(&self.sim.api_base(), Rig::token())
    }

    /// Starts shard + bridge with `config` and `tunables`.
    pub async fn start(
        &self,
        ex: &Rc<LocalExecutor<'static>>,
        config: Config,
        tunables: Tunables,
    ) -> Running {
        let recorder = Recorder::new(RecorderConfig::in_state_dir(&config.state_dir));
        self.start_with_recorder(ex, config, tunables, recorder)
            .await
    }

    /// [`Rig::start`] with a given failure recorder.
    pub async fn start_with_recorder(
        &self,
        ex: &Rc<LocalExecutor<'static>>,
        config: Config,
        tunables: Tunables,
        recorder: Recorder,
    ) -> Running {
        let intents = config.gateway_intents();
        let mut shard_config = ShardConfig::new(Rig::token(), intents);
        shard_config.gateway_url = config.gateway_url.clone();
        shard_config.state = bridge::load_session_state(&config.state_dir).await;
        shard_config.backoff = Backoff::default();
        let (shard, handle) = Shard::new(shard_config);
        ex.spawn(async move {
            let _ = shard.run().await;
        })
        .detach();
        let rest = RestClient::new(&config.api_base, Rig::token());
        let bridge = Bridge::start_with(config, rest, handle.clone(), recorder.clone(), tunables)
            .await
            .expect("bridge start");
        let counters = bridge.counters();
        let reload = bridge.reload_handle();
        let safe_mode = bridge.safe_mode();
        let (stop, stopped) = smol::channel::bounded::<()>(1);
        let outcome = ex.spawn(bridge.run(async move {
            let _ = stopped.recv().await;
        }));
        Running {
            stop,
            outcome,
            counters,
            shard: handle,
            reload,
            safe_mode,
            recorder,
        }
    }

    /// Waits until the bot has at least `n` messages in `channel`.
    pub async fn messages(&self, channel: Snowflake, n: usize, limit: Duration) -> Vec<BotMessage> {
        let what = format!("{n} bot message(s) in channel {channel}");
        wait_until(&what, limit, || {
            let got = self.sim.messages_in(channel);
            (got.len() >= n).then_some(got)
        })
        .await
    }

    /// Waits for a bot message in `channel` containing `needle`.
    pub async fn message_containing(
        &self,
        channel: Snowflake,
        needle: &str,
        limit: Duration,
    ) -> BotMessage {
        let what = format!("a bot message containing {needle:?} in channel {channel}");
        wait_until(&what, limit, || {
            self.sim
                .messages_in(channel)
                .into_iter()
                .find(|m| m.content.contains(needle))
        })
        .await
    }

    /// Waits until the bridge's shard has a live session (READY or RESUMED).
    /// Waits for a gateway session and for the bridge to have saved it. The
    /// simulator reports a session when the Identify or Resume arrives; a
    /// test that stops the bridge right after must still find the session
    /// on disk to resume (under load READY could still be on its way).
    pub async fn session_ready(&self, limit: Duration) -> SimEvent {
        let event = self
            .sim
            .wait_for(limit, |e| {
                matches!(e, SimEvent::Identified { .. } | SimEvent::Resumed { .. })
            })
            .await
            .expect("a gateway session within the limit");
        let (SimEvent::Identified { session_id, .. } | SimEvent::Resumed { session_id, .. }) =
            &event
        else {
            unreachable!("matched above")
        };
        wait_until("the session saved in session.json", limit, || {
            self.read(bridge::SESSION_FILE)
                .filter(|saved| saved.contains(session_id.as_str()))
        })
        .await;
        event
    }

    /// Waits until the bridge has read `channel`'s history (a read-back
    /// after a fresh session does, for the owner's and allowed users' DM
    /// channels), so a REST fault queued after it hits what the test means.
    pub async fn history_read(&self, channel: Snowflake, limit: Duration) {
        let path = format!("/api/v10/channels/{channel}/messages");
        let what = format!("a read of channel {channel}'s history");
        wait_until(&what, limit, || {
            self.sim
                .rest_requests()
                .iter()
                .any(|r| r.method == "GET" && r.path == path)
                .then_some(())
        })
        .await;
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.path(rel)).ok()
    }

    pub fn json(&self, rel: &str) -> Option<serde_json::Value> {
        self.read(rel)
            .and_then(|text| serde_json::from_str(&text).ok())
    }

    /// Writes a file atomically (temp name, then rename), as an agent must.
    pub fn write_atomic(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        let tmp = path.with_file_name(format!(
            ".{}.tmp",
            path.file_name().unwrap().to_string_lossy()
        ));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    }

    /// Files in a state-dir subdirectory, sorted.
    pub fn files(&self, rel: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(rel))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// An argv running `script` under `sh -c` (extra args become $1...).
pub fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into(), "sh".into()]
}

/// An agent that appends each task (one JSON line) to `log` and answers
/// with the task JSON itself, so a test can see what the agent was given.
pub fn echo_agent(log: &Path) -> Vec<String> {
    sh(&logged_task(log, r#"cat "$task""#))
}

/// A script that keeps its task (stdin) in `$task`, appends it to `log` as
/// one line, runs `answer`, and removes the copy. The line goes in one
/// write: two agents at once (a `tee -a` writes each chunk it reads, so the
/// task and its newline in two) would otherwise interleave their lines.
pub fn logged_task(log: &Path, answer: &str) -> String {
    format!(
        r#"task=$(mktemp) && {{ cat; echo; }} >"$task" && cat "$task" >>'{}' && {answer}; status=$?; rm -f "$task"; exit $status"#,
        log.display()
    )
}

/// Lines in a file (0 if missing).
pub fn line_count(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|text| text.lines().filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0)
}
