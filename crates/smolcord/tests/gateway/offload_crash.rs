//! Crash safety of atomic writes: a child process writing in a loop is
//! SIGKILLed at random moments; afterwards the file always parses as the
//! last acknowledged value or the one in flight, never a torn mix.
//!
//! The child is this test binary re-executed with an environment variable
//! (integration tests cannot have a second entry point without harness
//! changes); `crash_child_writer` is that entry point, not a test of its own.
// Tests may block: the parent drives the child with std::process.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use smolcord::offload::{self, Fallback};

const CHILD_ENV: &str = "SMOLCORD_OFFLOAD_CRASH_CHILD_PATH";
/// Padding per value: big enough that writing and fsyncing it takes most of
/// a write cycle, so random kills often land mid-write. It is a raw JSON
/// string, copied verbatim when serialising: a debug build would otherwise
/// spend most of the cycle escaping a long string, not writing it.
const PAD_BYTES: usize = 1 << 20;

#[derive(Serialize, Deserialize)]
struct Value {
    seq: u64,
    pad: Box<RawValue>,
    /// Repeats `seq` after the padding: a file stitched from two writes
    /// would disagree with itself.
    seq_again: u64,
}

impl Value {
    fn new(seq: u64, pad: &RawValue) -> Self {
        Value {
            seq,
            pad: pad.to_owned(),
            seq_again: seq,
        }
    }

    fn pad() -> Box<RawValue> {
        RawValue::from_string(format!("\"{}\"", "p".repeat(PAD_BYTES))).expect("valid JSON string")
    }

    fn is_whole(&self) -> bool {
        self.seq == self.seq_again && *self.pad.get() == *Self::pad().get()
    }
}

/// Child entry point: writes ever-increasing values and reports each on stdout.
#[test]
fn crash_child_writer() {
    let Some(path) = std::env::var_os(CHILD_ENV).map(PathBuf::from) else {
        return; // Not the child: nothing to do.
    };
    smol::block_on(async {
        let current: Option<Value> = offload::read_json(&path, Fallback::None)
            .await
            .expect("child: read current value");
        let mut seq = current.map_or(0, |v| v.seq);
        let mut stdout = std::io::stdout();
        let pad = Value::pad();
        loop {
            seq += 1;
            offload::write_json_atomic_with_backup(&path, &Value::new(seq, &pad))
                .await
                .expect("child: write");
            writeln!(stdout, "{seq}")
                .and_then(|()| stdout.flush())
                .expect("child: report");
        }
    });
}

fn temp_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .expect("read_dir")
        .filter(|e| {
            let name = e.as_ref().expect("entry").file_name();
            let name = name.to_string_lossy();
            name.starts_with('.') && name.ends_with(".tmp")
        })
        .count()
}

fn read_value(path: &Path) -> Value {
    smol::block_on(offload::read_json::<Value>(path, Fallback::None))
        .unwrap_or_else(|e| panic!("{} does not parse after a crash: {e}", path.display()))
        .unwrap_or_else(|| panic!("{} is missing after a crash", path.display()))
}

/// Starts the child, lets it acknowledge a few writes, SIGKILLs it at a
/// random moment, and returns the last acknowledged sequence number.
fn run_child_and_kill(path: &Path) -> u64 {
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "offload_crash::crash_child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");

    // Watchdog: a child that stops reporting is killed, so the test cannot hang.
    let pid = child.id();
    let (done, watchdog_wait) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if watchdog_wait.recv_timeout(Duration::from_secs(60)).is_err() {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    });

    let wanted = fastrand::usize(2..=4);
    let mut acked = Vec::new();
    let (mut first_ack, mut last_ack) = (None, Instant::now());
    // Kept open until the kill: a closed pipe would make the child die on
    // its own (EPIPE) instead of at the moment we choose.
    let mut reports = BufReader::new(stdout);
    for line in (&mut reports).lines() {
        let Ok(line) = line else { break };
        // The test harness prints its own lines too; ours are bare numbers.
        if let Ok(seq) = line.trim().parse::<u64>() {
            last_ack = Instant::now();
            first_ack.get_or_insert(last_ack);
            acked.push(seq);
            if acked.len() >= wanted {
                break;
            }
        }
    }
    // Land anywhere in the next write cycle: serialising, backing up,
    // writing, fsyncing, renaming.
    let cycle = first_ack.map_or(Duration::ZERO, |f| last_ack - f) / (wanted as u32 - 1).max(1);
    std::thread::sleep(cycle.mul_f64(fastrand::f64()));
    child.kill().expect("SIGKILL child");
    child.wait().expect("reap child");
    // Acks written while we slept are still in the pipe: the last one read
    // is the real "last acknowledged" write.
    for line in (&mut reports).lines() {
        let Ok(line) = line else { break };
        if let Ok(seq) = line.trim().parse::<u64>() {
            acked.push(seq);
        }
    }
    drop(reports);
    let _ = done.send(());
    watchdog.join().expect("watchdog");
    *acked
        .last()
        .expect("the child acknowledged no write (see its stderr above)")
}

#[test]
fn sigkill_mid_write_leaves_the_old_or_the_new_value() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    let bak = dir.path().join("state.json.bak");
    let (mut rounds, mut mid_write_kills) = (0, 0);
    // At least 10 rounds, and enough that 3 kills provably landed mid-write
    // (a leftover temp file shows one did), else the test proves nothing.
    while rounds < 10 || (mid_write_kills < 3 && rounds < 60) {
        rounds += 1;
        let temps_before = temp_files(dir.path());
        let acked = run_child_and_kill(&path);
        if temp_files(dir.path()) > temps_before {
            mid_write_kills += 1;
        }

        let value = read_value(&path);
        assert!(
            value.seq == acked || value.seq == acked + 1,
            "round {rounds}: seq {} is neither the acknowledged {acked} nor the next",
            value.seq
        );
        assert!(
            value.is_whole(),
            "round {rounds}: value {} is torn",
            value.seq
        );
        let backup = read_value(&bak);
        assert!(
            backup.is_whole(),
            "round {rounds}: backup {} is torn",
            backup.seq
        );
        assert!(
            backup.seq <= value.seq,
            "round {rounds}: backup is newer than the file"
        );
    }
    assert!(
        mid_write_kills >= 3,
        "only {mid_write_kills} of {rounds} kills landed mid-write"
    );
    eprintln!("{rounds} rounds, {mid_write_kills} kills mid-write");
}
