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
//! closes. Connections are served one at a time on the event loop, each
//! bounded by [`SERVE_BOUND`]; the socket is 0600, and a peer whose uid is
//! neither ours nor root is closed unanswered.

use super::StatusSnapshot;
use crate::rt::{Async, Timer};
use futures_lite::future;
use std::io::{self, Read, Write};
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
/// the answer); a slower client is dropped.
pub const SERVE_BOUND: Duration = Duration::from_secs(1);
/// How long `smolcord status` waits for an answer before it calls the
/// process hung: under Docker's default 5 s health-check timeout, and well
/// above [`SERVE_BOUND`] so one slow client ahead in the queue does not
/// fail a healthy process.
pub const QUERY_BOUND: Duration = Duration::from_secs(3);

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
        let final_path = path(state_dir);
        let tmp = state_dir.join(format!(".{SOCKET_NAME}.{:016x}", fastrand::u64(..)));
        let listener = crate::offload::unblock(move || bind_private(&tmp, &final_path)).await?;
        Ok(StatusListener {
            listener: Async::new(listener)?,
        })
    }

    /// Answers connections one at a time, forever, with `snapshot()`
    /// captured when each request arrives.
    pub async fn serve(self, snapshot: impl Fn() -> StatusSnapshot) {
        loop {
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
                continue;
            }
            let answered = future::or(async { Some(answer(stream, &snapshot).await) }, async {
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
    }
}

// On the blocking pool (see StatusListener::bind).
#[allow(clippy::disallowed_methods)]
fn bind_private(tmp: &Path, final_path: &Path) -> io::Result<UnixListener> {
    let listener = UnixListener::bind(tmp)?;
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
    let path = path(state_dir);
    let ask = crate::offload::unblock(move || ask_blocking(&path, bound));
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

fn refused(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

fn timed_out(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn ask_blocking(path: &Path, bound: Duration) -> io::Result<Vec<u8>> {
    let mut stream = UnixStream::connect(path)?;
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
        crate::rt::block_on(ex.run(async {
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
}
