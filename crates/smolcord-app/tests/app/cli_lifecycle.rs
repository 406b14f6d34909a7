//! `smolcord run` as a process: stop signals (one SIGTERM delivered twice
//! is one request; a second one clearly later exits at once), the drain
//! bound the README states, and the start-up token check (a REST 401 stops
//! the bridge with exit 78 whatever the gateway does; an outage does not).
#![allow(clippy::disallowed_methods)] // a test may wait on a child process

use crate::support;

use rustix::process::{kill_process, Signal};
use smolcord_sim::{RestFault, RestFaultKind, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::path::Path;
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use support::binary::Smolcord;
use support::wait::{sim_saw, wait_until_blocking};

const BOUND: Duration = Duration::from_secs(20);
const ALICE: u64 = 42;

/// A running `smolcord run`.
struct Bot(Smolcord);

impl Bot {
    fn start(sim: &Simulator, api_base: &str, state: &Path, agent: Option<&str>) -> Bot {
        let mut config = serde_json::json!({"allowed_user_ids": [ALICE.to_string()]});
        if let Some(script) = agent {
            config["agent_cmd"] = serde_json::json!(["/bin/sh", "-c", script]);
        }
        std::fs::write(state.join("config.json"), config.to_string()).unwrap();
        Bot(Smolcord::spawn(
            &["run"],
            [
                ("DISCORD_TOKEN", DEFAULT_SIM_TOKEN.to_owned()),
                ("SMOLCORD_GATEWAY_URL", sim.gateway_url()),
                ("SMOLCORD_API_BASE", api_base.to_owned()),
                ("SMOLCORD_STATE_DIR", state.display().to_string()),
                ("RUST_LOG", "info".to_owned()),
            ],
        ))
    }

    /// Waits for a stderr line containing `needle`.
    fn wait_line(&mut self, needle: &str) {
        self.0.wait_for_stderr(needle, BOUND);
    }

    fn signal(&self, signal: Signal) {
        kill_process(self.0.pid(), signal).expect("kill");
    }

    /// The exit status (within `BOUND`) and all of stderr.
    fn exit(mut self) -> (ExitStatus, String) {
        let status = self.0.wait(BOUND);
        (status, self.0.stderr())
    }
}

fn wait_sim(sim: &Simulator, what: &str, pred: impl FnMut(&SimEvent) -> bool) {
    sim_saw(sim, what, BOUND, pred);
}

/// A bot whose agent is busy (for 30 s) with one of Alice's messages, so a
/// stop has something to drain.
fn busy_bot(sim: &Simulator, state: &Path) -> Bot {
    let started = state.join("agent-started");
    let script = format!("echo x > '{}'; cat >/dev/null; sleep 30", started.display());
    let bot = Bot::start(sim, &sim.api_base(), state, Some(&script));
    wait_sim(sim, "an identify", |e| {
        matches!(e, SimEvent::Identified { .. })
    });
    sim.send_dm(ALICE, "alice", "a long job");
    wait_until_blocking("the agent to start", BOUND, || {
        started.exists().then_some(())
    });
    bot
}

#[test]
fn one_sigterm_delivered_twice_back_to_back_exits_0() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let bot = busy_bot(&sim, state.path());
    // What GNU `timeout` does: the child, then its process group.
    bot.signal(Signal::TERM);
    bot.signal(Signal::TERM);
    let (status, stderr) = bot.exit();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("exiting now"), "{stderr}");
}

#[test]
fn a_duplicate_sigterm_arriving_during_the_drain_is_ignored() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut bot = busy_bot(&sim, state.path());
    // Back-to-back signals may merge in the kernel; this one is surely
    // seen separately: the first has been acted on, the drain is running.
    bot.signal(Signal::TERM);
    bot.wait_line("stopping: draining");
    bot.signal(Signal::TERM);
    let (status, stderr) = bot.exit();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("unfinished after"), "{stderr}");
}

#[test]
fn a_second_stop_clearly_later_exits_at_once() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut bot = busy_bot(&sim, state.path());
    bot.signal(Signal::INT);
    bot.wait_line("stopping: draining");
    // Past the duplicate window (500 ms), inside the 2 s drain.
    std::thread::sleep(Duration::from_millis(800));
    bot.signal(Signal::INT);
    let (status, stderr) = bot.exit();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("second stop signal"), "{stderr}");
}

#[test]
fn the_sigterm_drain_is_bounded_by_the_readme_figure() {
    let drain = smolcord_app::bridge::DRAIN_BOUND;
    let readme = std::fs::read_to_string(smolcord_testkit::repo_root().join("README.md"))
        .expect("README.md");
    let promise = format!("drain (at most {} s)", drain.as_secs());
    assert!(readme.contains(&promise), "the README must say {promise:?}");

    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let bot = busy_bot(&sim, state.path());
    let stopping = Instant::now();
    bot.signal(Signal::TERM);
    let (status, stderr) = bot.exit();
    let took = stopping.elapsed();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("unfinished after {:.1} s", drain.as_secs_f64())),
        "{stderr}"
    );
    // The agent never finishes: the drain runs its full bound, then the
    // final save and the gateway close (milliseconds here).
    assert!(
        took < drain + Duration::from_millis(2500),
        "SIGTERM to exit took {took:?}"
    );
}

#[test]
fn a_token_the_rest_api_refuses_exits_78_whatever_the_gateway_does() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    // The gateway accepts the token (never a 4004); REST says 401.
    sim.rest_fault(RestFault {
        kind: RestFaultKind::Unauthorized,
        count: u32::MAX,
        path_prefix: None,
    });
    let state = tempfile::tempdir().unwrap();
    let bot = Bot::start(&sim, &sim.api_base(), state.path(), None);
    let (status, stderr) = bot.exit();
    assert_eq!(status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("smolcord: Discord's REST API refused the token")
            && stderr.contains("authentication failed (HTTP 401")
            && stderr.contains("DISCORD_TOKEN"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(DEFAULT_SIM_TOKEN),
        "the token leaked: {stderr}"
    );
}

#[test]
fn a_rest_outage_at_the_token_check_does_not_stop_the_bot() {
    let sim = Simulator::start(SimConfig::default()).unwrap();
    let state = tempfile::tempdir().unwrap();
    // Nothing listens there: every REST call fails to connect.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api_base = format!("http://{}/api/v10", closed.local_addr().unwrap());
    drop(closed);
    let mut bot = Bot::start(&sim, &api_base, state.path(), None);
    bot.wait_line("token check: could not ask");
    wait_sim(&sim, "an identify", |e| {
        matches!(e, SimEvent::Identified { .. })
    });
    bot.signal(Signal::TERM);
    let (status, stderr) = bot.exit();
    assert_eq!(status.code(), Some(0), "{stderr}");
}
