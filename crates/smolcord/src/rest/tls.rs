//! REST's TLS: ureq's connector chain with the TLS step swapped for one
//! that uses the process's shared rustls config
//! ([`crate::transport::tls::client_config`]), so `https://` trusts exactly
//! what `wss://` trusts — Mozilla's roots plus the operator's extra CA.
//!
//! ureq's own rustls connector only takes a whole root list (no "webpki
//! plus these"), and rebuilds its config for every request that sets a
//! per-request timeout, as every call here does; sharing one config also
//! keeps TLS session resumption across REST connections.
//!
//! This uses ureq's `unversioned` transport API (its traits may change in
//! a minor release; `Cargo.lock` pins the version we build with).

use std::io::{Read, Write};

use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};
use ureq::unversioned::transport::{
    Buffers, ConnectProxyConnector, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout,
    TcpConnector, Transport, TransportAdapter,
};
use ureq::Error;

use crate::transport::tls::client_config;

/// ureq's default chain (HTTP CONNECT proxy, TCP), then TLS with the shared
/// config.
pub(crate) fn connector() -> impl Connector {
    ().chain(ConnectProxyConnector::default())
        .chain(TcpConnector::default())
        .chain(SharedTls)
}

/// Wraps `https://` connections in TLS with the shared client config.
#[derive(Debug)]
pub(crate) struct SharedTls;

impl<In: Transport> Connector<In> for SharedTls {
    type Out = Either<In, TlsTransport>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, Error> {
        let Some(transport) = chained else {
            return Err(Error::Tls("no TCP connection to wrap in TLS"));
        };
        if !details.needs_tls() || transport.is_tls() {
            return Ok(Some(Either::A(transport)));
        }
        let host = details
            .uri
            .host()
            .ok_or(Error::Tls("an https URL without a host"))?;
        // `[::1]` in a URL is `::1` as a server name.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host)
            .map_err(|_| Error::Tls("the host is not a valid TLS server name"))?
            .to_owned();
        // As a handshake failure is reported (an io::Error carrying rustls's).
        let mut conn = ClientConnection::new(client_config(), name)
            .map_err(|e| Error::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        let mut socket = TransportAdapter::new(transport.boxed(), details.current_time.clone());
        // The handshake gets the connection's remaining time, counted from
        // here (ureq's own connector counts from the connect's start).
        socket.set_timeout(details.timeout);
        conn.complete_io(&mut socket)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(Either::B(TlsTransport {
            buffers,
            stream: StreamOwned::new(conn, socket),
        })))
    }
}

/// An established TLS connection, as ureq's transport.
pub(crate) struct TlsTransport {
    buffers: LazyBuffers,
    stream: StreamOwned<ClientConnection, TransportAdapter>,
}

impl std::fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsTransport").finish_non_exhaustive()
    }
}

impl Transport for TlsTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), Error> {
        self.stream.get_mut().set_timeout(timeout);
        let output = &self.buffers.output()[..amount];
        self.stream.write_all(output)?;
        Ok(())
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, Error> {
        self.stream.get_mut().set_timeout(timeout);
        let input = self.buffers.input_append_buf();
        let amount = self.stream.read(input)?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        self.stream.get_mut().get_mut().is_open()
    }

    fn is_tls(&self) -> bool {
        true
    }
}
