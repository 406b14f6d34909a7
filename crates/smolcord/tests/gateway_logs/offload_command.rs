//! run_command: argv only, stdin, capped output, exit status, environment,
//! and timeouts that take the whole process group down.
// Tests may block: they write fixture files and inspect /proc directly.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use smolcord::offload::{run_command, CommandEnv, CommandOutput, CommandSpec, Error};

fn spec(argv: &[&str], timeout: Duration) -> CommandSpec {
    CommandSpec::new(argv.iter().map(|s| s.to_string()).collect(), timeout)
}

/// On smolcord's runtime, as the bridge runs it (pipes, pidfd and timers
/// on this thread's epoll set).
fn run(spec: CommandSpec) -> Result<CommandOutput, Error> {
    smolcord::rt::block_on(run_command(spec))
}

const SHORT: Duration = Duration::from_secs(20);

/// True once `pid` is gone or a zombie (our PID 1 may not reap orphans, and
/// a zombie runs nothing). Waits up to 10 s.
fn wait_until_dead(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat"));
        // Field 3, after the parenthesised command name, is the state.
        let dead = match &stat {
            Err(_) => true,
            Ok(s) => s
                .rsplit(')')
                .next()
                .map(str::trim_start)
                .is_some_and(|rest| rest.starts_with('Z')),
        };
        if dead {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn pid_from(out: &CommandOutput) -> u32 {
    out.stdout_text()
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in stdout: {out:?}"))
}

#[test]
fn exit_code_signal_and_captured_streams_are_reported() {
    let out = run(spec(&["sh", "-c", "echo out; echo err >&2; exit 3"], SHORT)).expect("run");
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.signal, None);
    assert!(!out.success());
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    assert_eq!(out.stdout_text(), "out");
    assert!(!out.timed_out && !out.stdout_truncated && !out.stderr_truncated);

    let out = run(spec(&["sh", "-c", "kill -9 $$"], SHORT)).expect("run");
    assert_eq!((out.exit_code, out.signal), (None, Some(9)));
    assert!(!out.success());

    let out = run(spec(&["true"], SHORT)).expect("run");
    assert!(out.success(), "{out:?}");
}

#[test]
fn argv_is_passed_verbatim_never_through_a_shell() {
    let nasty = "$(echo pwned); `id` | ; & > /dev/null 'q\" *";
    let out = run(spec(&["printf", "%s", nasty], SHORT)).expect("run");
    assert_eq!(out.stdout, nasty.as_bytes());
}

#[test]
fn stdin_round_trips_through_cat_even_beyond_the_pipe_buffer() {
    // 1 MiB: far more than a pipe holds, so writing stdin and reading stdout
    // must happen at the same time or both sides block for ever.
    let input: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let mut s = spec(&["cat"], SHORT);
    s.stdin = Some(input.clone());
    s.output_cap = 2 << 20;
    let out = run(s).expect("run");
    assert!(out.success(), "{out:?}");
    assert_eq!(out.stdout.len(), input.len());
    assert!(out.stdout == input, "cat echoed the bytes back");
}

#[test]
fn a_child_that_ignores_its_stdin_does_not_deadlock_us() {
    let mut s = spec(&["true"], SHORT);
    s.stdin = Some(vec![b'x'; 4 << 20]);
    let out = run(s).expect("run");
    assert!(out.success(), "{out:?}");
    assert!(!out.timed_out);
}

#[test]
fn output_over_the_cap_is_truncated_reported_and_drained() {
    let mut s = spec(
        &[
            "sh",
            "-c",
            "head -c 300000 /dev/zero; head -c 10 /dev/zero >&2",
        ],
        SHORT,
    );
    s.output_cap = 1000;
    let out = run(s).expect("run");
    assert_eq!(out.stdout.len(), 1000);
    assert!(out.stdout_truncated);
    assert_eq!(out.stderr.len(), 10);
    assert!(!out.stderr_truncated);
    // Exit 0, not SIGPIPE: we kept reading after the cap.
    assert!(out.success(), "{out:?}");
}

#[test]
fn env_add_sets_variables_on_top_of_the_environment_rule() {
    let mut s = spec(&["sh", "-c", "echo \"$SMOLCORD_X:${HOME:+home}\""], SHORT);
    s.env = CommandEnv::InheritWithout(vec!["NOTHING".into()]);
    s.env_add = vec![("SMOLCORD_X".into(), "a b".into())];
    let out = run(s).expect("run");
    assert_eq!(
        out.stdout_text(),
        format!(
            "a b:{}",
            if std::env::var_os("HOME").is_some() {
                "home"
            } else {
                ""
            }
        )
    );
}

#[test]
fn a_stderr_tail_keeps_the_last_line_after_pages_of_noise() {
    let mut s = spec(
        &[
            "sh",
            "-c",
            "seq 1 100000 >&2; echo 'model not found' >&2; exit 3",
        ],
        SHORT,
    );
    s.stderr_tail = Some(64);
    let out = run(s).expect("run");
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.stderr.len(), 64);
    assert!(
        out.stderr.ends_with(b"\n100000\nmodel not found\n"),
        "{out:?}"
    );
    assert!(out.stderr_truncated);
}

