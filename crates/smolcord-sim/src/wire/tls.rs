//! The simulator's optional TLS: with [`SimTls`] in the config, every
//! connection on its port is TLS, so clients reach it at `wss://` and
//! `https://` exactly as they reach Discord, certificate checks included.
//!
//! The certificate comes from the caller (tests make a CA and a leaf for
//! `127.0.0.1` at run time); the client is told to trust the CA, as an
//! operator behind a TLS-inspecting proxy would.

use async_net::TcpStream;
use futures_lite::{AsyncRead, AsyncWrite};
use futures_rustls::server::TlsStream;
use futures_rustls::TlsAcceptor;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A server certificate chain and its key, ready to serve.
#[derive(Clone)]
pub struct SimTls {
    config: Arc<ServerConfig>,
}

impl fmt::Debug for SimTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimTls").finish_non_exhaustive()
    }
}

impl SimTls {
    /// From PEM text: the leaf certificate first, then any intermediates;
    /// and its private key (PKCS#8, PKCS#1 or SEC1).
    pub fn from_pem(cert_chain: &[u8], key: &[u8]) -> Result<SimTls, String> {
        let chain = CertificateDer::pem_slice_iter(cert_chain)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("sim TLS certificate chain: {e}"))?;
        if chain.is_empty() {
            return Err("sim TLS certificate chain: no certificate".into());
        }
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("sim TLS key: {e}"))?;
        let config = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| format!("sim TLS: {e}"))?;
        Ok(SimTls {
            config: Arc::new(config),
        })
    }

    /// Runs the server side of the handshake on `tcp`.
    pub(crate) async fn accept(&self, tcp: TcpStream) -> io::Result<SimStream> {
        let stream = TlsAcceptor::from(self.config.clone()).accept(tcp).await?;
        Ok(SimStream::Tls(Box::new(stream)))
    }
}

/// One accepted connection, plain or TLS.
pub(crate) enum SimStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for SimStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SimStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            SimStream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for SimStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SimStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            SimStream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SimStream::Plain(s) => Pin::new(s).poll_flush(cx),
            SimStream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SimStream::Plain(s) => Pin::new(s).poll_close(cx),
            SimStream::Tls(s) => Pin::new(s).poll_close(cx),
        }
    }
}
