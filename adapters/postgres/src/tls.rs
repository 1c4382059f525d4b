//! TLS to PostgreSQL with rustls, following libpq's `sslmode` and `sslrootcert`.
//!
//! The driver (`tokio-postgres`) knows three modes (disable, prefer, require) and no root
//! certificates; this module takes libpq's two parameters out of the connection string, tells
//! the driver whether to ask for TLS, and builds the rustls configuration that decides what a
//! server certificate must prove:
//!
//! | `sslmode` | TLS | certificate checked |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` (default) | if the server offers it, else plain | only if a root certificate is given |
//! | `require` | always | only if a root certificate is given (then as `verify-ca`) |
//! | `verify-ca` | always | chain to a trusted root |
//! | `verify-full` | always | chain to a trusted root, and the host name (or IP address) |
//!
//! Roots come from `sslrootcert=PATH` (PEM, one or more certificates), from
//! [`PgOptions::ssl_root_cert`](crate::PgOptions::ssl_root_cert) or
//! [`ssl_root_cert_pem`](crate::PgOptions::ssl_root_cert_pem), or, for `sslrootcert=system`
//! and for the verifying modes when none is given, from the operating system's store (with
//! the Mozilla roots of `webpki-roots` when the system has none).
//!
//! A client certificate (for a server whose `pg_hba.conf` says `cert`, or `clientcert=`)
//! comes from libpq's `sslcert=PATH` and `sslkey=PATH`, or from
//! [`PgOptions::ssl_client_cert`](crate::PgOptions::ssl_client_cert) or
//! [`ssl_client_cert_pem`](crate::PgOptions::ssl_client_cert_pem). Every certificate and key,
//! by file or as PEM text, is read by one loader, so they fail alike and no message ever
//! holds a key's contents.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How connections use TLS, by libpq's `sslmode` names (see the [crate docs](crate) for
/// what each checks).
///
/// ```
/// use fairq_postgres::SslMode;
/// assert_eq!("verify-full".parse::<SslMode>().unwrap(), SslMode::VerifyFull);
/// assert_eq!(SslMode::default(), SslMode::Prefer);
/// assert!("allow".parse::<SslMode>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SslMode {
    /// Plain connections only.
    Disable,
    /// TLS when the server offers it, plain otherwise (libpq's default).
    #[default]
    Prefer,
    /// TLS or no connection. The certificate is checked only when a root certificate is
    /// given (then as [`VerifyCa`](Self::VerifyCa)), as libpq does.
    Require,
    /// TLS with a certificate that chains to a trusted root; the name is not checked.
    VerifyCa,
    /// TLS with a certificate that chains to a trusted root and names the host.
    VerifyFull,
}

impl SslMode {
    /// The libpq name of the mode.
    ///
    /// ```
    /// assert_eq!(fairq_postgres::SslMode::VerifyCa.as_str(), "verify-ca");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What the driver is told: whether to ask for TLS and whether to insist.
    fn driver(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Driver;
        match self {
            SslMode::Disable => Driver::Disable,
            SslMode::Prefer => Driver::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Driver::Require,
        }
    }
}

impl std::fmt::Display for SslMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SslMode {
    type Err = TlsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "disable" => Ok(SslMode::Disable),
            "prefer" => Ok(SslMode::Prefer),
            "require" => Ok(SslMode::Require),
            "verify-ca" => Ok(SslMode::VerifyCa),
            "verify-full" => Ok(SslMode::VerifyFull),
            other => Err(TlsError::BadMode(other.to_string())),
        }
    }
}

/// Where trusted root certificates come from.
///
/// ```
/// use fairq_postgres::RootCerts;
/// let roots = RootCerts::PemFile("/etc/ssl/db-ca.pem".into());
/// # let _ = (roots, RootCerts::System);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RootCerts {
    /// The operating system's store (Mozilla's roots when it has none).
    System,
    /// A PEM file with one or more certificates (`sslrootcert=PATH`).
    PemFile(PathBuf),
    /// PEM text with one or more certificates.
    Pem(Vec<u8>),
}

/// A client certificate and its private key (mutual TLS), shown to a server that asks for
/// one. Its `Debug` never shows the key.
///
/// ```
/// use fairq_postgres::ClientCert;
/// let id = ClientCert::PemFiles { cert: "/etc/ssl/app.crt".into(), key: "/etc/ssl/app.key".into() };
/// assert!(format!("{id:?}").contains("app.key"));
/// let id = ClientCert::Pem { cert: b"...".to_vec(), key: b"secret".to_vec() };
/// assert!(!format!("{id:?}").contains("secret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientCert {
    /// PEM files: the certificate (and any intermediates), and the key (PKCS#8, PKCS#1 or
    /// SEC1), as `sslcert=` and `sslkey=`.
    PemFiles {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// PEM text, for a certificate and key that come from a secret store.
    Pem {
        /// The certificate (and any intermediates).
        cert: Vec<u8>,
        /// The key.
        key: Vec<u8>,
    },
}