#[test]
fn missing_or_non_executable_programs_are_clear_errors_naming_them() {
    let err = run(spec(&["smolcord-no-such-program"], SHORT)).expect_err("missing");
    let msg = err.to_string();
    assert!(
        msg.contains("smolcord-no-such-program") && msg.contains("not found"),
        "{msg}"
    );
    assert_eq!(err.io_kind(), Some(std::io::ErrorKind::NotFound));

    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("not-executable.sh");
    fs::write(&script, "#!/bin/sh\necho hi\n").expect("write");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).expect("chmod");
    let program = script.display().to_string();
    let err = run(spec(&[&program], SHORT)).expect_err("not executable");
    let msg = err.to_string();
    assert!(
        msg.contains(&program) && msg.contains("not executable"),
        "{msg}"
    );

    let err = run(spec(&[], SHORT)).expect_err("empty argv");
    assert!(matches!(err, Error::EmptyArgv), "{err:?}");
}

#[test]
fn env_exactly_gives_the_child_only_those_variables_and_cwd_is_honoured() {
    let mut s = spec(&["env"], SHORT);
    s.env = CommandEnv::Exactly(vec![("SMOLCORD_X".into(), "a b=c".into())]);
    let out = run(s).expect("run");
    assert_eq!(out.stdout_text(), "SMOLCORD_X=a b=c");

    let dir = tempfile::tempdir().expect("tempdir");
    let mut s = spec(&["pwd"], SHORT);
    s.cwd = Some(dir.path().to_path_buf());
    let out = run(s).expect("run");
    let expected = fs::canonicalize(dir.path()).expect("canonicalize");
    assert_eq!(out.stdout_text(), expected.display().to_string());
}

#[test]
fn inherit_without_hides_only_the_named_variables() {
    // PATH is in every test environment: it shows with Inherit, not without.
    let has_path = |out: &str| out.lines().any(|line| line.starts_with("PATH="));
    let out = run(spec(&["/usr/bin/env"], SHORT)).expect("run");
    assert!(has_path(&out.stdout_text()));
    let mut s = spec(&["/usr/bin/env"], SHORT);
    s.env = CommandEnv::InheritWithout(vec!["PATH".into()]);
    let out = run(s).expect("run").stdout_text();
    assert!(!has_path(&out), "{out}");
    assert!(!out.is_empty(), "the rest of the environment is kept");
}

