//! Subprocesses on smolcord's runtime leave no thread behind (issue 14, the
//! idle floor): once a burst of commands is over — finished, timed out and
//! abandoned ones — the process has no "async-process" reaper thread and no
//! "async-io" thread, and the blocking pool's threads have retired. Before,
//! the first child started async-process's reaper thread for good, and it
//! kept an async-io `block_on` running, which woke an idle bridge.
//!
//! One test in its own binary: the thread list is the process's.
// Tests may block: they read /proc directly.
#![allow(clippy::disallowed_methods)]

use smol::LocalExecutor;
use smolcord::offload::{run_command, CommandOutput, CommandSpec, Error};
use smolcord::rt::{self, Timer};
use std::time::{Duration, Instant};

/// Generous: CI shares two noisy cores.
const BOUND: Duration = Duration::from_secs(20);

fn spec(script: &str, timeout: Duration) -> CommandSpec {
    CommandSpec::new(vec!["sh".into(), "-c".into(), script.into()], timeout)
}

/// The names of this process's threads.
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .collect()
}

/// Re-checks `check` every 20 ms until it holds; false after [`BOUND`].
/// Waits on `rt::Timer` inside `rt::block_on`, so the wait itself starts
/// no async-io thread.
fn wait_for(mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + BOUND;
    rt::block_on(async {
        while !check() {
            if Instant::now() >= deadline {
                return false;
            }
            Timer::after(Duration::from_millis(20)).await;
        }
        true
    })
}

#[test]
fn a_burst_of_commands_leaves_no_thread_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("pid");
    let ex = LocalExecutor::new();
    rt::block_on(ex.run(async {
        // Eight at once, each with stdin, like the bridge's agents.
        let runs: Vec<_> = (0..8)
            .map(|i| {
                let mut s = spec("sleep 0.2; cat; echo done", BOUND);
                s.stdin = Some(format!("job {i}\n").into_bytes());
                ex.spawn(run_command(s))
            })
            .collect();
        // One that times out and is killed.
        let late = ex.spawn(run_command(spec("sleep 30", Duration::from_millis(300))));
        // One abandoned mid-run: its future is dropped.
        let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
        let abandoned = run_command(spec(&script, BOUND));
        let started = future_or_pidfile(abandoned, &pidfile).await;
        assert!(started, "the abandoned command never started");

        for (i, run) in runs.into_iter().enumerate() {
            let out = run.await.expect("run");
            assert!(out.success(), "{out:?}");
            assert_eq!(out.stdout_text(), format!("job {i}\ndone"));
        }
        let out = late.await.expect("run");
        assert!(out.timed_out, "{out:?}");
    }));

    // The abandoned leader is killed and reaped (no zombie left): its /proc
    // entry goes.
    let leader: u32 = std::fs::read_to_string(&pidfile)
        .expect("pidfile")
        .trim()
        .parse()
        .expect("pid");
    assert!(
        wait_for(|| !std::path::Path::new(&format!("/proc/{leader}")).exists()),
        "the abandoned command's leader {leader} was not reaped"
    );
    // The pool's threads retire 0.5 s after their last job.
    let retired = wait_for(|| !thread_names().iter().any(|n| n.starts_with("blocking")));
    let names = thread_names();
    assert!(retired, "blocking pool threads still alive: {names:?}");
    for helper in ["async-process", "async-io"] {
        assert!(
            !names.iter().any(|n| n == helper),
            "an {helper:?} thread outlived the commands: {names:?}"
        );
    }
}

/// Polls `run` until `pidfile` holds a line (the command started), then
/// drops `run`; false if `run` finished first or nothing came within the
/// bound.
async fn future_or_pidfile(
    run: impl std::future::Future<Output = Result<CommandOutput, Error>>,
    pidfile: &std::path::Path,
) -> bool {
    let deadline = Instant::now() + BOUND;
    let written = async {
        while Instant::now() < deadline {
            if std::fs::read_to_string(pidfile).is_ok_and(|s| s.ends_with('\n')) {
                return true;
            }
            Timer::after(Duration::from_millis(20)).await;
        }
        false
    };
    futures_lite::future::or(async { run.await.map(|_| false).unwrap_or(false) }, written).await
}
