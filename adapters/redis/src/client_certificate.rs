//! The certificate and key a store shows to a Redis server that asks for one (mutual TLS):
//! set in [`RedisOptions`](crate::RedisOptions) or named by a `rediss://` URL's parameters,
//! and used by `tls.rs` to build the clients.

use std::fmt;

/// A client certificate (PEM, the certificate first, then any intermediates) and its private
/// key (PEM: PKCS#8, PKCS#1 or SEC1), shown to a server that asks for one (mutual TLS). Its
/// `Debug` shows the key's length, never the key.
///
/// ```
/// use fairq_redis::ClientCertificate;
/// let id = ClientCertificate::new(b"-----BEGIN CERTIFICATE-----...".to_vec(), b"secret".to_vec());
/// assert!(!format!("{id:?}").contains("secret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl ClientCertificate {
    /// The certificate chain `cert` and its key `key`, both PEM. They are checked when a
    /// store connects with them.
    ///
    /// ```
    /// let id = fairq_redis::ClientCertificate::new(b"cert".to_vec(), b"key".to_vec());
    /// assert_eq!(id.certificate(), b"cert");
    /// ```
    pub fn new(cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        ClientCertificate {
            cert: cert.into(),
            key: key.into(),
        }
    }

    /// The certificate chain (PEM).
    ///
    /// ```
    /// let id = fairq_redis::ClientCertificate::new(b"cert".to_vec(), b"key".to_vec());
    /// assert_eq!(id.certificate(), b"cert");
    /// ```
    pub fn certificate(&self) -> &[u8] {
        &self.cert
    }

    /// The private key (PEM).
    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }
}

impl fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCertificate")
            .field("cert_bytes", &self.cert.len())
            .field("key_bytes", &self.key.len())
            .finish()
    }
}
