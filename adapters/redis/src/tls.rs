//! TLS (`rediss://`): building clients with the roots a connection trusts and the certificate
//! it shows (mutual TLS), for one server and for a cluster, and telling a refused certificate
//! apart from a server that is down.
//!
//! The TLS library is rustls. Without a root certificate the Mozilla root set is trusted
//! (enough for managed Redis services with public certificates); with one, only that root
//! (or those roots) is, which is what a private certificate authority needs. The URL's
//! `#insecure` fragment (the `redis` crate's) turns certificate checks off altogether.
//! A client certificate and its key are shown to servers that ask for one
//! (`--tls-auth-clients yes` or `optional`).
//!
//! The URL parameters have `redis-cli`'s option names: `cacert=PATH`, `cert=PATH`,
//! `key=PATH`.

use std::error::Error as _;

use fairq_worker::BackendError;
use redis::cluster::ClusterClientBuilder;
use redis::{Client, ClientTlsConfig, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::client_certificate::ClientCertificate;
use crate::options::RedisOptions;

/// The query parameter naming a PEM file of root certificates.
pub(crate) const CACERT_PARAM: &str = "cacert";
/// The query parameter naming a PEM file with the client certificate (and its chain).
pub(crate) const CERT_PARAM: &str = "cert";
/// The query parameter naming a PEM file with the client certificate's private key.
pub(crate) const KEY_PARAM: &str = "key";

/// What a store's connections trust and show: taken from the URL's parameters, or from
/// [`RedisOptions`] when the URL names none (the URL is the more specific configuration).
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    root: Option<Vec<u8>>,
    identity: Option<ClientCertificate>,
}

impl TlsSettings {
    /// Takes `cacert`, `cert` and `key` out of `url` and reads the files they name; returns
    /// the rest of the URL and the settings.
    pub(crate) fn take(
        url: &str,
        options: &RedisOptions,
    ) -> Result<(String, TlsSettings), BackendError> {
        let (rest, taken) = crate::query::take(url, &[CACERT_PARAM, CERT_PARAM, KEY_PARAM]);
        let mut root = None;
        let (mut cert, mut key) = (None, None);
        for (name, path) in taken {
            if path.is_empty() {
                return Err(BackendError::Invalid(format!("{name}= needs a file name")));
            }
            let slot = match name {
                CACERT_PARAM => &mut root,
                CERT_PARAM => &mut cert,
                _ => &mut key,
            };
            *slot = Some(read_file(name, &path)?);
        }
        let identity = match (cert, key) {
            (Some(cert), Some(key)) => Some(ClientCertificate::new(cert, key)),
            (None, None) => options.client_certificate.clone(),
            _ => {
                return Err(BackendError::Invalid(format!(
                    "{CERT_PARAM}= and {KEY_PARAM}= go together: a client certificate needs its key"
                )))
            }
        };
        let settings = TlsSettings {
            root: root.or_else(|| options.root_certificate.clone()),
            identity,
        };
        settings.validate()?;
        Ok((rest, settings))
    }

    /// Refuses PEM that holds nothing usable, before any connection is tried. Messages name
    /// what was wrong, never the key's contents.
    fn validate(&self) -> Result<(), BackendError> {
        if let Some(pem) = &self.root {
            certificates(pem, "the root certificate")?;
        }
        if let Some(id) = &self.identity {
            certificates(id.certificate(), "the client certificate")?;
            PrivateKeyDer::from_pem_slice(id.key()).map_err(|_| {
                BackendError::Invalid(
                    "the client key is not a PEM private key (PKCS#8, PKCS#1 or SEC1)".into(),
                )
            })?;
        }
        Ok(())
    }

    /// True when certificates were given (which only a TLS URL can use).
    fn any(&self) -> bool {
        self.root.is_some() || self.identity.is_some()
    }

