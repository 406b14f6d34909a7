//! The idle bridge and its health check, as a process against the
//! simulator: heartbeats go by and nothing is written to the state dir;
//! `smolcord status` asks the live process over `status.sock`, and reports
//! a stopped (hung) process unhealthy within its bound, long before a
//! status file written per heartbeat would have gone stale.
#![cfg(target_os = "linux")]
#![allow(clippy::disallowed_methods)] // a test may wait on a child process

use rustix::fs::inotify;
use smolcord_sim::{next_matching, Fault, SimConfig, SimEvent, Simulator, DEFAULT_SIM_TOKEN};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(30);

/// Kills the bridge on every way out (SIGCONT first: it may be stopped).
struct Bridge(Child);

impl Drop for Bridge {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.0);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::CONT);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn command(sim: &Simulator, state: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_smolcord"));
    command
        .env_clear()
        .env("DISCORD_TOKEN", DEFAULT_SIM_TOKEN)
        .env("SMOLCORD_GATEWAY_URL", sim.gateway_url())
        .env("SMOLCORD_API_BASE", sim.api_base())
        .env("SMOLCORD_STATE_DIR", state)
        .env("RUST_LOG", "warn");
    command
}

fn start(sim: &Simulator, state: &Path) -> (Bridge, u64) {
    let child = command(sim, state)
        .arg("run")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("smolcord run starts");
    let bridge = Bridge(child);
    let conn =
        match smol::block_on(sim.wait_for(BOUND, |e| matches!(e, SimEvent::Identified { .. }))) {
            Some(SimEvent::Identified { conn, .. }) => conn,
            other => panic!("no identify within {BOUND:?}: {other:?}"),
        };
    (bridge, conn)
}

fn status(sim: &Simulator, state: &Path) -> (Output, Duration) {
    let started = Instant::now();
    let output = command(sim, state)
        .arg("status")
        .output()
        .expect("smolcord status runs");
    (output, started.elapsed())
}

/// Waits until the simulator has seen `n` more heartbeats on `conn`.
fn beats(sim: &Simulator, conn: u64, n: usize) {
    let events = sim.subscribe();
    for _ in 0..n {
        smol::block_on(next_matching(
            &events,
            BOUND,
            |e| matches!(e, SimEvent::Heartbeat { conn: c, .. } if *c == conn),
        ))
        .expect("a heartbeat within the bound");
    }
}

/// An inotify watch on every directory under `root` for anything that
/// writes: creating, modifying, renaming, deleting, chmod.
fn watch_tree(root: &Path) -> OwnedFd {
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
        .expect("inotify");
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        inotify::add_watch(
            &fd,
            &dir,
            inotify::WatchFlags::CREATE
                | inotify::WatchFlags::MODIFY
                | inotify::WatchFlags::CLOSE_WRITE
                | inotify::WatchFlags::MOVED_TO
                | inotify::WatchFlags::MOVED_FROM
                | inotify::WatchFlags::DELETE
                | inotify::WatchFlags::ATTRIB,
        )
        .expect("watch");
        for entry in std::fs::read_dir(&dir).expect("list") {
            let path: PathBuf = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            }
        }
    }
    fd
}

/// The names in the queued inotify events.
fn written(fd: &OwnedFd) -> Vec<String> {
    let mut names = Vec::new();
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut reader = inotify::Reader::new(fd, &mut buf);
    while let Ok(event) = reader.next() {
        let name = event
            .file_name()
            .map_or_else(|| "?".to_owned(), |n| n.to_string_lossy().into_owned());
        names.push(format!("{name} ({:?})", event.events()));
    }
    names
}

#[test]
fn an_idle_bridge_writes_nothing_while_heartbeats_go_by() {
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: Duration::from_millis(250),
        ..SimConfig::default()
    })
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let (_bridge, conn) = start(&sim, state.path());
    // Start-up writes (runtime, session and status at READY) settle first.
    beats(&sim, conn, 4);
    let watch = watch_tree(state.path());
    beats(&sim, conn, 12);
    let names = written(&watch);
    assert!(
        names.is_empty(),
        "an idle bridge wrote to its state dir during 12 heartbeats: {names:?}"
    );
}

#[test]
fn status_asks_the_live_process_and_calls_a_stopped_one_unhealthy_within_its_bound() {
    // A long interval: a status file written per beat would stay "healthy"
    // for two of them (40 s) after the process stopped.
    let interval = Duration::from_secs(20);
    let sim = Simulator::start(SimConfig {
        heartbeat_interval: interval,
        ..SimConfig::default()
    })
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let (bridge, conn) = start(&sim, state.path());
    // A beat (and its ACK) now rather than after the jittered first one.
    let events = sim.subscribe();
    sim.fault(Fault::RequestHeartbeat);
    smol::block_on(next_matching(
        &events,
        BOUND,
        |e| matches!(e, SimEvent::Heartbeat { conn: c, .. } if *c == conn),
    ))
    .expect("the requested heartbeat");

    // Healthy, from the live process (retry briefly: the ACK is in flight).
    let deadline = Instant::now() + BOUND;
    loop {
        let (output, _) = status(&sim, state.path());
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            assert!(stdout.contains("live answer"), "{stdout}");
            break;
        }
        assert!(Instant::now() < deadline, "never healthy: {stdout}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Hung: SIGSTOP. The check must say so within its bound (3 s), far
    // sooner than two heartbeat intervals.
    let pid = rustix::process::Pid::from_child(&bridge.0);
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).expect("SIGSTOP");
    let (output, took) = status(&sim, state.path());
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("UNHEALTHY") && stdout.contains("no answer"),
        "{stdout}"
    );
    assert!(
        took < interval,
        "a stopped process was reported only after {took:?}"
    );
}