impl std::fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientCert::PemFiles { cert, key } => f
                .debug_struct("PemFiles")
                .field("cert", cert)
                .field("key", key)
                .finish(),
            ClientCert::Pem { cert, key } => f
                .debug_struct("Pem")
                .field("cert_bytes", &cert.len())
                .field("key_bytes", &key.len())
                .finish(),
        }
    }
}

impl ClientCert {
    /// The certificate chain and the key, loaded.
    fn load(&self) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
        let (cert, key) = match self {
            ClientCert::PemFiles { cert, key } => (Pem::File(cert), Pem::File(key)),
            ClientCert::Pem { cert, key } => (Pem::Text(cert), Pem::Text(key)),
        };
        Ok((cert.certificates(PemKind::ClientCert)?, key.private_key()?))
    }
}

/// What a PEM source was meant to hold, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PemKind {
    /// Trusted root certificates (`sslrootcert`).
    RootCerts,
    /// The client certificate (`sslcert`).
    ClientCert,
    /// The client certificate's private key (`sslkey`).
    ClientKey,
}

impl std::fmt::Display for PemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PemKind::RootCerts => "root certificates",
            PemKind::ClientCert => "client certificate",
            PemKind::ClientKey => "client key",
        })
    }
}

/// Where PEM comes from: a file, or text given directly. The one loader of every
/// certificate and key.
#[derive(Clone, Copy)]
enum Pem<'a> {
    File(&'a Path),
    Text(&'a [u8]),
}

impl Pem<'_> {
    /// The PEM text.
    fn read(&self, what: PemKind) -> Result<std::borrow::Cow<'_, [u8]>, TlsError> {
        match self {
            Pem::File(path) => std::fs::read(path)
                .map(std::borrow::Cow::Owned)
                .map_err(|source| TlsError::File {
                    what,
                    path: path.to_path_buf(),
                    source,
                }),
            Pem::Text(text) => Ok(std::borrow::Cow::Borrowed(text)),
        }
    }

    /// Where it comes from, for messages: the file, or "the PEM text given".
    fn origin(&self) -> String {
        match self {
            Pem::File(path) => path.display().to_string(),
            Pem::Text(_) => "the PEM text given".to_string(),
        }
    }

    /// The certificates in it: at least one, every block valid.
    fn certificates(&self, what: PemKind) -> Result<Vec<CertificateDer<'static>>, TlsError> {
        let text = self.read(what)?;
        let certs = CertificateDer::pem_slice_iter(&text)
            .collect::<Result<Vec<_>, _>>()
            .unwrap_or_default();
        if certs.is_empty() {
            return Err(TlsError::NoPem {
                what,
                from: self.origin(),
            });
        }
        Ok(certs)
    }

    /// The private key in it. A failure names the source only: never the key's bytes.
    fn private_key(&self) -> Result<PrivateKeyDer<'static>, TlsError> {
        let what = PemKind::ClientKey;
        let text = self.read(what)?;
        PrivateKeyDer::from_pem_slice(&text).map_err(|_| TlsError::NoPem {
            what,
            from: self.origin(),
        })
    }
}

/// A TLS setting that cannot be used.
///
/// ```
/// let err = "verify_full".parse::<fairq_postgres::SslMode>().unwrap_err();
/// assert!(err.to_string().contains("verify-full"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// An `sslmode` this library does not know (libpq's `allow` is not supported).
    #[error(
        "sslmode={0:?} is not supported: use disable, prefer, require, verify-ca or verify-full"
    )]
    BadMode(String),
    /// A certificate or key file cannot be read.
    #[error("cannot read the {what} in {path}: {source}")]
    File {
        /// What the file was to hold.
        what: PemKind,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The PEM given holds no usable certificate (or key): none at all, or not valid PEM.
    #[error("no usable {what} in {from}")]
    NoPem {
        /// What it was to hold.
        what: PemKind,
        /// The file, or "the PEM text given".
        from: String,
    },
    /// Only one of `sslcert` and `sslkey` was given.
    #[error("a client certificate needs its key: give sslcert and sslkey together")]
    HalfClientCert,
    /// rustls refused the configuration (for example a key that does not belong to the
    /// client certificate).
    #[error("TLS configuration: {0}")]
    Config(#[source] rustls::Error),
}

/// The TLS parameters taken out of a connection string.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct UrlTls {
    pub(crate) mode: Option<SslMode>,
    pub(crate) roots: Option<RootCerts>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

impl UrlTls {
    /// The client certificate the URL names (`sslcert` with `sslkey`).
    pub(crate) fn client_cert(&self) -> Result<Option<ClientCert>, TlsError> {
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => Ok(Some(ClientCert::PemFiles {
                cert: cert.clone(),
                key: key.clone(),
            })),
            (None, None) => Ok(None),
            _ => Err(TlsError::HalfClientCert),
        }
    }
}

