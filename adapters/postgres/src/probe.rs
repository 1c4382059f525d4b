//! Telling a PostgreSQL server from another service on the same address.
//!
//! A client that reaches, say, Redis on a `postgres://` URL sends its startup message and
//! waits: Redis reads commands up to a newline, which the startup message never contains, so
//! it answers nothing, and the connection attempt ends only at the pool's timeout with
//! nothing said about why. When the first connection is slow, [`not_postgres`] sends the
//! address one line of text, `FAIRQ-PROBE`. To PostgreSQL its first four bytes are the length
//! of a startup packet, far over the limit: the server closes the connection without a word
//! (logging "invalid length of startup packet"). A line-based service (Redis, SMTP, an HTTP
//! server) answers it with an error at once; any answer at all means the address is not a
//! PostgreSQL server. (A binary probe would not do: Redis stops reading a line at a zero
//! byte and never answers it.)

use std::net::IpAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_postgres::config::Host;

use crate::error::PgError;

/// How long the first connection may take before the address is probed. Not a limit: the
/// connection attempt goes on meanwhile, and a PostgreSQL server is never judged by time.
pub(crate) const PROBE_AFTER: Duration = Duration::from_millis(300);

/// One line of text: to PostgreSQL, a startup packet of over a gigabyte, refused unread.
const PROBE: &[u8] = b"FAIRQ-PROBE\r\n";

/// `Some(PgError::NotPostgres)` when the first TCP address of `config` answers the probe
/// (which PostgreSQL never does); `None` when it closes the connection without
/// answering, cannot be reached, says nothing within `wait`, or is a Unix socket.
pub(crate) async fn not_postgres(
    config: &tokio_postgres::Config,
    wait: Duration,
) -> Option<PgError> {
    let host = config.get_hosts().iter().find_map(|h| match h {
        Host::Tcp(name) => Some(name.clone()),
        #[allow(unreachable_patterns)]
        _ => None,
    })?;
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let connect_to = match config.get_hostaddrs().first() {
        Some(ip) => ip.to_string(),
        None => host.clone(),
    };
    let target = match connect_to.parse::<IpAddr>() {
        Ok(IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        _ => format!("{connect_to}:{port}"),
    };
    let exchange = async {
        let mut stream = TcpStream::connect(&target).await.ok()?;
        stream.write_all(PROBE).await.ok()?;
        let mut answer = [0u8; 64];
        let n = stream.read(&mut answer).await.ok()?;
        (n > 0).then(|| answer[..n].to_vec())
    };
    let answer = tokio::time::timeout(wait, exchange).await.ok()??;
    Some(PgError::NotPostgres {
        address: format!("{host}:{port}"),
        answer: printable(&answer),
    })
}

/// The first line of an answer, with anything unprintable escaped.
fn printable(answer: &[u8]) -> String {
    let line = answer
        .split(|b| *b == b'\n' || *b == b'\r')
        .next()
        .unwrap_or_default();
    line.iter()
        .take(48)
        .flat_map(|b| std::ascii::escape_default(*b))
        .map(char::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_shown_as_one_printable_line() {
        assert_eq!(
            printable(b"-ERR unknown command\r\n-ERR x"),
            "-ERR unknown command"
        );
        assert_eq!(printable(b"\x00\x01ok"), "\\x00\\x01ok");
    }

    #[test]
    fn the_probe_is_an_oversized_startup_packet_to_postgres() {
        let length = u32::from_be_bytes(PROBE[0..4].try_into().unwrap());
        // PostgreSQL's limit for a startup packet is 10,000 bytes.
        assert!(length > 10_000);
        assert!(!PROBE.contains(&0) && PROBE.ends_with(b"\n"));
    }
}
