//! Wake-ups without polling: a blocking pop on the queue's signal list.
//!
//! Every script that makes jobs claimable pushes one token per job (at most 64 pending) onto
//! `<queue base>signal`, and one more when it files a job in the delayed set ahead of every
//! other (a delayed job, a retry, a rescue): a pending wait sleeps until the due time it saw,
//! so it wakes to look again. An idle worker blocks in `BLPOP` on that list on a connection of its
//! own, so it wakes within a round trip of the enqueue. The wait is cut short when a delayed
//! job falls due before the timeout. A token is only a hint: the worker claims after waking,
//! and a spurious wake-up costs one empty claim. A queue that already has claimable jobs is
//! not waited on at all, unless it is paused: then the wait lasts until its resume pushes
//! tokens (or the timeout), so its workers do not claim in a loop.
//!
//! `BLPOP` reads its timeout in seconds, with fractions since Redis 6.0 only: a wait sends
//! milliseconds as a fraction (a wait cut short by a delayed job ends when the job falls due),
//! and once a server refused that (Redis 5 reads whole seconds only), whole seconds rounded up,
//! never 0 (which `BLPOP` reads as no limit).
//!
//! One wait blocks for at most [`LONGEST_BLOCK`], whatever the timeout (`Duration::MAX`
//! included): a longer one returns then, as a spurious wake-up would, and the caller looks
//! again. That bounds how long a connection that went silent can hold a waiter, and keeps
//! the timeout within what the server reads.

use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::{RedisError, Value};

use crate::backend::RedisBackend;
use crate::record::number;

/// The longest one wait blocks (see the module docs).
const LONGEST_BLOCK: Duration = Duration::from_secs(300);

/// How much longer than the server's own timeout a blocking pop may take before the wait
/// gives up on its connection (a hung connection; the server answers by its timeout).
const LOCAL_GUARD: Duration = Duration::from_secs(2);

/// What a wait looks at first: how many jobs are claimable, the next delayed job (member and
/// due time) if any, and whether the queue is paused.
type Look = (u64, Vec<(String, u64)>, bool);

impl RedisBackend {
    pub(crate) async fn wait(&self, queue: &str, timeout: Duration) {
        let base = self.inner.keys.queue_base(queue);
        let mut wait = timeout.min(LONGEST_BLOCK);
        let mut look = redis::pipe();
        look.cmd("ZCARD").arg(format!("{base}ready"));
        look.cmd("ZRANGE")
            .arg(format!("{base}delayed"))
            .arg(0)
            .arg(0)
            .arg("WITHSCORES");
        look.cmd("EXISTS").arg(format!("{base}paused"));
        let seen: Result<Look, _> = self.pipe_query("looking for due jobs", &look).await;
        // A paused queue hands nothing out, whatever is ready or due: its wait lasts until
        // the resume pushes wake-up tokens.
        if let Ok((ready, next, false)) = seen {
            if ready > 0 {
                // Jobs are claimable already: no reason to wait.
                return;
            }
            if let Some((_, due)) = next.into_iter().next() {
                let until = Duration::from_millis(due.saturating_sub(self.now()));
                wait = wait.min(until);
            }
        }
        if wait < Duration::from_millis(1) {
            return;
        }
        let mut conn = match self.waiter_connection().await {
            Ok(conn) => conn,
            Err(err) => {
                // The server is down: wait out the timeout rather than spin.
                tracing::debug!(error = %err, "no connection for waiting; sleeping");
                tokio::time::sleep(wait).await;
                return;
            }
        };
        let whole_seconds = self.inner.whole_second_waits.load(Ordering::Relaxed);
        let mut blpop = redis::cmd("BLPOP");
        blpop
            .arg(format!("{base}signal"))
            .arg(blpop_timeout(wait, whole_seconds));
        let pop = blpop.query_async::<Value>(&mut conn);
        // The server answers by its own timeout; the local one only guards a hung connection.
        match tokio::time::timeout(wait + LOCAL_GUARD, pop).await {
            Ok(Ok(value)) => {
                let _ = number(&value);
                self.return_waiter(conn);
            }
            Ok(Err(err)) if !whole_seconds && refuses_fractions(&err) => {
                // The connection is sound; the next wait sends whole seconds. This one returns
                // at once, as a spurious wake-up would.
                self.inner.whole_second_waits.store(true, Ordering::Relaxed);
                tracing::info!(
                    "the server reads blocking timeouts in whole seconds only (Redis before \
                     6.0): waits for jobs end on whole seconds from now on"
                );
                self.return_waiter(conn);
            }
            Ok(Err(err)) => {
                tracing::debug!(error = %err, "blocking wait failed");
                tokio::time::sleep(wait.min(Duration::from_millis(100))).await;
            }
            Err(_) => tracing::debug!("blocking wait timed out locally"),
        }
    }
}

