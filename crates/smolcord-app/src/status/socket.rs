//! The live status socket: `status.sock` in the state dir.
//!
//! The running bridge answers each connection with its live snapshot (the
//! JSON of `status.json`, captured when asked), so the health check needs
//! no file written per heartbeat and an idle bot writes nothing. It also
//! tells more than a file can: a process that is alive but hung (stopped,
//! or its loop blocked) does not answer within [`QUERY_BOUND`], and
//! `smolcord status` reports it unhealthy; a zombie connection shows as an
//! old heartbeat ACK in the live answer.
//!
//! The protocol is one line each way: the client sends `status\n` (at most
//! [`REQUEST_MAX`] bytes), the server answers with the snapshot's JSON and
//! closes. Up to [`MAX_CLIENTS`] connections are served at once on the
//! event loop, each bounded by [`SERVE_BOUND`], and at most one is accepted
//! per [`ACCEPT_PACE`]: idle clients cannot hold the owner's health check
//! past its [`QUERY_BOUND`], and a flood of requests costs the loop one
//! short answer at a time, never a burst. The socket is 0600, and a peer
//! whose uid is neither ours nor root is closed unanswered.
//!
//! A socket's path must fit in `sun_path` (108 bytes). A state dir with a
//! longer path is reached through a descriptor of it, as
//! `/proc/self/fd/N/status.sock`, by server and client alike; without
//! `/proc` there is no socket, the bridge writes `status.json` every
//! heartbeat instead, and `smolcord status` reads that.

use super::StatusSnapshot;
use futures_lite::future;
use smol::lock::Semaphore;
use smol::LocalExecutor;
use smolcord::rt::{Async, Timer};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The socket's name inside the state dir.
pub const SOCKET_NAME: &str = "status.sock";
/// The longest request line the server reads.
pub const REQUEST_MAX: usize = 64;
/// The longest answer the client reads (a snapshot is a few KiB).
pub const ANSWER_MAX: u64 = 256 * 1024;
/// How long the server spends on one connection (read the request, write
/// the answer); a slower client is dropped. A real asker sends its 7 bytes
/// at once and reads a few KiB: milliseconds.
pub const SERVE_BOUND: Duration = Duration::from_millis(500);
/// Connections served at once. With [`SERVE_BOUND`], that many idle
/// clients delay the next asker by at most 0.5 s, twice as many by 1 s:
/// well inside [`QUERY_BOUND`] for a health check that shares the host
/// with a few stray tools.
pub const MAX_CLIENTS: usize = 8;
/// The least time between two accepted connections: the accept loop then
/// sleeps on a timer, so the whole event loop (the heartbeat included)
/// runs between any two answers however many wait; at most 1 000 answers
/// a second, far above any health check.
pub const ACCEPT_PACE: Duration = Duration::from_millis(1);
/// How long `smolcord status` waits for an answer before it calls the
/// process hung: under Docker's default 5 s health-check timeout, and well
/// above [`SERVE_BOUND`] so slow clients ahead in the queue do not fail a
/// healthy process.
pub const QUERY_BOUND: Duration = Duration::from_secs(3);
/// The longest path `bind` and `connect` take (`sun_path` less its NUL).
const SUN_PATH_MAX: usize = 107;

/// Where the socket lives in `state_dir`.
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET_NAME)
}

/// A bound, listening status socket.
pub struct StatusListener {
    listener: Async<UnixListener>,
}

impl StatusListener {
    /// Binds `status.sock` in `state_dir` (replacing a stale one): bound
    /// under a temporary name, made 0600, then renamed into place, so the
    /// socket is never reachable with looser permissions. Off the loop.
    pub async fn bind(state_dir: &Path) -> io::Result<StatusListener> {
        let dir = state_dir.to_path_buf();
        let listener = smolcord::offload::unblock(move || bind_private(&dir)).await?;
        Ok(StatusListener {
            listener: Async::new(listener)?,
        })
    }

