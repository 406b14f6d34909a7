//! The mechanics behind `run_command`: spawn into a new process group, pump
//! the pipes, enforce the timeout, kill the group, reap.
//!
//! The child's exit and its pipes are watched together: the pipes are
//! drained while we wait for the exit (else a child filling a 64 KiB pipe
//! would never exit), and after the exit we SIGKILL whatever is left in the
//! group, whose death closes the pipes. Every wait has a bound, so even a
//! process stuck in the kernel, or one that escaped the group while holding
//! our pipe, cannot hang the caller.

use std::future::{poll_fn, Future};
use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::pin::Pin;
use std::process::ExitStatus;
use std::task::Poll;
use std::time::{Duration, Instant};

use async_io::Timer;
use async_process::{ChildStderr, ChildStdin, ChildStdout, Stdio};
use futures_lite::{future, AsyncRead, AsyncReadExt, AsyncWriteExt};
use rustix::process::{kill_process_group, Pid, Signal};

use super::{unblock, CommandEnv, CommandOutput, CommandSpec, Error};

/// How long a SIGKILLed leader may take to be reaped before we stop waiting
/// (only a process stuck in uninterruptible I/O takes longer; the
/// async-process reaper still collects it later).
const REAP_BOUND: Duration = Duration::from_secs(5);
/// How long the pipes may stay open once the group is dead (only a process
/// that left the group while holding them keeps them open).
const DRAIN_BOUND: Duration = Duration::from_secs(1);
/// Read size for the pipes.
const CHUNK: usize = 16 * 1024;

pub(crate) async fn run(spec: CommandSpec) -> Result<CommandOutput, Error> {
    let program = spec.program()?.to_string();
    let started = Instant::now();
    let mut command = build(&spec, &program);
    // fork/exec waits for the child to exec: keep even that off the loop.
    let mut child = unblock(move || command.spawn())
        .await
        .map_err(|source| Error::Spawn {
            program: program.clone(),
            cwd: spec.cwd.clone(),
            source,
        })?;
    let group = GroupKiller(i32::try_from(child.id()).ok().and_then(Pid::from_raw));

    let mut out = Capture::new(spec.output_cap);
    let mut err = Capture::new(spec.output_cap);
    let pipes = pump(
        child.stdin.take(),
        spec.stdin,
        child.stdout.take(),
        child.stderr.take(),
        &mut out,
        &mut err,
    );
    let mut watch = Watch {
        exit: Box::pin(child.status()),
        pipes: Box::pin(pipes),
        exited: None,
        drained: None,
    };

    let timed_out = !watch.until(spec.timeout, false).await;
    if timed_out {
        group.signal(Signal::TERM);
        if !watch.until(spec.kill_grace, false).await {
            group.signal(Signal::KILL);
            watch.until(REAP_BOUND, false).await;
        }
    }
    // The leader is gone: anything left in its group is orphaned work.
    group.finish();
    watch.until(DRAIN_BOUND, true).await;
    let duration = started.elapsed();
    let (exited, drained) = (watch.exited.take(), watch.drained.take());
    drop(watch);

    let status = match exited {
        Some(Ok(status)) => Some(status),
        Some(Err(source)) => {
            return Err(Error::Command {
                program,
                op: "wait for",
                source,
            })
        }
        None => {
            log::warn!("`{program}` did not die after SIGKILL; leaving it to the reaper");
            None
        }
    };
    match drained {
        Some(Ok(())) => {}
        Some(Err((op, source))) => {
            return Err(Error::Command {
                program,
                op,
                source,
            })
        }
        None => log::warn!("`{program}`: a process outside its group still holds its output pipes"),
    }
    Ok(CommandOutput {
        exit_code: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        stdout: out.bytes,
        stderr: err.bytes,
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
        duration,
        timed_out,
    })
}