/// `BLPOP`'s timeout argument for a wait of `wait`: seconds with three decimals, rounded up
/// to the millisecond, or with `whole_seconds` whole seconds rounded up; never 0, which
/// `BLPOP` reads as no limit.
fn blpop_timeout(wait: Duration, whole_seconds: bool) -> String {
    if whole_seconds {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        seconds.max(1).to_string()
    } else {
        let ms = wait.as_nanos().div_ceil(1_000_000).max(1);
        format!("{}.{:03}", ms / 1_000, ms % 1_000)
    }
}

/// Whether `err` is a server's refusal of a timeout in fractions of a second: Redis before
/// 6.0 reads `BLPOP`'s timeout as an integer, and answers `ERR timeout is not an integer or
/// out of range` to `1.500`.
fn refuses_fractions(err: &RedisError) -> bool {
    err.detail()
        .is_some_and(|detail| detail.contains("timeout is not an integer"))
}

#[cfg(test)]
mod tests {
    use super::{blpop_timeout, refuses_fractions, LONGEST_BLOCK};
    use std::time::Duration;

    #[test]
    fn timeouts_are_rounded_up_and_never_zero() {
        let ms = Duration::from_millis;
        assert_eq!(blpop_timeout(ms(1), false), "0.001");
        assert_eq!(blpop_timeout(Duration::from_micros(1_500), false), "0.002");
        assert_eq!(blpop_timeout(ms(1_000), false), "1.000");
        assert_eq!(blpop_timeout(ms(61_250), false), "61.250");
        assert_eq!(blpop_timeout(Duration::ZERO, false), "0.001");
        assert_eq!(blpop_timeout(LONGEST_BLOCK, false), "300.000");
        // Whole seconds, for Redis 5.
        assert_eq!(blpop_timeout(ms(1), true), "1");
        assert_eq!(blpop_timeout(ms(999), true), "1");
        assert_eq!(blpop_timeout(ms(1_000), true), "1");
        assert_eq!(blpop_timeout(ms(1_001), true), "2");
        assert_eq!(blpop_timeout(Duration::ZERO, true), "1");
        assert_eq!(blpop_timeout(LONGEST_BLOCK, true), "300");
    }

    /// A server error as the `redis` crate parses it off the wire.
    fn server_error(reply: &str) -> redis::RedisError {
        redis::parse_redis_value(reply.as_bytes())
            .and_then(redis::Value::extract_error)
            .expect_err("an error reply")
    }

    #[test]
    fn a_refusal_of_fractions_is_told_from_other_errors() {
        // Redis 5's answer to BLPOP key 1.500.
        let old = server_error("-ERR timeout is not an integer or out of range\r\n");
        assert!(refuses_fractions(&old), "{old}");
        for other in [
            "-ERR timeout is not a float or out of range\r\n",
            "-ERR timeout is out of range\r\n",
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
            "-LOADING Redis is loading the dataset in memory\r\n",
        ] {
            assert!(!refuses_fractions(&server_error(other)), "{other}");
        }
    }
}