/// Splits `sslmode`, `sslrootcert`, `sslcert` and `sslkey` off a connection string (URL or key-value form),
/// returning the rest for the driver.
pub(crate) fn split(conn: &str) -> Result<(String, UrlTls), TlsError> {
    let mut tls = UrlTls::default();
    let mut take = |key: &str, value: &str| -> Result<bool, TlsError> {
        match key {
            "sslmode" => {
                tls.mode = Some(value.parse()?);
                Ok(true)
            }
            "sslrootcert" => {
                tls.roots = Some(if value == "system" {
                    RootCerts::System
                } else {
                    RootCerts::PemFile(PathBuf::from(value))
                });
                Ok(true)
            }
            "sslcert" => {
                tls.cert = Some(PathBuf::from(value));
                Ok(true)
            }
            "sslkey" => {
                tls.key = Some(PathBuf::from(value));
                Ok(true)
            }
            _ => Ok(false),
        }
    };
    let rest = if conn.starts_with("postgres://") || conn.starts_with("postgresql://") {
        split_url(conn, &mut take)?
    } else {
        split_key_values(conn, &mut take)?
    };
    Ok((rest, tls))
}

type Take<'a> = dyn FnMut(&str, &str) -> Result<bool, TlsError> + 'a;

fn split_url(url: &str, take: &mut Take<'_>) -> Result<String, TlsError> {
    // A password may hold `?`: the query starts only after the user info.
    let (base, Some(query)) = fairq_worker::url_parts::split_query(url) else {
        return Ok(url.to_string());
    };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !take(&percent_decode(key), &percent_decode(value))? {
            kept.push(pair);
        }
    }
    Ok(if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    })
}

/// Decodes the `%XX` escapes of a URL part; anything else is kept as is.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

/// The key-value form: `key=value` pairs separated by spaces, values optionally in single
/// quotes with backslash escapes (as libpq and the driver read them).
fn split_key_values(conn: &str, take: &mut Take<'_>) -> Result<String, TlsError> {
    let chars: Vec<(usize, char)> = conn.char_indices().collect();
    let mut kept = String::new();
    let mut i = 0;
    while i < chars.len() {
        while i < chars.len() && chars[i].1.is_whitespace() {
            i += 1;
        }
        if i == chars.len() {
            break;
        }
        let start = chars[i].0;
        let mut key = String::new();
        while i < chars.len() && chars[i].1 != '=' && !chars[i].1.is_whitespace() {
            key.push(chars[i].1);
            i += 1;
        }
        while i < chars.len() && chars[i].1.is_whitespace() {
            i += 1;
        }
        let mut value = String::new();
        if i < chars.len() && chars[i].1 == '=' {
            i += 1;
            while i < chars.len() && chars[i].1.is_whitespace() {
                i += 1;
            }
            let quoted = i < chars.len() && chars[i].1 == '\'';
            if quoted {
                i += 1;
            }
            while i < chars.len() {
                let c = chars[i].1;
                if quoted && c == '\'' {
                    i += 1;
                    break;
                }
                if !quoted && c.is_whitespace() {
                    break;
                }
                if c == '\\' && i + 1 < chars.len() {
                    i += 1;
                    value.push(chars[i].1);
                } else {
                    value.push(c);
                }
                i += 1;
            }
        }
        let end = chars.get(i).map_or(conn.len(), |c| c.0);
        if !take(&key, &value)? {
            if !kept.is_empty() {
                kept.push(' ');
            }
            kept.push_str(&conn[start..end]);
        }
    }
    Ok(kept)
}

/// The TLS a store's connections use: the mode, and the rustls connector that enforces it.
#[derive(Clone)]
pub(crate) struct Tls {
    pub(crate) mode: SslMode,
    pub(crate) connector: MakeRustlsConnect,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("mode", &self.mode).finish()
    }
}