// Offload is the one place that builds a std Command (clippy.toml forbids it
// elsewhere): async-process has no process_group, std's CommandExt does.
#[allow(clippy::disallowed_methods)]
fn build(spec: &CommandSpec, program: &str) -> async_process::Command {
    let mut std_command = std::process::Command::new(program);
    std_command.args(&spec.argv[1..]).process_group(0);
    match &spec.env {
        CommandEnv::Inherit => {}
        CommandEnv::InheritWithout(names) => {
            for name in names {
                std_command.env_remove(name);
            }
        }
        CommandEnv::Exactly(vars) => {
            std_command
                .env_clear()
                .envs(vars.iter().map(|(k, v)| (k, v)));
        }
    }
    if let Some(cwd) = &spec.cwd {
        std_command.current_dir(cwd);
    }
    let mut command = async_process::Command::from(std_command);
    // Stdio must be set after the conversion, which resets it.
    command
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// Signals the command's process group; SIGKILLs it if dropped, so a caller
/// that abandons `run_command` leaves nothing running.
struct GroupKiller(Option<Pid>);

impl GroupKiller {
    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.0 {
            // ESRCH (group already empty) is the expected outcome, not an error.
            let _ = kill_process_group(pgid, signal);
        }
    }

    /// Kills what is left of the group, once; after this, drop does nothing
    /// (the group id may in time be reused by an unrelated process).
    fn finish(mut self) {
        self.signal(Signal::KILL);
        self.0 = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        self.signal(Signal::KILL);
    }
}

type PipeError = (&'static str, io::Error);

/// The leader's exit and the pipes, polled together so that waiting for one
/// keeps the other moving.
struct Watch<'a> {
    exit: Pin<Box<dyn Future<Output = io::Result<ExitStatus>> + 'a>>,
    pipes: Pin<Box<dyn Future<Output = Result<(), PipeError>> + 'a>>,
    exited: Option<io::Result<ExitStatus>>,
    drained: Option<Result<(), PipeError>>,
}

impl Watch<'_> {
    /// Drives both for at most `limit`; true once the leader has exited
    /// (and, if `with_pipes`, the pipes are drained too).
    async fn until(&mut self, limit: Duration, with_pipes: bool) -> bool {
        let mut timer = Timer::after(limit);
        poll_fn(|cx| {
            if self.exited.is_none() {
                if let Poll::Ready(r) = self.exit.as_mut().poll(cx) {
                    self.exited = Some(r);
                }
            }
            if self.drained.is_none() {
                if let Poll::Ready(r) = self.pipes.as_mut().poll(cx) {
                    self.drained = Some(r);
                }
            }
            if self.exited.is_some() && (!with_pipes || self.drained.is_some()) {
                return Poll::Ready(true);
            }
            if Pin::new(&mut timer).poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            Poll::Pending
        })
        .await
    }
}

/// Feeds stdin and drains stdout and stderr, all at once.
async fn pump(
    stdin: Option<ChildStdin>,
    input: Option<Vec<u8>>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    out: &mut Capture,
    err: &mut Capture,
) -> Result<(), PipeError> {
    let feed = async {
        let (Some(mut pipe), Some(input)) = (stdin, input) else {
            return Ok(());
        };
        // A child that exits without reading its stdin closes the pipe:
        // that is its business, not a failure of ours.
        match pipe.write_all(&input).await {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(("write stdin of", e)),
            _ => Ok(()),
        }
        // Dropping `pipe` closes it: the child sees EOF.
    };
    let (fed, (read_out, read_err)) =
        future::zip(feed, future::zip(drain(stdout, out), drain(stderr, err))).await;
    fed?;
    read_out.map_err(|e| ("read stdout of", e))?;
    read_err.map_err(|e| ("read stderr of", e))
}

async fn drain(pipe: Option<impl AsyncRead + Unpin>, capture: &mut Capture) -> io::Result<()> {
    let Some(mut pipe) = pipe else {
        return Ok(());
    };
    let mut chunk = vec![0; CHUNK];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) => return Ok(()),
            Ok(n) => capture.push(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Keeps the first `cap` bytes of a stream and notes whether more came.
struct Capture {
    bytes: Vec<u8>,
    cap: usize,
    truncated: bool,
}

impl Capture {
    fn new(cap: usize) -> Self {
        Capture {
            bytes: Vec::new(),
            cap,
            truncated: false,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        let room = self.cap.saturating_sub(self.bytes.len());
        let keep = chunk.len().min(room);
        self.bytes.extend_from_slice(&chunk[..keep]);
        self.truncated |= keep < chunk.len();
    }
}

#[cfg(test)]
mod tests {
    use super::Capture;

    #[test]
    fn capture_keeps_the_first_cap_bytes_and_notes_the_rest() {
        let mut c = Capture::new(5);
        c.push(b"abc");
        assert!(!c.truncated);
        c.push(b"defg");
        c.push(b"h");
        assert_eq!(c.bytes, b"abcde");
        assert!(c.truncated);

        let mut exact = Capture::new(3);
        exact.push(b"abc");
        assert!(!exact.truncated, "exactly cap bytes is not truncation");
    }
}
