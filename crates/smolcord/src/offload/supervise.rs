//! The mechanics behind `run_command`: spawn into a new process group, pump
//! the pipes, enforce the timeout, kill the group, reap.
//!
//! The child's exit and its pipes are watched together: the pipes are
//! drained while we wait for the exit (else a child filling a 64 KiB pipe
//! would never exit), and after the exit we SIGKILL whatever is left in the
//! group, whose death closes the pipes. Every wait has a bound, so even a
//! process stuck in the kernel, or one that escaped the group while holding
//! our pipe, cannot hang the caller.
//!
//! The pipes and the leader's pidfd are waited on by the caller's own
//! reactor ([`crate::rt::Async`]: on smolcord's runtime, the main thread's
//! epoll set), and the timeouts are [`crate::rt::Timer`]s. No thread of
//! anyone else's is involved: async-process kept an "async-process" reaper
//! thread (and with it an async-io `block_on`) alive for good after the
//! first child, which cost an idle bridge wake-ups on two threads. Without
//! pidfds (Linux < 5.3, some seccomp profiles) a `blocking` pool thread
//! waits for the leader instead.

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::pin::Pin;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, ExitStatus, Stdio};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_lite::{future, ready, Future};
use rustix::process::{kill_process_group, Pid, Signal};

use super::{unblock, CommandEnv, CommandOutput, CommandSpec, Error};
use crate::rt::{Async, Timer};

/// How long a SIGKILLed leader may take to be reaped before we stop waiting
/// (only a process stuck in uninterruptible I/O takes longer; a `blocking`
/// pool thread still collects it later).
const REAP_BOUND: Duration = Duration::from_secs(5);
/// How long the pipes may stay open once the group is dead (only a process
/// that left the group while holding them keeps them open).
const DRAIN_BOUND: Duration = Duration::from_secs(1);
/// Read size for the pipes.
const CHUNK: usize = 16 * 1024;

pub(crate) async fn run(spec: CommandSpec) -> Result<CommandOutput, Error> {
    let program = spec.program()?.to_string();
    let started = Instant::now();
    let marker = super::leftovers::new_marker();
    let mut command = build(&spec, &program);
    // `Exactly` means exactly: such a command's escapees go unnamed.
    if !matches!(spec.env, CommandEnv::Exactly(_)) {
        command.env(super::leftovers::MARKER_VAR, &marker);
    }
    let mut child = spawn(command)
        .await
        .map_err(|source| Error::Spawn {
            program: program.clone(),
            cwd: spec.cwd.clone(),
            source,
        })?
        .watched();
    let group = GroupKiller::of(&child);
    let group_id = group.0.map(|pid| pid.as_raw_nonzero().get().unsigned_abs());
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    // From here on the leader is killed and reaped on every way out.
    let leader = Leader::new(child);
    let wrap_failed = |source| Error::Command {
        program: program.clone(),
        op: "watch the pipes of",
        source,
    };
    let stdin = stdin.map(Async::new).transpose().map_err(wrap_failed)?;
    let stdout = stdout.map(Async::new).transpose().map_err(wrap_failed)?;
    let stderr = stderr.map(Async::new).transpose().map_err(wrap_failed)?;

    let mut out = Capture::new(spec.output_cap);
    out.progress = spec.stdout_progress.clone();
    let mut err = match spec.stderr_tail {
        Some(keep) => Capture::tail(keep),
        None => Capture::new(spec.output_cap),
    };
    let stdout_closed = Cell::new(false);
    let pipes = pump(
        stdin,
        spec.stdin,
        (stdout, &stdout_closed),
        stderr,
        &mut out,
        &mut err,
    );
    let mut watch = Watch {
        leader,
        pipes: Box::pin(pipes),
        exited: None,
        drained: None,
    };

    let timed_out = !watch.until(spec.timeout, false).await;
    // Read before the group is signalled: its death closes the pipe too.
    let stdout_closed_in_time = stdout_closed.get();
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
    let left = unblock(move || super::leftovers::find(&marker, group_id)).await;
    for (pid, name) in left {
        log::warn!(
            "`{program}` left process {pid} ({name}) running outside its process group (setsid or a double fork); smolcord does not stop it"
        );
    }
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
            log::warn!(
                "`{program}` did not die after SIGKILL; a pool thread will reap it when it does"
            );
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
        stdout_closed_in_time: stdout_closed_in_time || (!timed_out && stdout_closed.get()),
    })
}

