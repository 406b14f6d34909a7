//! A test CA and a leaf certificate for `127.0.0.1`, made once per test
//! binary with rcgen: the simulator serves the leaf, clients are told to
//! trust the CA — as an operator behind a TLS-inspecting proxy would.
//! (A self-signed leaf used as its own anchor is refused by webpki, so it
//! takes a CA and a leaf.)

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use smolcord_sim::SimTls;
use std::sync::OnceLock;

/// The CA's PEM (what `SMOLCORD_CA_FILE` names) and the simulator's side
/// (also as PEM, for `smolcord sim --tls-cert --tls-key`).
pub struct TestCa {
    pub ca_pem: String,
    pub sim_tls: SimTls,
    pub leaf_pem: String,
    pub leaf_key_pem: String,
}

/// This test binary's CA (made on first use).
pub fn test_ca() -> &'static TestCa {
    static CA: OnceLock<TestCa> = OnceLock::new();
    CA.get_or_init(|| {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "smolcord test CA");
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");

        let leaf_key = KeyPair::generate().expect("leaf key");
        let leaf_params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
            .expect("leaf params");
        let leaf = leaf_params
            .signed_by(&leaf_key, &ca, &ca_key)
            .expect("leaf certificate");
        let (leaf_pem, leaf_key_pem) = (leaf.pem(), leaf_key.serialize_pem());
        let sim_tls = SimTls::from_pem(leaf_pem.as_bytes(), leaf_key_pem.as_bytes())
            .expect("the simulator takes the leaf");
        TestCa {
            ca_pem: ca.pem(),
            sim_tls,
            leaf_pem,
            leaf_key_pem,
        }
    })
}

/// Trusts this binary's test CA in this process (the library path; the
/// binary gets `SMOLCORD_CA_FILE` instead).
pub fn trust_test_ca() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        smolcord::transport::tls::install_extra_roots(test_ca().ca_pem.as_bytes(), "test CA")
            .expect("the test CA installs");
    });
}
