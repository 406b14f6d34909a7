//! [`TcpStream`]: a TCP connection on the reactor of the thread that opened
//! it, as `AsyncRead + AsyncWrite` (what async-tungstenite's `client_async*`
//! functions and futures-rustls take).

use super::io::Async;
use super::timer::Timer;
use futures_lite::{future, AsyncRead, AsyncWrite};
use rustix::net::{AddressFamily, SendFlags, Shutdown, SocketFlags, SocketType};
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

/// A connected TCP stream.
#[derive(Debug)]
pub struct TcpStream {
    io: Async<OwnedFd>,
}

impl TcpStream {
    /// Connects to `host:port` within `bound`: a literal IP directly, a name
    /// through the resolver (on the blocking pool), then each address in
    /// turn until one accepts. Nagle is off (gateway frames are small and
    /// latency matters more than packets).
    pub async fn connect(host: &str, port: u16, bound: Duration) -> io::Result<TcpStream> {
        let attempt = async {
            let mut last = None;
            for addr in async_net::resolve((host, port)).await? {
                match connect_one(addr).await {
                    Ok(stream) => return Ok(stream),
                    Err(err) => last = Some(err),
                }
            }
            Err(last.unwrap_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{host} resolved to no address"),
                )
            }))
        };
        future::or(attempt, async {
            Timer::after(bound).await;
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connecting to {host}:{port} took longer than {bound:?}"),
            ))
        })
        .await
    }
}

async fn connect_one(addr: SocketAddr) -> io::Result<TcpStream> {
    let family = if addr.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    match rustix::net::connect(&fd, &addr) {
        Ok(()) | Err(rustix::io::Errno::INPROGRESS) => {}
        Err(err) => return Err(err.into()),
    }
    let io = Async::new(fd)?;
    // Connected (or failed) when writable; SO_ERROR says which.
    loop {
        if rustix::net::getpeername(io.get_ref()).is_ok() {
            break;
        }
        if let Err(err) = rustix::net::sockopt::socket_error(io.get_ref())? {
            return Err(err.into());
        }
        io.writable().await?;
    }
    rustix::net::sockopt::set_tcp_nodelay(io.get_ref(), true)?;
    Ok(TcpStream { io })
}

fn would_block(err: &rustix::io::Errno) -> bool {
    *err == rustix::io::Errno::AGAIN || *err == rustix::io::Errno::WOULDBLOCK
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            match rustix::io::read(self.io.get_ref(), &mut *buf) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(err) if would_block(&err) => ready!(self.io.poll_readable(cx))?,
                Err(rustix::io::Errno::INTR) => {}
                Err(err) => return Poll::Ready(Err(err.into())),
            }
        }
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            // NOSIGNAL: a peer that went away is an error here, not SIGPIPE.
            match rustix::net::send(self.io.get_ref(), buf, SendFlags::NOSIGNAL) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(err) if would_block(&err) => ready!(self.io.poll_writable(cx))?,
                Err(rustix::io::Errno::INTR) => {}
                Err(err) => return Poll::Ready(Err(err.into())),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        match rustix::net::shutdown(self.io.get_ref(), Shutdown::Write) {
            Ok(()) | Err(rustix::io::Errno::NOTCONN) => Poll::Ready(Ok(())),
            Err(err) => Poll::Ready(Err(err.into())),
        }
    }
}