// Offload is the one place that builds a std Command (clippy.toml forbids it
// elsewhere); it is spawned on the blocking pool.
#[allow(clippy::disallowed_methods)]
fn build(spec: &CommandSpec, program: &str) -> std::process::Command {
    let mut command = std::process::Command::new(program);
    command.args(&spec.argv[1..]).process_group(0);
    match &spec.env {
        CommandEnv::Inherit => {}
        CommandEnv::InheritWithout(names) => {
            for name in names {
                command.env_remove(name);
            }
        }
        CommandEnv::Exactly(vars) => {
            command.env_clear().envs(vars.iter().map(|(k, v)| (k, v)));
        }
    }
    command.envs(spec.env_add.iter().map(|(k, v)| (k, v)));
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    command
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// fork/exec waits for the child to exec: keep even that off the loop.
#[allow(clippy::disallowed_methods)]
fn spawn(mut command: std::process::Command) -> impl Future<Output = io::Result<Spawned>> {
    unblock(move || command.spawn().map(|child| Spawned(Some(child))))
}

/// A child the pool has spawned and nobody watches yet: if the caller gave
/// up meanwhile (the spawn's result is dropped), its group is SIGKILLed and
/// a pool thread reaps it.
struct Spawned(Option<Child>);

impl Spawned {
    /// The child, now the caller's to watch.
    fn watched(mut self) -> Child {
        self.0.take().expect("a spawned child is handed over once")
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(child) = self.0.take() {
            // Unreaped, so its pid (and group id) cannot have been reused.
            drop(GroupKiller::of(&child));
            reap_on_pool(child).detach();
        }
    }
}

/// Signals the command's process group; SIGKILLs it if dropped, so a caller
/// that abandons `run_command` leaves nothing running.
struct GroupKiller(Option<Pid>);

impl GroupKiller {
    /// The group `child` leads (it was spawned with `process_group(0)`).
    fn of(child: &Child) -> GroupKiller {
        GroupKiller(i32::try_from(child.id()).ok().and_then(Pid::from_raw))
    }

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

/// The group's leader until it is reaped: its exit is awaited through a
/// pidfd on the caller's reactor, or (no pidfds) by a pool thread in
/// `waitpid`. Dropped unreaped, it is SIGKILLed and handed to a pool thread
/// to reap, so no zombie is left behind.
enum Leader {
    Pidfd {
        /// `None` once reaped.
        child: Option<Child>,
        pidfd: Async<OwnedFd>,
    },
    /// `None` once the pool thread answered.
    Pool(Option<blocking::Task<io::Result<ExitStatus>>>),
}

impl Leader {
    fn new(child: Child) -> Leader {
        match pidfd(&child) {
            Ok(pidfd) => Leader::Pidfd {
                child: Some(child),
                pidfd,
            },
            Err(e) => {
                log::debug!("no pidfd for a child ({e}): a pool thread waits for it");
                Leader::Pool(Some(reap_on_pool(child)))
            }
        }
    }

    fn poll_exit(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<ExitStatus>> {
        match self {
            Leader::Pidfd { child, pidfd } => loop {
                let Some(leader) = child else {
                    return Poll::Ready(Err(io::Error::other("already reaped")));
                };
                // waitpid(WNOHANG): the pidfd only says when to look.
                if let Some(status) = leader.try_wait()? {
                    *child = None;
                    return Poll::Ready(Ok(status));
                }
                ready!(pidfd.poll_readable(cx))?;
            },
            Leader::Pool(task) => match task {
                Some(waiting) => {
                    let status = ready!(Pin::new(waiting).poll(cx));
                    *task = None;
                    Poll::Ready(status)
                }
                None => Poll::Ready(Err(io::Error::other("already reaped"))),
            },
        }
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        match self {
            Leader::Pidfd { child, .. } => {
                if let Some(mut leader) = child.take() {
                    // Still unreaped, so its pid cannot have been reused.
                    let _ = leader.kill();
                    if !matches!(leader.try_wait(), Ok(Some(_))) {
                        reap_on_pool(leader).detach();
                    }
                }
            }
            // Detached, not dropped: a pool task dropped before it started
            // would never reap the child.
            Leader::Pool(task) => {
                if let Some(waiting) = task.take() {
                    waiting.detach();
                }
            }
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn pidfd(child: &Child) -> io::Result<Async<OwnedFd>> {
    use rustix::process::{pidfd_open, PidfdFlags};
    Async::new(pidfd_open(Pid::from_child(child), PidfdFlags::empty())?)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn pidfd(_: &Child) -> io::Result<Async<OwnedFd>> {
    Err(io::ErrorKind::Unsupported.into())
}

/// Waits for `child` on a pool thread (it blocks there, not on the loop).
#[allow(clippy::disallowed_methods)]
fn reap_on_pool(mut child: Child) -> blocking::Task<io::Result<ExitStatus>> {
    blocking::unblock(move || child.wait())
}

type PipeError = (&'static str, io::Error);

/// The leader's exit and the pipes, polled together so that waiting for one
/// keeps the other moving.
struct Watch<'a> {
    leader: Leader,
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
                if let Poll::Ready(r) = self.leader.poll_exit(cx) {
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
    stdin: Option<Async<ChildStdin>>,
    input: Option<Vec<u8>>,
    (stdout, stdout_closed): (Option<Async<ChildStdout>>, &Cell<bool>),
    stderr: Option<Async<ChildStderr>>,
    out: &mut Capture,
    err: &mut Capture,
) -> Result<(), PipeError> {
    let feed = async {
        let (Some(pipe), Some(input)) = (stdin, input) else {
            return Ok(());
        };
        // A child that exits without reading its stdin closes the pipe:
        // that is its business, not a failure of ours.
        match write_all(&pipe, &input).await {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(("write stdin of", e)),
            _ => Ok(()),
        }
        // Dropping `pipe` closes it: the child sees EOF.
    };
    let read_out = async {
        let read = drain(stdout, out).await;
        stdout_closed.set(read.is_ok());
        read
    };
    let (fed, (read_out, read_err)) =
        future::zip(feed, future::zip(read_out, drain(stderr, err))).await;
    fed?;
    read_out.map_err(|e| ("read stdout of", e))?;
    read_err.map_err(|e| ("read stderr of", e))
}

async fn write_all<T: AsFd>(pipe: &Async<T>, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match pipe.write_with(|p| Ok(rustix::io::write(p, bytes)?)).await {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn drain<T: AsFd>(pipe: Option<Async<T>>, capture: &mut Capture) -> io::Result<()> {
    let Some(pipe) = pipe else {
        return Ok(());
    };
    loop {
        // The read and the copy happen inside one synchronous call, so the
        // buffer lives on the stack of whichever thread polls, for that
        // call only: eight commands at once left the heap 2 × 16 KiB each
        // to fragment.
        let read = pipe.read_with(|p| {
            let mut chunk = [0; CHUNK];
            let n = rustix::io::read(p, &mut chunk[..])?;
            capture.push(&chunk[..n]);
            Ok(n)
        });
        match read.await {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Keeps the first (or, `tail`, the last) `cap` bytes of a stream and
/// notes whether more came.
struct Capture {
    bytes: Vec<u8>,
    cap: usize,
    tail: bool,
    truncated: bool,
    /// Where a caller watches the stream while it comes.
    progress: Option<super::OutputProgress>,
}

impl Capture {
    fn new(cap: usize) -> Self {
        Capture {
            bytes: Vec::new(),
            cap,
            tail: false,
            truncated: false,
            progress: None,
        }
    }

    fn tail(cap: usize) -> Self {
        Capture {
            tail: true,
            ..Capture::new(cap)
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        if let Some(progress) = &self.progress {
            progress.record(chunk);
        }
        if self.tail {
            // Never more than cap + one chunk held, and only for this call.
            let chunk = &chunk[chunk.len().saturating_sub(self.cap)..];
            self.bytes.extend_from_slice(chunk);
            let excess = self.bytes.len().saturating_sub(self.cap);
            if excess > 0 {
                self.bytes.drain(..excess);
                self.truncated = true;
            }
            return;
        }
        let room = self.cap.saturating_sub(self.bytes.len());
        let keep = chunk.len().min(room);
        self.bytes.extend_from_slice(&chunk[..keep]);
        self.truncated |= keep < chunk.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_pidfd_a_pool_thread_waits_for_the_leader() {
        let spec = CommandSpec::new(
            vec!["sh".into(), "-c".into(), "exit 3".into()],
            Duration::from_secs(5),
        );
        let child = smol::block_on(spawn(build(&spec, "sh")))
            .expect("spawn")
            .watched();
        let mut leader = Leader::Pool(Some(reap_on_pool(child)));
        let status = smol::block_on(poll_fn(|cx| leader.poll_exit(cx))).expect("wait");
        assert_eq!(status.code(), Some(3));
        // Reaped once: asking again is an error, not a hang.
        assert!(smol::block_on(poll_fn(|cx| leader.poll_exit(cx))).is_err());
    }

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

    #[test]
    fn a_tail_capture_keeps_the_last_cap_bytes() {
        let mut c = Capture::tail(5);
        c.push(b"abc");
        assert!(!c.truncated);
        c.push(b"de");
        assert!(!c.truncated, "exactly cap bytes is not truncation");
        c.push(b"fg");
        assert_eq!(c.bytes, b"cdefg");
        assert!(c.truncated);
        c.push(b"0123456789");
        assert_eq!(c.bytes, b"56789");
    }
}
