//! The TLS client settings every outgoing connection uses — the gateway's
//! `wss://` and REST's `https://` alike: Mozilla's roots, compiled in (a
//! `FROM scratch` image has no `/etc/ssl`), plus any extra trust anchors
//! the operator names with `extra_ca_file` or `SMOLCORD_CA_FILE` (a
//! TLS-inspecting proxy's CA, or a test CA).
//!
//! The extras are read once at start-up ([`load_extra_roots`]); after that
//! every connection shares one `rustls::ClientConfig`, which also lets a
//! reconnect resume its TLS session instead of a full handshake.
//!
//! ```no_run
//! # smol::block_on(async {
//! use smolcord::transport::tls;
//! let added = tls::load_extra_roots(std::path::Path::new("/etc/proxy-ca.pem")).await?;
//! assert!(added > 0);
//! let config = tls::client_config(); // webpki roots + the proxy's CA
//! # Ok::<(), tls::TlsError>(()) });
//! ```

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use crate::offload::{self, FileKind};

/// Largest CA file read: a whole system bundle is ≈ 220 KB.
pub const MAX_CA_FILE_BYTES: u64 = 1024 * 1024;

/// Extra anchors installed so far, and the config built from them (built
/// on first use, rebuilt when anchors are added).
struct Roots {
    extra: Vec<CertificateDer<'static>>,
    config: Option<Arc<ClientConfig>>,
}

static ROOTS: Mutex<Roots> = Mutex::new(Roots {
    extra: Vec::new(),
    config: None,
});

/// A CA file that cannot be used, naming the file.
#[derive(Debug)]
pub struct TlsError(String);

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// The client config: webpki roots plus every anchor installed so far.
pub fn client_config() -> Arc<ClientConfig> {
    let mut roots = ROOTS.lock().unwrap_or_else(PoisonError::into_inner);
    let Roots { extra, config } = &mut *roots;
    config.get_or_insert_with(|| build(extra)).clone()
}

/// Trusts every certificate in the PEM text `pem` (from `origin`, named in
/// errors) as an extra root, for every connection made from now on.
/// Returns how many were added.
pub fn install_extra_roots(pem: &[u8], origin: &str) -> Result<usize, TlsError> {
    let bad = |detail: String| TlsError(format!("CA file {origin}: {detail}"));
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(bad("no `BEGIN CERTIFICATE` block found".into()));
    }
    // Checked here, so a bad certificate is refused at start-up with its
    // file's name, not skipped silently later.
    let mut check = RootCertStore::empty();
    for (n, cert) in certs.iter().enumerate() {
        check
            .add(cert.clone())
            .map_err(|e| bad(format!("certificate {} is not usable: {e}", n + 1)))?;
    }
    let mut roots = ROOTS.lock().unwrap_or_else(PoisonError::into_inner);
    roots.extra.extend(certs.iter().cloned());
    roots.config = Some(build(&roots.extra));
    Ok(certs.len())
}

/// Reads the PEM file at `path` (at most [`MAX_CA_FILE_BYTES`], on the
/// blocking pool) and installs its certificates as extra roots.
pub async fn load_extra_roots(path: &Path) -> Result<usize, TlsError> {
    let origin = path.display().to_string();
    let read = offload::read_capped(
        path,
        MAX_CA_FILE_BYTES,
        FileKind::RegularBehindLink,
        |bytes| bytes,
    );
    let bytes = read
        .await
        .map_err(|e| TlsError(format!("CA file: {e}")))?
        .ok_or_else(|| TlsError(format!("CA file {origin}: file not found")))?;
    let added = install_extra_roots(&bytes, &origin)?;
    log::info!("trusting {added} extra CA certificate(s) from {origin}");
    Ok(added)
}

fn build(extra: &[CertificateDer<'static>]) -> Arc<ClientConfig> {
    let mut store = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    // Every one was checked by `install_extra_roots`.
    let (_added, _ignored) = store.add_parsable_certificates(extra.iter().cloned());
    Arc::new(
        ClientConfig::builder()
            .with_root_certificates(store)
            .with_no_client_auth(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_without_a_certificate_is_refused_with_the_file_name() {
        let err = install_extra_roots(b"hello\n", "/etc/ca.pem").unwrap_err();
        assert_eq!(
            err.to_string(),
            "CA file /etc/ca.pem: no `BEGIN CERTIFICATE` block found"
        );
    }

    #[test]
    fn a_certificate_that_is_not_der_is_refused() {
        let pem = b"-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n";
        let err = install_extra_roots(pem, "ca.pem").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("CA file ca.pem: certificate 1 is not usable"),
            "{err}"
        );
    }
}