    /// Answers connections, up to [`MAX_CLIENTS`] at once and one accepted
    /// per [`ACCEPT_PACE`], forever, with `snapshot()` captured when each
    /// request arrives.
    pub async fn serve(self, snapshot: impl Fn() -> StatusSnapshot) {
        let slots = Semaphore::new(MAX_CLIENTS);
        let clients = LocalExecutor::new();
        clients
            .run(async {
                loop {
                    let slot = slots.acquire().await;
                    let accepted = self.listener.read_with(|listener| listener.accept()).await;
                    let stream = match accepted.and_then(|(stream, _)| Async::new(stream)) {
                        Ok(stream) => stream,
                        Err(err) => {
                            // EMFILE and the like: wait a little rather than spin.
                            log::warn!("status socket: accept failed: {err}");
                            Timer::after(SERVE_BOUND).await;
                            continue;
                        }
                    };
                    if !peer_allowed(stream.get_ref()) {
                        log::warn!("status socket: closed a connection from another user");
                    } else {
                        let snapshot = &snapshot;
                        clients
                            .spawn(async move {
                                serve_one(stream, snapshot).await;
                                drop(slot);
                            })
                            .detach();
                    }
                    // A timer, not a yield: the executor has nothing of ours
                    // to run, so the rest of the loop gets its turn.
                    Timer::after(ACCEPT_PACE).await;
                }
            })
            .await
    }
}

/// One connection, within [`SERVE_BOUND`].
async fn serve_one(stream: Async<UnixStream>, snapshot: &impl Fn() -> StatusSnapshot) {
    let answered = future::or(async { Some(answer(stream, snapshot).await) }, async {
        Timer::after(SERVE_BOUND).await;
        None
    })
    .await;
    match answered {
        Some(Ok(())) => {}
        Some(Err(err)) => log::debug!("status socket: {err}"),
        None => log::debug!("status socket: a client took longer than {SERVE_BOUND:?}"),
    }
}

/// `name` in `dir` as a path `bind` and `connect` take: the path itself
/// when it fits in `sun_path`, else `/proc/self/fd/N/name` through the
/// returned descriptor of `dir` (keep it open while the path is used).
/// Blocking (an open).
fn reachable(dir: &Path, name: &str) -> io::Result<(PathBuf, Option<OwnedFd>)> {
    let direct = dir.join(name);
    if direct.as_os_str().len() <= SUN_PATH_MAX {
        return Ok((direct, None));
    }
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let short = PathBuf::from(format!("/proc/self/fd/{}/{name}", fd.as_raw_fd()));
    Ok((short, Some(fd)))
}

// On the blocking pool (see StatusListener::bind).
#[allow(clippy::disallowed_methods)]
fn bind_private(state_dir: &Path) -> io::Result<UnixListener> {
    let final_path = path(state_dir);
    let tmp_name = format!(".{SOCKET_NAME}.{:016x}", fastrand::u64(..));
    let tmp = state_dir.join(&tmp_name);
    let (bind_path, _dir) = reachable(state_dir, &tmp_name)?;
    let listener = UnixListener::bind(&bind_path)?;
    let (tmp, final_path) = (tmp.as_path(), final_path.as_path());
    let placed = std::fs::set_permissions(tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(tmp, final_path));
    if let Err(err) = placed {
        let _ = std::fs::remove_file(tmp);
        return Err(err);
    }
    Ok(listener)
}

/// Our uid or root (root may inspect anything; `smolcord status` from a
/// systemd health check often runs as root).
fn peer_allowed(stream: &UnixStream) -> bool {
    match rustix::net::sockopt::socket_peercred(stream) {
        Ok(cred) => cred.uid == rustix::process::geteuid() || cred.uid.is_root(),
        Err(_) => false,
    }
}

async fn answer(
    stream: Async<UnixStream>,
    snapshot: &impl Fn() -> StatusSnapshot,
) -> io::Result<()> {
    let mut request = [0u8; REQUEST_MAX];
    let mut len = 0;
    while len < REQUEST_MAX && !request[..len].contains(&b'\n') {
        let n = stream
            .read_with(|mut s| s.read(&mut request[len..]))
            .await?;
        if n == 0 {
            break;
        }
        len += n;
    }
    let line = request[..len].split(|&b| b == b'\n').next().unwrap_or(&[]);
    let answer = match line.trim_ascii() {
        b"status" => serde_json::to_vec(&snapshot()).map_err(io::Error::other)?,
        _ => br#"{"error":"unknown request; send `status`"}"#.to_vec(),
    };
    let mut written = 0;
    while written < answer.len() {
        written += stream
            .write_with(|mut s| s.write(&answer[written..]))
            .await?;
    }
    stream.get_ref().shutdown(std::net::Shutdown::Write)
}

