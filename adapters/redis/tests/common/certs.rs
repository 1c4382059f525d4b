//! Test certificates made with rcgen: a certificate authority and a server certificate for
//! `localhost` and `127.0.0.1` that it signed.

use std::path::Path;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// A certificate authority: its certificate (PEM) and what it needs to sign more.
pub struct Authority {
    /// The CA certificate, PEM.
    pub pem: String,
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Authority {
    /// A new self-signed authority named `name`.
    pub fn new(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("CA key");
        let cert = params.self_signed(&key).expect("self-signed CA");
        Authority {
            pem: cert.pem(),
            cert,
            key,
        }
    }

    /// Writes a server certificate for `localhost` and `127.0.0.1` signed by this authority,
    /// and the CA certificate, into `dir` as `server.crt`, `server.key` and `ca.crt`.
    pub fn write_server_files(&self, dir: &Path) {
        let params = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("server params");
        let key = KeyPair::generate().expect("server key");
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("sign the server certificate");
        std::fs::write(dir.join("server.crt"), cert.pem()).expect("write server.crt");
        std::fs::write(dir.join("server.key"), key.serialize_pem()).expect("write server.key");
        std::fs::write(dir.join("ca.crt"), &self.pem).expect("write ca.crt");
    }
}