impl Tls {
    /// The TLS for `mode` with `roots` (given roots make `prefer` and `require` verify the
    /// chain, as libpq does with a root certificate file), showing `client` to servers that
    /// ask for a certificate.
    pub(crate) fn new(
        mode: SslMode,
        roots: Option<&RootCerts>,
        client: Option<&ClientCert>,
    ) -> Result<Tls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?;
        let verify_chain = match mode {
            SslMode::Disable => false,
            SslMode::Prefer | SslMode::Require => roots.is_some(),
            SslMode::VerifyCa | SslMode::VerifyFull => true,
        };
        let builder = if verify_chain {
            let store = Arc::new(root_store(roots.unwrap_or(&RootCerts::System))?);
            let webpki = WebPkiServerVerifier::builder_with_provider(store, provider)
                .build()
                .map_err(|e| TlsError::Config(rustls::Error::General(e.to_string())))?;
            if mode == SslMode::VerifyFull {
                builder.with_webpki_verifier(webpki)
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
            }
        } else {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(Unverified(provider)))
        };
        let config = match client {
            // `disable` never shakes hands, as libpq ignores sslcert then.
            Some(client) if mode != SslMode::Disable => {
                let (chain, key) = client.load()?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(TlsError::Config)?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Tls {
            mode,
            connector: MakeRustlsConnect::new(config),
        })
    }

    /// Tells `config` whether to ask for TLS.
    pub(crate) fn apply(&self, config: &mut tokio_postgres::Config) {
        config.ssl_mode(self.mode.driver());
    }

    /// The mode a driver config asks for, when nothing else says.
    pub(crate) fn mode_of(config: &tokio_postgres::Config) -> SslMode {
        use tokio_postgres::config::SslMode as Driver;
        match config.get_ssl_mode() {
            Driver::Disable => SslMode::Disable,
            Driver::Require => SslMode::Require,
            _ => SslMode::Prefer,
        }
    }
}

fn root_store(roots: &RootCerts) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    let source = match roots {
        RootCerts::System => {
            let found = rustls_native_certs::load_native_certs();
            store.add_parsable_certificates(found.certs);
            if store.is_empty() {
                store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            }
            return Ok(store);
        }
        RootCerts::PemFile(path) => Pem::File(path),
        RootCerts::Pem(pem) => Pem::Text(pem),
    };
    let (added, _ignored) =
        store.add_parsable_certificates(source.certificates(PemKind::RootCerts)?);
    if added == 0 {
        return Err(TlsError::NoPem {
            what: PemKind::RootCerts,
            from: source.origin(),
        });
    }
    Ok(store)
}

