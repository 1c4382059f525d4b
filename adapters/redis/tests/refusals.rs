//! Refusals that ran nothing and pass by themselves: another client's script running past the
//! busy threshold (`BUSY`), and too few replicas for `min-replicas-to-write` (`NOREPLICAS`).
//! The `redis` crate has no error kind for them; they were taken for script failures
//! (`BackendError::Store`, never repeated) before.

mod common;

use std::time::Duration;

use common::proxy::Proxy;
use common::server::{self, PrivateRedis};
use fairq_redis::{RedisBackend, RedisOptions};
use fairq_worker::{Backend, BackendError, ManualClock, NewJob};

const LEASE: Duration = Duration::from_secs(30);

fn clock() -> ManualClock {
    ManualClock::new(fairq_worker::conformance::START)
}

/// A blocking connection to the private server on `port`.
fn connection(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("private server URL")
        .get_connection_with_timeout(Duration::from_secs(10))
        .expect("connect to the private server")
}

/// While another client's script holds the server (past a busy threshold of 50 ms), an
/// enqueue is answered `BUSY`: with no repeats left it fails as transient (nothing ran), and
/// with repeats it goes through once the script has ended.
#[test]
fn an_enqueue_refused_while_a_long_script_runs_is_transient_and_repeated() {
    if !server::installed() {
        return;
    }
    // `lua-time-limit` is the busy threshold's name before Redis 7, and an alias since.
    let server = PrivateRedis::start(&["--lua-time-limit", "50"]);
    let direct = format!("redis://127.0.0.1:{}/", server.port);
    let proxy = Proxy::start(format!("127.0.0.1:{}", server.port));
    let proxied = format!("redis://127.0.0.1:{}/", proxy.port());
    common::runtime().block_on(async {
        let options = common::options(clock());
        // Repeats every 500 ms at most, for far longer than the test takes.
        let patient = RedisOptions {
            retries: 1_000,
            ..options.clone()
        };
        let impatient = RedisOptions {
            retries: 0,
            ..options
        };
        let patient = RedisBackend::connect(&proxied, patient)
            .await
            .expect("connect");
        let impatient = RedisBackend::connect(&direct, impatient)
            .await
            .expect("connect");
        // The queue registered and known to both clients before the server is held.
        let first = patient
            .enqueue(NewJob::new("q", "k", b"first".to_vec()))
            .await
            .unwrap();
        assert_eq!(impatient.stats().await.unwrap().len(), 1);

        // A script that runs until it is killed (it writes nothing, so it can be).
        let spinner = std::thread::spawn({
            let port = server.port;
            move || {
                redis::cmd("EVAL")
                    .arg("while true do end")
                    .arg(0)
                    .query::<()>(&mut connection(port))
            }
        });
        let mut probe = connection(server.port);
        loop {
            match redis::cmd("PING").query::<String>(&mut probe) {
                Ok(_) => continue,
                Err(err) if err.code() == Some("BUSY") => break,
                Err(err) => panic!("PING: {err}"),
            }
        }

        let err = impatient
            .enqueue(NewJob::new("q", "k", b"refused".to_vec()))
            .await
            .expect_err("the server is busy");
        assert!(matches!(err, BackendError::Unavailable(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("nothing of it ran") && text.contains("BUSY"),
            "{text}"
        );

        let enqueue = tokio::spawn({
            let patient = patient.clone();
            async move {
                patient
                    .enqueue(NewJob::new("q", "k", b"second".to_vec()))
                    .await
            }
        });
        // The script ends only once the patient enqueue has been refused.
        while proxy.errors("BUSY") == 0 {
            tokio::task::yield_now().await;
        }
        let killed: String = redis::cmd("SCRIPT")
            .arg("KILL")
            .query(&mut probe)
            .expect("SCRIPT KILL");
        assert_eq!(killed, "OK");
        assert!(spinner.join().expect("the spinner").is_err());
        let second = enqueue
            .await
            .expect("the enqueue task")
            .expect("enqueued once the script ended");

        let jobs = patient.claim("q", 10, LEASE).await.unwrap();
        let got: Vec<_> = jobs
            .iter()
            .map(|j| (j.claim.id, j.payload.clone()))
            .collect();
        assert_eq!(
            got,
            [(first, b"first".to_vec()), (second, b"second".to_vec())]
        );
    });
}

/// A server with fewer replicas than `min-replicas-to-write` refuses every write (a script's
/// at its first write command, before it changed anything): transient, and a call repeated
/// once there are enough replicas (here: once the setting is lowered) goes through.
#[test]
fn an_enqueue_refused_for_want_of_replicas_is_transient_and_repeated() {
    if !server::installed() {
        return;
    }
    let server = PrivateRedis::start(&["--min-replicas-to-write", "1"]);
    let direct = format!("redis://127.0.0.1:{}/", server.port);
    let proxy = Proxy::start(format!("127.0.0.1:{}", server.port));
    let proxied = format!("redis://127.0.0.1:{}/", proxy.port());
    common::runtime().block_on(async {
        let options = common::options(clock());
        let impatient = RedisOptions {
            retries: 1,
            ..options.clone()
        };
        let patient = RedisOptions {
            retries: 1_000,
            ..options
        };
        let impatient = RedisBackend::connect(&direct, impatient)
            .await
            .expect("connect");
        let err = impatient
            .enqueue(NewJob::new("q", "k", b"refused".to_vec()))
            .await
            .expect_err("no replica");
        assert!(matches!(err, BackendError::Unavailable(_)), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("nothing of it ran") && text.contains("NOREPLICAS"),
            "{text}"
        );

        let patient = RedisBackend::connect(&proxied, patient)
            .await
            .expect("connect");
        let enqueue = tokio::spawn({
            let patient = patient.clone();
            async move {
                patient
                    .enqueue(NewJob::new("q", "k", b"later".to_vec()))
                    .await
            }
        });
        while proxy.errors("NOREPLICAS") == 0 {
            tokio::task::yield_now().await;
        }
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("min-replicas-to-write")
            .arg(0)
            .query(&mut connection(server.port))
            .expect("CONFIG SET");
        let id = enqueue
            .await
            .expect("the enqueue task")
            .expect("enqueued once replicas are no longer wanted");
        let jobs = patient.claim("q", 10, LEASE).await.unwrap();
        let got: Vec<_> = jobs
            .iter()
            .map(|j| (j.claim.id, j.payload.clone()))
            .collect();
        assert_eq!(got, [(id, b"later".to_vec())]);
    });
}
