//! [`Async`]: a non-blocking file descriptor waited on by the reactor of
//! the thread that created it — the subset of `async_io::Async` smolcord
//! needs (`new`, `get_ref`, readiness, `read_with`/`write_with`).
//!
//! Created inside [`super::block_on`], it registers with that thread's
//! epoll set; created anywhere else, it is an `async_io::Async` (so the
//! same code runs on any smol executor).

use super::reactor::{self, Reactor, Source};
use std::future::poll_fn;
use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::task::{Context, Poll};

/// An I/O handle in non-blocking mode, registered with a reactor.
#[derive(Debug)]
pub struct Async<T: AsFd> {
    inner: Inner<T>,
}

#[derive(Debug)]
enum Inner<T: AsFd> {
    Local {
        io: T,
        reactor: Arc<Reactor>,
        source: Arc<Source>,
    },
    Shared(async_io::Async<T>),
}

impl<T: AsFd> Async<T> {
    /// Puts `io` in non-blocking mode and registers it.
    pub fn new(io: T) -> io::Result<Async<T>> {
        let inner = match reactor::current() {
            Some(reactor) => {
                rustix::io::ioctl_fionbio(&io, true)?;
                let source = reactor.add_source(io.as_fd())?;
                Inner::Local {
                    io,
                    reactor,
                    source,
                }
            }
            None => Inner::Shared(async_io::Async::new(io)?),
        };
        Ok(Async { inner })
    }

    /// The I/O handle.
    pub fn get_ref(&self) -> &T {
        match &self.inner {
            Inner::Local { io, .. } => io,
            Inner::Shared(io) => io.get_ref(),
        }
    }

    /// Ready when the handle may be readable (call after `WouldBlock`).
    pub fn poll_readable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &self.inner {
            Inner::Local { source, .. } => source.poll_ready(false, cx).map(Ok),
            Inner::Shared(io) => io.poll_readable(cx),
        }
    }

    /// Ready when the handle may be writable (call after `WouldBlock`).
    pub fn poll_writable(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &self.inner {
            Inner::Local { source, .. } => source.poll_ready(true, cx).map(Ok),
            Inner::Shared(io) => io.poll_writable(cx),
        }
    }

    /// Waits until the handle may be readable.
    pub async fn readable(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_readable(cx)).await
    }

    /// Waits until the handle may be writable.
    pub async fn writable(&self) -> io::Result<()> {
        poll_fn(|cx| self.poll_writable(cx)).await
    }

    /// Runs the non-blocking `op` until it does not say `WouldBlock`,
    /// waiting for readability in between.
    pub async fn read_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        loop {
            match op(self.get_ref()) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => self.readable().await?,
                result => return result,
            }
        }
    }

    /// Runs the non-blocking `op` until it does not say `WouldBlock`,
    /// waiting for writability in between.
    pub async fn write_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        loop {
            match op(self.get_ref()) {
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => self.writable().await?,
                result => return result,
            }
        }
    }
}

impl<T: AsFd> Drop for Async<T> {
    fn drop(&mut self) {
        // Out of the epoll set before `io` (dropped after this) closes it.
        if let Inner::Local {
            io,
            reactor,
            source,
        } = &self.inner
        {
            reactor.remove_source(source, io.as_fd());
        }
    }
}
