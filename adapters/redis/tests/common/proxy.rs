//! A TCP proxy in front of the test server whose connections can be made to go silent: a
//! frozen connection stays open (no FIN, no reset) but carries nothing more in either
//! direction, like one whose state a firewall or NAT dropped. Connections opened after a
//! freeze work normally. The proxy can also cut the connection that carries the next reply,
//! dropping that reply: the request ran on the server, its answer never arrives. And it can
//! play a Redis older than 6.0 to blocking pops: a `BLPOP` whose timeout has a fraction is
//! answered with Redis 5's refusal instead of being sent on. It counts the error replies the
//! server sends, by code, so a test knows a call was refused before it changes what refused it.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

struct State {
    /// Connections numbered below this are frozen.
    frozen_below: AtomicU64,
    /// Set by `cut_next_reply`: the next bytes from the server are dropped and their
    /// connection closed.
    cut_reply: AtomicBool,
    /// Connections accepted so far.
    accepted: AtomicU64,
    /// Set by `refuse_fractional_timeouts`.
    old_blpop: AtomicBool,
    /// `BLPOP`s refused for a fractional timeout, and sent on.
    blpops_refused: AtomicU64,
    blpops_sent: AtomicU64,
    /// Error replies from the server, by code (`BUSY`, `NOREPLICAS`, ...).
    errors: Mutex<HashMap<String, u64>>,
    /// Set when the proxy is dropped: frozen connections close and their threads end.
    stop: Mutex<bool>,
    stopped: Condvar,
    closing: AtomicBool,
}

/// The proxy; dropping it closes every connection.
pub struct Proxy {
    port: u16,
    state: Arc<State>,
}

impl Proxy {
    /// A proxy on a free loopback port forwarding to `upstream` (`host:port`).
    pub fn start(upstream: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let state = Arc::new(State {
            frozen_below: AtomicU64::new(0),
            cut_reply: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            old_blpop: AtomicBool::new(false),
            blpops_refused: AtomicU64::new(0),
            blpops_sent: AtomicU64::new(0),
            errors: Mutex::new(HashMap::new()),
            stop: Mutex::new(false),
            stopped: Condvar::new(),
            closing: AtomicBool::new(false),
        });
        let st = Arc::clone(&state);
        thread::spawn(move || {
            for client in listener.incoming() {
                if st.closing.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let id = st.accepted.fetch_add(1, Ordering::SeqCst);
                for (from, to, replies) in [
                    (client.try_clone(), server.try_clone(), false),
                    (server.try_clone(), client.try_clone(), true),
                ] {
                    let (Ok(from), Ok(to)) = (from, to) else {
                        continue;
                    };
                    let st = Arc::clone(&st);
                    thread::spawn(move || pipe(id, from, to, replies, &st));
                }
            }
        });
        Proxy { port, state }
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every connection open now goes silent.
    pub fn freeze(&self) {
        let accepted = self.state.accepted.load(Ordering::SeqCst);
        self.state.frozen_below.store(accepted, Ordering::SeqCst);
    }

    /// The next reply the server sends, on whichever connection, is dropped and its
    /// connection closed (both ways): the client sees the connection break after its request
    /// ran. Connections opened afterwards work normally.
    pub fn cut_next_reply(&self) {
        self.state.cut_reply.store(true, Ordering::SeqCst);
    }

    /// Whether a reply armed by [`cut_next_reply`](Self::cut_next_reply) is still to come.
    pub fn cut_pending(&self) -> bool {
        self.state.cut_reply.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// From now on, a `BLPOP` whose timeout has a fraction (`1.500`) is answered as Redis
    /// before 6.0 answers it (`ERR timeout is not an integer or out of range`), without
    /// reaching the server; one with whole seconds goes through.
    pub fn refuse_fractional_timeouts(&self) {
        self.state.old_blpop.store(true, Ordering::SeqCst);
    }

    /// Error replies with `code` (`BUSY`, `NOREPLICAS`, ...) the server sent so far, on any
    /// connection. (Counted where a read from the server starts with one: a connection that
    /// sends one request at a time reads each reply on its own.)
    pub fn errors(&self, code: &str) -> u64 {
        let errors = self.state.errors.lock().unwrap_or_else(|e| e.into_inner());
        errors.get(code).copied().unwrap_or(0)
    }

    /// `BLPOP`s refused for their fractional timeout, and sent on, since
    /// [`refuse_fractional_timeouts`](Self::refuse_fractional_timeouts).
    pub fn blpops(&self) -> (u64, u64) {
        (
            self.state.blpops_refused.load(Ordering::SeqCst),
            self.state.blpops_sent.load(Ordering::SeqCst),
        )
    }
}

/// The timeout argument of `request` when it is one whole `BLPOP key timeout` command (as a
/// waiting connection sends them, one at a time).
fn blpop_timeout(request: &[u8]) -> Option<&[u8]> {
    let rest = request.strip_prefix(b"*3\r\n$5\r\nBLPOP\r\n")?;
    let (_key, rest) = bulk(rest)?;
    let (timeout, rest) = bulk(rest)?;
    rest.is_empty().then_some(timeout)
}

/// The code of the error reply `reply` starts with (`-BUSY Redis is busy ...` gives `BUSY`).
fn error_code(reply: &[u8]) -> Option<String> {
    let line = reply.strip_prefix(b"-")?;
    let end = line.iter().position(|b| *b == b' ' || *b == b'\r')?;
    Some(String::from_utf8_lossy(&line[..end]).into_owned())
}

/// One RESP bulk string at the start of `bytes`, and what follows it.
fn bulk(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let bytes = bytes.strip_prefix(b"$")?;
    let end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let len: usize = std::str::from_utf8(&bytes[..end]).ok()?.parse().ok()?;
    let body = bytes.get(end + 2..end + 2 + len)?;
    let rest = bytes.get(end + 4 + len..)?;
    Some((body, rest))
}

/// Copies `from` to `to` until either closes or the connection is frozen; a frozen one keeps
/// both sockets open (dropping what it read) until the proxy is dropped. On the server's side
/// (`replies`), an armed cut drops what was read and closes the connection.
fn pipe(id: u64, mut from: TcpStream, mut to: TcpStream, replies: bool, st: &State) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if id < st.frozen_below.load(Ordering::SeqCst) {
            let mut stop = st.stop.lock().unwrap_or_else(|e| e.into_inner());
            while !*stop {
                stop = st.stopped.wait(stop).unwrap_or_else(|e| e.into_inner());
            }
            break;
        }
        if replies && st.cut_reply.swap(false, Ordering::SeqCst) {
            break;
        }
        if replies {
            if let Some(code) = error_code(&buf[..n]) {
                let mut errors = st.errors.lock().unwrap_or_else(|e| e.into_inner());
                *errors.entry(code).or_default() += 1;
            }
        }
        if !replies && st.old_blpop.load(Ordering::SeqCst) {
            if let Some(timeout) = blpop_timeout(&buf[..n]) {
                if timeout.contains(&b'.') {
                    st.blpops_refused.fetch_add(1, Ordering::SeqCst);
                    let refusal = b"-ERR timeout is not an integer or out of range\r\n";
                    if from.write_all(refusal).is_err() {
                        break;
                    }
                    continue;
                }
                st.blpops_sent.fetch_add(1, Ordering::SeqCst);
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.closing.store(true, Ordering::SeqCst);
        *self.state.stop.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.state.stopped.notify_all();
        // Wakes the accept loop so that it sees `closing`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}