/// `verify-ca`: the chain must lead to a trusted root; the name is not looked at.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            // The chain was verified before the name was compared.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without a root certificate: any certificate is accepted (the
/// connection is encrypted, the server unauthenticated), though the handshake signatures
/// are still checked against it.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(conn: &str) -> (String, UrlTls) {
        split(conn).unwrap()
    }

    #[test]
    fn url_parameters_are_taken_out_and_the_rest_kept_in_order() {
        let (rest, tls) =
            parts("postgres://u@h:5/db?application_name=a&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&x=1");
        assert_eq!(rest, "postgres://u@h:5/db?application_name=a&x=1");
        assert_eq!(tls.mode, Some(SslMode::VerifyFull));
        assert_eq!(tls.roots, Some(RootCerts::PemFile("/tmp/ca.pem".into())));
        let (rest, tls) = parts("postgresql://h/db?sslmode=require");
        assert_eq!(rest, "postgresql://h/db");
        assert_eq!(tls.mode, Some(SslMode::Require));
        assert_eq!(parts("postgres://h/db").1, UrlTls::default());
        let (_, tls) = parts("postgres://h/db?sslrootcert=system");
        assert_eq!(tls.roots, Some(RootCerts::System));
    }

    #[test]
    fn a_question_mark_in_a_password_hides_no_parameter() {
        // Read from the password's `?` on, `sslmode=require` would go unnoticed here and
        // the default `prefer` would replace it: a silent fall back to plain text.
        let (rest, tls) = parts("postgres://u:p?w@db/app?sslmode=require&x=1");
        assert_eq!(tls.mode, Some(SslMode::Require));
        assert_eq!(rest, "postgres://u:p?w@db/app?x=1");
        assert_eq!(
            parts("postgres://u:p?w@db/app").0,
            "postgres://u:p?w@db/app"
        );
    }

    #[test]
    fn key_value_parameters_are_taken_out_with_quotes_and_escapes() {
        let (rest, tls) =
            parts("host=h  sslmode = verify-ca sslrootcert='/a b/c\\'s.pem' user=u password='x y'");
        assert_eq!(rest, "host=h user=u password='x y'");
        assert_eq!(tls.mode, Some(SslMode::VerifyCa));
        assert_eq!(tls.roots, Some(RootCerts::PemFile("/a b/c's.pem".into())));
    }

    #[test]
    fn client_certificates_come_in_pairs_and_never_show_the_key() {
        let (rest, tls) = parts("postgres://h/db?sslcert=%2Fa%2Fc.pem&sslkey=/a/k.pem&x=1");
        assert_eq!(rest, "postgres://h/db?x=1");
        assert_eq!(
            tls.client_cert().unwrap(),
            Some(ClientCert::PemFiles {
                cert: "/a/c.pem".into(),
                key: "/a/k.pem".into()
            })
        );
        let (_, tls) = parts("host=h sslcert=/a/c.pem");
        assert!(matches!(tls.client_cert(), Err(TlsError::HalfClientCert)));
        let (_, tls) = parts("postgres://h/db?sslkey=/a/k.pem");
        assert!(matches!(tls.client_cert(), Err(TlsError::HalfClientCert)));

        let cert = rcgen::generate_simple_self_signed(vec!["c".to_string()]).unwrap();
        let good = cert.cert.pem().into_bytes();
        let key = |k: &[u8]| ClientCert::Pem {
            cert: good.clone(),
            key: k.to_vec(),
        };
        let err = Tls::new(SslMode::Require, None, Some(&key(b"hunter2 secret"))).unwrap_err();
        assert!(
            matches!(
                err,
                TlsError::NoPem {
                    what: PemKind::ClientKey,
                    ..
                }
            ),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(!format!("{:?}", key(b"hunter2")).contains("hunter2"));
        // A key of another certificate: refused by rustls, without its bytes.
        let other = rcgen::KeyPair::generate().unwrap().serialize_pem();
        let err = Tls::new(SslMode::Require, None, Some(&key(other.as_bytes()))).unwrap_err();
        assert!(matches!(err, TlsError::Config(_)), "{err}");
        assert!(
            !err.to_string().contains(other.lines().nth(1).unwrap()),
            "{err}"
        );
        let right = cert.key_pair.serialize_pem();
        assert!(Tls::new(SslMode::Require, None, Some(&key(right.as_bytes()))).is_ok());
        // `disable` never uses it (as libpq).
        assert!(Tls::new(SslMode::Disable, None, Some(&key(b"x"))).is_ok());
        let missing = ClientCert::PemFiles {
            cert: "/nonexistent/c.pem".into(),
            key: "/nonexistent/k.pem".into(),
        };
        let err = Tls::new(SslMode::Require, None, Some(&missing)).unwrap_err();
        assert!(
            matches!(
                err,
                TlsError::File {
                    what: PemKind::ClientCert,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn unknown_modes_are_refused_by_name() {
        let err = split("postgres://h/db?sslmode=allow").unwrap_err();
        assert!(matches!(err, TlsError::BadMode(m) if m == "allow"));
        assert!(split("sslmode=bogus").is_err());
    }

    #[test]
    fn percent_decoding_leaves_broken_escapes_alone() {
        assert_eq!(percent_decode("a%2Fb%zz%"), "a/b%zz%");
        assert_eq!(percent_decode("%4"), "%4");
    }

    #[test]
    fn root_files_that_are_missing_or_empty_are_typed_errors() {
        let err = Tls::new(
            SslMode::VerifyFull,
            Some(&RootCerts::PemFile("/nonexistent/ca.pem".into())),
            None,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                TlsError::File {
                    what: PemKind::RootCerts,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
        let err = Tls::new(
            SslMode::VerifyCa,
            Some(&RootCerts::Pem(b"not pem".to_vec())),
            None,
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                TlsError::NoPem {
                    what: PemKind::RootCerts,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn every_mode_builds_with_system_roots() {
        for mode in [
            SslMode::Disable,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            let tls = Tls::new(mode, None, None).unwrap();
            let mut config = tokio_postgres::Config::new();
            tls.apply(&mut config);
            assert_eq!(
                Tls::mode_of(&config),
                match mode {
                    SslMode::VerifyCa | SslMode::VerifyFull => SslMode::Require,
                    m => m,
                }
            );
        }
    }
}
