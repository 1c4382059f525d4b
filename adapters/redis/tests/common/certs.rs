//! Test certificates made with rcgen: a certificate authority, and server certificates (for
//! `localhost` and `127.0.0.1`) and client certificates that it signed.

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

    /// A server certificate for `localhost` and `127.0.0.1` signed by this authority, and its
    /// key: `(cert, key)`, PEM.
    pub fn server_pair(&self) -> (String, String) {
        self.sign(vec!["localhost".to_string(), "127.0.0.1".to_string()], None)
    }

    /// A client certificate named `name` signed by this authority, and its key: `(cert, key)`,
    /// PEM.
    pub fn client_pair(&self, name: &str) -> (String, String) {
        self.sign(Vec::new(), Some(name))
    }

    fn sign(&self, names: Vec<String>, common_name: Option<&str>) -> (String, String) {
        let mut params = CertificateParams::new(names).expect("certificate params");
        if let Some(name) = common_name {
            params.distinguished_name.push(DnType::CommonName, name);
        }
        let key = KeyPair::generate().expect("a key");
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("sign the certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// Writes a server certificate (see [`server_pair`](Self::server_pair)), its key and the
    /// CA certificate into `dir` as `server.crt`, `server.key` and `ca.crt`, and a client
    /// certificate with its key as `client.crt` and `client.key`.
    pub fn write_server_files(&self, dir: &Path) {
        let (cert, key) = self.server_pair();
        let (client, client_key) = self.client_pair("fairq test client");
        for (name, text) in [
            ("server.crt", &cert),
            ("server.key", &key),
            ("ca.crt", &self.pem),
            ("client.crt", &client),
            ("client.key", &client_key),
        ] {
            std::fs::write(dir.join(name), text).expect("write a certificate file");
        }
    }
}