#[test]
fn timeout_kills_the_whole_group_grandchildren_included() {
    // sh prints its background child's pid, then waits on it: both must die.
    let mut s = spec(
        &["sh", "-c", "sleep 30 & echo $!; wait"],
        Duration::from_millis(1500),
    );
    s.kill_grace = Duration::from_secs(2);
    let started = Instant::now();
    let out = run(s).expect("run");
    assert!(out.timed_out, "{out:?}");
    assert!(!out.success());
    assert_eq!(out.signal, Some(15), "sh died of SIGTERM: {out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let grandchild = pid_from(&out);
    assert!(
        wait_until_dead(grandchild),
        "grandchild {grandchild} survived the timeout"
    );
}

#[test]
fn a_group_that_ignores_sigterm_is_sigkilled_after_the_grace() {
    // An ignored signal stays ignored across exec: sleep ignores TERM too.
    let mut s = spec(
        &["sh", "-c", "trap '' TERM; sleep 30 & echo $!; wait"],
        Duration::from_millis(500),
    );
    s.kill_grace = Duration::from_millis(500);
    let started = Instant::now();
    let out = run(s).expect("run");
    let took = started.elapsed();
    assert!(out.timed_out);
    assert_eq!(out.signal, Some(9), "needed SIGKILL: {out:?}");
    assert!(
        took >= Duration::from_millis(1000),
        "grace was honoured: {took:?}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert!(wait_until_dead(pid_from(&out)));
}

#[test]
fn nothing_of_a_finished_command_outlives_it() {
    // The leader exits at once; a background child keeps our stdout open,
    // another has closed it. Neither may linger, and we must not wait for
    // the timeout to notice the command is done.
    let script = "sleep 30 & echo $!; sleep 30 >/dev/null 2>&1 & echo $!";
    let started = Instant::now();
    let out = run(spec(&["sh", "-c", script], Duration::from_secs(30))).expect("run");
    assert!(out.success(), "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let text = out.stdout_text();
    let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(pids.len(), 2, "{text}");
    for pid in pids {
        assert!(
            wait_until_dead(pid),
            "background child {pid} outlived the command"
        );
    }
}

#[test]
fn dropping_the_future_kills_the_group() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pidfile = dir.path().join("pid");
    let script = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
    smol::block_on(async {
        let run = run_command(spec(&["sh", "-c", &script], Duration::from_secs(30)));
        let wait_for_pidfile = async {
            // Bounded: 10 s for sh to start and write its child's pid.
            for _ in 0..500 {
                if fs::read_to_string(&pidfile).is_ok_and(|s| s.ends_with('\n')) {
                    return;
                }
                async_io::Timer::after(Duration::from_millis(20)).await;
            }
        };
        // Whichever finishes first, `run` is dropped here.
        let finished = futures_lite::future::or(async { Some(run.await) }, async {
            wait_for_pidfile.await;
            None
        })
        .await;
        assert!(
            finished.is_none(),
            "the command finished on its own: {finished:?}"
        );
    });
    let pid: u32 = fs::read_to_string(&pidfile)
        .expect("pidfile")
        .trim()
        .parse()
        .expect("pid");
    assert!(
        wait_until_dead(pid),
        "grandchild {pid} survived the dropped future"
    );
}

/// Our child processes whose command line is exactly `argv`.
fn children_running(argv: &[&str]) -> Vec<u32> {
    let me = std::process::id().to_string();
    let want = argv.join("\0") + "\0";
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Field 4, after the parenthesised name: the parent's pid.
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().nth(1));
            ppid == Some(me.as_str())
                && fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes())
        })
        .collect()
}