/// What `status.sock` said.
#[derive(Debug)]
pub enum Query {
    /// The live snapshot.
    Live(Box<StatusSnapshot>),
    /// Nothing listens (no socket, or connection refused): the process is
    /// not running, or runs without the socket.
    NotListening,
    /// A process holds the socket but gave no usable answer within the
    /// bound: hung (stopped, or its loop blocked), or broken.
    NoAnswer(String),
}

/// Asks the process serving `state_dir` for its live snapshot, within
/// `bound`. The socket work runs on the blocking pool (a full backlog makes
/// even a Unix connect block), raced against `bound`.
pub async fn query(state_dir: &Path, bound: Duration) -> Query {
    let dir = state_dir.to_path_buf();
    let ask = smolcord::offload::unblock(move || ask_blocking(&dir, bound));
    let outcome = future::or(async { Some(ask.await) }, async {
        Timer::after(bound).await;
        None
    })
    .await;
    match outcome {
        None => Query::NoAnswer(format!("no answer within {:.1} s", bound.as_secs_f64())),
        Some(Err(err)) if refused(&err) => Query::NotListening,
        Some(Err(err)) if timed_out(&err) => {
            Query::NoAnswer(format!("no answer within {:.1} s", bound.as_secs_f64()))
        }
        Some(Err(err)) => Query::NoAnswer(err.to_string()),
        Some(Ok(bytes)) => match serde_json::from_slice::<StatusSnapshot>(&bytes) {
            Ok(snapshot) => Query::Live(Box::new(snapshot)),
            Err(err) => Query::NoAnswer(format!("the answer is not a status snapshot: {err}")),
        },
    }
}

/// Nothing listens. A path that cannot be reached (too long, and no
/// `/proc` to shorten it) is that too: the bridge could not bind it either,
/// and writes `status.json` instead.
fn refused(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused | io::ErrorKind::InvalidInput
    )
}