    /// Refuses certificates given for a URL that is not a TLS one.
    fn check_scheme(&self, tls: bool) -> Result<(), BackendError> {
        if self.any() && !tls {
            return Err(BackendError::Invalid(
                "a root or client certificate was given but the URL is not a TLS one: use \
                 rediss:// (or rediss+cluster://)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The certificates in the `redis` crate's form, when any were given.
    fn certificates(&self) -> Option<TlsCertificates> {
        self.any().then(|| TlsCertificates {
            client_tls: self.identity.as_ref().map(|id| ClientTlsConfig {
                client_cert: id.certificate().to_vec(),
                client_key: id.key().to_vec(),
            }),
            root_cert: self.root.clone(),
        })
    }

    /// The client for one server at `url`.
    pub(crate) fn client(&self, url: &str) -> Result<Client, BackendError> {
        let tls = is_tls(url);
        self.check_scheme(tls)?;
        if tls {
            install_crypto_provider();
        }
        match self.certificates() {
            None => Client::open(url),
            Some(certs) => Client::build_with_tls(url, certs),
        }
        .map_err(invalid_url)
    }

    /// Gives a cluster client for `nodes` these certificates.
    pub(crate) fn cluster(
        &self,
        nodes: &[String],
        builder: ClusterClientBuilder,
    ) -> Result<ClusterClientBuilder, BackendError> {
        let tls = nodes.iter().any(|node| is_tls(node));
        self.check_scheme(tls)?;
        if !tls {
            return Ok(builder);
        }
        install_crypto_provider();
        // Without certificates the mode (checked or `#insecure`) comes from the first node's
        // URL; `certs` sets it to checked unless it was set before, so `#insecure` is
        // passed on first.
        let Some(certs) = self.certificates() else {
            return Ok(builder);
        };
        let insecure = nodes
            .first()
            .is_some_and(|node| node.ends_with("#insecure"));
        let builder = if insecure {
            builder.tls(redis::TlsMode::Insecure)
        } else {
            builder
        };
        Ok(builder.certs(certs))
    }
}

/// Reads the file a URL parameter names (its contents are never quoted).
fn read_file(param: &str, path: &str) -> Result<Vec<u8>, BackendError> {
    std::fs::read(path)
        .map_err(|e| BackendError::Invalid(format!("cannot read {path} (from ?{param}=): {e}")))
}

/// Counts the PEM certificates in `pem`; none is an error.
fn certificates(pem: &[u8], what: &str) -> Result<usize, BackendError> {
    let count = CertificateDer::pem_slice_iter(pem)
        .try_fold(0usize, |n, cert| cert.map(|_| n + 1))
        .map_err(|e| BackendError::Invalid(format!("{what} is not valid PEM: {e}")))?;
    if count == 0 {
        return Err(BackendError::Invalid(format!(
            "{what} holds no PEM certificate"
        )));
    }
    Ok(count)
}

fn invalid_url(e: redis::RedisError) -> BackendError {
    BackendError::Invalid(format!("invalid Redis URL: {e}"))
}

/// True for URLs the `redis` crate connects to over TLS.
pub(crate) fn is_tls(url: &str) -> bool {
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
    scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
}

/// rustls needs a process-wide cryptography provider. The application may have installed
/// one already; otherwise *ring*'s is installed here, so the choice does not depend on which
/// rustls features other crates of the build happened to enable.
pub(crate) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is then installed.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The TLS failure inside a connection error, when it is one (an untrusted or expired
/// certificate, a name mismatch, a failed handshake).
pub(crate) fn tls_failure(err: &redis::RedisError) -> Option<&rustls::Error> {
    let io = err.source()?.downcast_ref::<std::io::Error>()?;
    io.get_ref()?.downcast_ref::<rustls::Error>()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(url: &str, options: &RedisOptions) -> Result<Client, BackendError> {
        let (url, settings) = TlsSettings::take(url, options)?;
        settings.client(&url)
    }

    #[test]
    fn tls_schemes() {
        assert!(is_tls("rediss://h/"));
        assert!(is_tls("REDISS://h/"));
        assert!(!is_tls("redis://h/"));
        assert!(!is_tls("not a url"));
    }

    #[test]
    fn bad_roots_and_roots_without_tls_are_refused() {
        let options = RedisOptions::new().root_certificate(b"not pem".to_vec());
        let err = client("rediss://127.0.0.1/", &options).unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        let options = RedisOptions::new().root_certificate(TEST_CERT.to_vec());
        let err = client("redis://127.0.0.1/", &options).unwrap_err();
        assert!(err.to_string().contains("use rediss://"), "{err}");
        let err = client(
            "rediss://127.0.0.1/?cacert=/no/such/file.pem",
            &RedisOptions::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/no/such/file.pem"), "{err}");
        let err = client("rediss://127.0.0.1/?cacert=", &RedisOptions::new()).unwrap_err();
        assert!(
            err.to_string().contains("cacert= needs a file name"),
            "{err}"
        );
        assert!(client("rediss://127.0.0.1/#insecure", &RedisOptions::new()).is_ok());
    }

    /// A self-signed certificate of no use but its shape.
    const TEST_CERT: &[u8] =
        b"-----BEGIN CERTIFICATE-----\nMIIBMzCB2qADAgECAhQK\n-----END CERTIFICATE-----\n";

    #[test]
    fn client_certificates_need_their_key_and_never_show_it() {
        let dir = std::env::temp_dir().join(format!("fairq-redis-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cert = dir.join("c.pem");
        std::fs::write(&cert, TEST_CERT).unwrap();
        let key = dir.join("k.pem");
        std::fs::write(&key, b"hunter2-key-material").unwrap();

        let url = format!("rediss://h/?cert={}", cert.display());
        let err = client(&url, &RedisOptions::new()).unwrap_err();
        assert!(err.to_string().contains("go together"), "{err}");

        let url = format!("rediss://h/?cert={}&key={}", cert.display(), key.display());
        let err = client(&url, &RedisOptions::new()).unwrap_err().to_string();
        assert!(err.contains("not a PEM private key"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");

        let options = RedisOptions::new()
            .client_certificate(ClientCertificate::new(TEST_CERT, "hunter2-key-material"));
        let err = client("rediss://h/", &options).unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
        assert!(!format!("{options:?}").contains("hunter2"));
        // Certificates are for TLS URLs only.
        let key = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let options =
            RedisOptions::new().client_certificate(ClientCertificate::new(TEST_CERT, key));
        let err = client("redis://h/", &options).unwrap_err().to_string();
        assert!(err.contains("use rediss://"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