#[test]
fn a_caller_that_gives_up_while_the_pool_spawns_leaves_nothing_running() {
    // A sleep no other test runs: the child is found by its argv.
    let argv = ["sleep", "29.7531"];
    let mut run = Box::pin(run_command(spec(&argv, SHORT)));
    smolcord::rt::block_on(async {
        // Polled once: the spawn is handed to the pool, nothing more.
        assert!(futures_lite::future::poll_once(&mut run).await.is_none());
    });
    // The pool spawns it whether or not anyone still waits.
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        if let Some(pid) = children_running(&argv).first() {
            break *pid;
        }
        assert!(
            Instant::now() < deadline,
            "the pool never spawned the child"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Given up before it was watched: killed and reaped, not left running
    // unsupervised (or as a zombie) for 30 s.
    drop(run);
    let deadline = Instant::now() + Duration::from_secs(10);
    while fs::metadata(format!("/proc/{pid}")).is_ok() {
        assert!(
            Instant::now() < deadline,
            "child {pid} outlived the abandoned spawn"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn on_any_smol_executor_too() {
    // Outside rt::block_on the same code waits through async-io.
    let input: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let mut s = spec(&["cat"], SHORT);
    s.stdin = Some(input.clone());
    s.output_cap = 2 << 20;
    let out = smol::block_on(run_command(s)).expect("run");
    assert!(out.success(), "{out:?}");
    assert!(out.stdout == input, "cat echoed the bytes back");

    let mut s = spec(
        &["sh", "-c", "sleep 30 & echo $!; wait"],
        Duration::from_millis(500),
    );
    s.kill_grace = Duration::from_secs(2);
    let out = smol::block_on(run_command(s)).expect("run");
    assert!(out.timed_out, "{out:?}");
    assert_eq!(out.signal, Some(15), "{out:?}");
    assert!(wait_until_dead(pid_from(&out)));
}

#[test]
fn debug_output_of_a_spec_shows_no_arguments_or_env_values() {
    let mut s = spec(&["agent", "--token", "s3cret-arg"], SHORT);
    s.env = CommandEnv::Exactly(vec![("API_KEY".into(), "s3cret-env".into())]);
    s.stdin = Some(b"s3cret-stdin".to_vec());
    let shown = format!("{s:?}");
    assert!(
        shown.contains("agent") && shown.contains("API_KEY"),
        "{shown}"
    );
    assert!(!shown.contains("s3cret"), "{shown}");
}

#[test]
fn a_command_that_closes_stdout_before_its_timeout_says_so() {
    let closed = run(spec(
        &["sh", "-c", "echo done; exec >&-; sleep 30"],
        Duration::from_millis(500),
    ))
    .expect("run");
    assert!(closed.timed_out, "{closed:?}");
    assert!(closed.stdout_closed_in_time, "{closed:?}");
    assert_eq!(closed.stdout_text(), "done");
    let open = run(spec(
        &["sh", "-c", "echo half; sleep 30"],
        Duration::from_millis(500),
    ))
    .expect("run");
    assert!(open.timed_out && !open.stdout_closed_in_time, "{open:?}");
    assert_eq!(open.stdout_text(), "half");
    let quick = run(spec(&["echo", "hi"], SHORT)).expect("run");
    assert!(quick.stdout_closed_in_time && !quick.timed_out, "{quick:?}");
}

#[test]
fn a_process_that_escapes_the_group_with_setsid_is_named_in_the_log() {
    let _serial = support::logs::serial();
    let dir = tempfile::tempdir().unwrap();
    // The daemon is in its own session before the command ends (else the
    // group's kill could catch it first), and is `sleep` by then: `ready`
    // alone let the command end between the touch and the exec, and the
    // warning named `(sh)` (seen under load). setsid does not fork here
    // (a job of a shell without job control leads no group), so `$!` is
    // the daemon.
    let script = "setsid sh -c 'touch ready; exec sleep 60' < /dev/null > /dev/null 2>&1 & \
        daemon=$!; \
        while [ ! -e ready ] || [ \"$(cat /proc/$daemon/comm 2>/dev/null)\" != sleep ]; \
        do sleep 0.01; done; echo started";
    let mut spec = spec(&["/bin/sh", "-c", script], SHORT);
    spec.cwd = Some(dir.path().to_path_buf());
    let out = run(spec).expect("run");
    assert_eq!(out.stdout_text(), "started");
    let warning = support::logs::warnings()
        .into_iter()
        .find(|w| w.contains("outside its process group"))
        .unwrap_or_else(|| panic!("no warning; log: {:?}", support::logs::captured()));
    assert!(warning.contains("`/bin/sh` left process"), "{warning}");
    assert!(warning.contains("(sleep)"), "{warning}");
    // Not ours to stop in the bridge; the test cleans up after itself.
    let pid: i32 = warning
        .split("left process ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|pid| pid.parse().ok())
        .expect("a pid in the warning");
    let pid = rustix::process::Pid::from_raw(pid).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
}

#[test]
fn a_command_that_leaves_nothing_behind_is_not_warned_about() {
    let _serial = support::logs::serial();
    let out = run(spec(&["/bin/sh", "-c", "sleep 60 & echo started"], SHORT)).expect("run");
    assert_eq!(out.stdout_text(), "started");
    let warnings = support::logs::warnings();
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("outside its process group")),
        "{warnings:?}"
    );
}