fn timed_out(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn ask_blocking(state_dir: &Path, bound: Duration) -> io::Result<Vec<u8>> {
    let (path, _dir) = reachable(state_dir, SOCKET_NAME)?;
    let mut stream = UnixStream::connect(&path)?;
    stream.set_read_timeout(Some(bound))?;
    stream.set_write_timeout(Some(bound))?;
    stream.write_all(b"status\n")?;
    let mut answer = Vec::new();
    stream.take(ANSWER_MAX).read_to_end(&mut answer)?;
    Ok(answer)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests may stat files on their own thread
mod tests {
    use super::*;
    use std::time::Instant;

    fn snapshot() -> StatusSnapshot {
        StatusSnapshot {
            pid: 7,
            last_ack_unix_ms: Some(super::super::now_unix_ms()),
            heartbeat_interval_ms: Some(41_250),
            ..StatusSnapshot::default()
        }
    }

    #[test]
    fn a_serving_process_answers_with_its_live_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let ex = smol::LocalExecutor::new();
        // On smolcord's runtime, as the bridge serves it.
        smolcord::rt::block_on(ex.run(async {
            let listener = StatusListener::bind(dir.path()).await.unwrap();
            let mode = std::fs::metadata(path(dir.path())).unwrap().permissions();
            assert_eq!(mode.mode() & 0o777, 0o600);
            ex.spawn(listener.serve(snapshot)).detach();
            match query(dir.path(), QUERY_BOUND).await {
                Query::Live(live) => {
                    assert_eq!(live.pid, 7);
                    assert!(live.is_healthy(super::super::now_unix_ms()));
                }
                other => panic!("expected a live answer, got {other:?}"),
            }
        }));
    }

    #[test]
    fn nothing_listening_is_not_running() {
        let dir = tempfile::tempdir().unwrap();
        smol::block_on(async {
            assert!(matches!(
                query(dir.path(), QUERY_BOUND).await,
                Query::NotListening
            ));
            // A stale socket file from a crashed run: refused, same answer.
            drop(UnixListener::bind(path(dir.path())).unwrap());
            assert!(matches!(
                query(dir.path(), QUERY_BOUND).await,
                Query::NotListening
            ));
        });
    }

    #[test]
    fn a_process_that_does_not_answer_is_reported_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        // Bound and listening, never served: what a stopped process looks like.
        let _held = UnixListener::bind(path(dir.path())).unwrap();
        let bound = Duration::from_millis(300);
        let started = Instant::now();
        let outcome = smol::block_on(query(dir.path(), bound));
        assert!(matches!(outcome, Query::NoAnswer(_)), "{outcome:?}");
        assert!(
            started.elapsed() < bound + Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
    }

    /// A state dir whose path is longer than `sun_path` holds.
    fn long_dir(root: &Path) -> PathBuf {
        let dir = root.join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(path(&dir).as_os_str().len() > SUN_PATH_MAX);
        dir
    }

    #[test]
    fn a_state_dir_of_any_length_is_served_and_asked() {
        let root = tempfile::tempdir().unwrap();
        let dir = long_dir(root.path());
        let ex = smol::LocalExecutor::new();
        smolcord::rt::block_on(ex.run(async {
            assert!(matches!(
                query(&dir, QUERY_BOUND).await,
                Query::NotListening
            ));
            let listener = StatusListener::bind(&dir).await.unwrap();
            let mode = std::fs::metadata(path(&dir)).unwrap().permissions();
            assert_eq!(mode.mode() & 0o777, 0o600);
            ex.spawn(listener.serve(snapshot)).detach();
            match query(&dir, QUERY_BOUND).await {
                Query::Live(live) => assert_eq!(live.pid, 7),
                other => panic!("expected a live answer, got {other:?}"),
            }
        }));
    }

    #[test]
    fn idle_clients_do_not_keep_the_owner_from_an_answer() {
        let dir = tempfile::tempdir().unwrap();
        let ex = smol::LocalExecutor::new();
        smolcord::rt::block_on(ex.run(async {
            let listener = StatusListener::bind(dir.path()).await.unwrap();
            ex.spawn(listener.serve(snapshot)).detach();
            // Connected, silent, never closing: ahead of the owner.
            let idle: Vec<UnixStream> = (0..10)
                .map(|_| UnixStream::connect(path(dir.path())).unwrap())
                .collect();
            let asked = Instant::now();
            match query(dir.path(), QUERY_BOUND).await {
                Query::Live(live) => assert!(live.is_healthy(super::super::now_unix_ms())),
                other => panic!("a healthy process looked {other:?} behind idle clients"),
            }
            assert!(asked.elapsed() < QUERY_BOUND, "{:?}", asked.elapsed());
            drop(idle);
        }));
    }

    #[test]
    fn a_flood_of_requests_is_answered_one_at_a_time_between_other_work() {
        let dir = tempfile::tempdir().unwrap();
        let answered = std::cell::Cell::new(0usize);
        let ex = smol::LocalExecutor::new();
        const FLOOD: usize = 40;
        smolcord::rt::block_on(ex.run(async {
            let listener = StatusListener::bind(dir.path()).await.unwrap();
            // All asked before the server first runs: every one is ready.
            let clients: Vec<UnixStream> = (0..FLOOD)
                .map(|_| {
                    let mut client = UnixStream::connect(path(dir.path())).unwrap();
                    client.write_all(b"status\n").unwrap();
                    client
                })
                .collect();
            let counting = || {
                answered.set(answered.get() + 1);
                snapshot()
            };
            ex.spawn(listener.serve(counting)).detach();
            // Another task of the loop: how many answers go by between two
            // of its turns?
            let (mut last, mut most) = (0, 0);
            let started = Instant::now();
            while answered.get() < FLOOD && started.elapsed() < Duration::from_secs(20) {
                future::yield_now().await;
                let now = answered.get();
                most = most.max(now - last);
                last = now;
            }
            assert_eq!(answered.get(), FLOOD, "not all answered");
            assert!(most <= 2, "{most} answers in one turn of the loop");
            drop(clients);
        }));
    }
}
