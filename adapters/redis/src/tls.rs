//! TLS (`rediss://`): building the client with the roots a connection trusts, and telling a
//! refused certificate apart from a server that is down.
//!
//! The TLS library is rustls. Without a root certificate the Mozilla root set is trusted
//! (enough for managed Redis services with public certificates); with one, only that root
//! (or those roots) is, which is what a private certificate authority needs. The URL's
//! `#insecure` fragment (the `redis` crate's) turns certificate checks off altogether.

use std::error::Error as _;

use fairq_worker::BackendError;
use redis::{Client, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use crate::options::RedisOptions;

/// The query parameter naming a PEM file of root certificates.
pub(crate) const CACERT_PARAM: &str = "cacert";

/// Builds the client for `url` with the roots of `options` or of the URL's `cacert`
/// parameter (which wins, being the more specific configuration).
pub(crate) fn client(url: &str, options: &RedisOptions) -> Result<Client, BackendError> {
    let (url, cacert) = take_param(url, CACERT_PARAM)?;
    let root = match cacert {
        Some(path) => Some(std::fs::read(&path).map_err(|e| {
            BackendError::Invalid(format!(
                "cannot read the root certificate file {path} (from ?{CACERT_PARAM}=): {e}"
            ))
        })?),
        None => options.root_certificate.clone(),
    };
    let invalid = |e: redis::RedisError| BackendError::Invalid(format!("invalid Redis URL: {e}"));
    if !is_tls(&url) {
        if root.is_some() {
            return Err(BackendError::Invalid(
                "a root certificate was given but the URL is not a TLS one: use rediss://".into(),
            ));
        }
        return Client::open(url.as_str()).map_err(invalid);
    }
    install_crypto_provider();
    match root {
        None => Client::open(url.as_str()).map_err(invalid),
        Some(pem) => {
            let count = CertificateDer::pem_slice_iter(&pem)
                .try_fold(0usize, |n, cert| cert.map(|_| n + 1))
                .map_err(|e| {
                    BackendError::Invalid(format!("the root certificate is not valid PEM: {e}"))
                })?;
            if count == 0 {
                return Err(BackendError::Invalid(
                    "the root certificate holds no PEM certificate".into(),
                ));
            }
            Client::build_with_tls(
                url.as_str(),
                TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                },
            )
            .map_err(invalid)
        }
    }
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

/// Removes query parameter `name` from `url`; returns the rest and the value (the last one
/// given wins). The fragment (`#insecure`) stays.
fn take_param(url: &str, name: &str) -> Result<(String, Option<String>), BackendError> {
    let (body, fragment) = match url.split_once('#') {
        Some((body, fragment)) => (body, Some(fragment)),
        None => (url, None),
    };
    let Some((base, query)) = body.split_once('?') else {
        return Ok((url.to_string(), None));
    };
    let mut value = None;
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some((key, v)) if key == name => {
                if v.is_empty() {
                    return Err(BackendError::Invalid(format!("{name}= needs a file name")));
                }
                value = Some(percent_decode(v));
            }
            _ => kept.push(pair),
        }
    }
    let mut rest = base.to_string();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    if let Some(fragment) = fragment {
        rest.push('#');
        rest.push_str(fragment);
    }
    Ok((rest, value))
}

/// Decodes `%XX` escapes (a path with spaces or `&` in a URL); anything else is kept as is.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cacert_is_taken_out_and_the_fragment_kept() {
        let (url, value) = take_param(
            "rediss://h:1/0?cacert=/etc/ca%20x.pem&protocol=resp3#insecure",
            "cacert",
        )
        .unwrap();
        assert_eq!(url, "rediss://h:1/0?protocol=resp3#insecure");
        assert_eq!(value.as_deref(), Some("/etc/ca x.pem"));
        let (url, value) = take_param("rediss://h/?cacert=a.pem", "cacert").unwrap();
        assert_eq!(
            (url.as_str(), value.as_deref()),
            ("rediss://h/", Some("a.pem"))
        );
        assert_eq!(
            take_param("redis://h/", "cacert").unwrap(),
            ("redis://h/".to_string(), None)
        );
        assert!(take_param("rediss://h/?cacert=", "cacert").is_err());
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz%41"), "%zzA");
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
        let err = client("redis://127.0.0.1/", &options).unwrap_err();
        assert!(err.to_string().contains("use rediss://"), "{err}");
        let err = client(
            "rediss://127.0.0.1/?cacert=/no/such/file.pem",
            &RedisOptions::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/no/such/file.pem"), "{err}");
        assert!(client("rediss://127.0.0.1/#insecure", &RedisOptions::new()).is_ok());
    }
}
