//! Sending commands and script calls: repeats after broken connections, reloading scripts the
//! server forgot, and waiting for replicas before acknowledging.

use std::time::Duration;

use fairq_worker::BackendError;
use redis::{Cmd, ErrorKind, FromRedisValue, Pipeline, Value};

use crate::backend::RedisBackend;
use crate::error::{self, is_transient, not_run, RedisStoreError};
use crate::keys;
use crate::record::number;
use crate::scripts::Named;

/// One script call on one queue.
pub(crate) struct Call<'a> {
    /// The script.
    pub(crate) named: &'a Named,
    /// The queue's key base (`KEYS[1]`).
    pub(crate) base: String,
    /// `ARGV`.
    pub(crate) args: Vec<Vec<u8>>,
    /// The argument set to `1` when the call is repeated after its reply was lost, for
    /// scripts that recognise their own earlier success.
    pub(crate) retry_flag: Option<usize>,
    /// Whether the answer acknowledges a write that must reach the replicas first (see
    /// [`RedisOptions::replicas`](crate::RedisOptions::replicas)).
    pub(crate) acknowledged: bool,
    /// Whether the call may be repeated after a broken connection (a call the server refused
    /// as a whole, see [`not_run`], is repeated either way).
    pub(crate) repeatable: bool,
}

impl<'a> Call<'a> {
    /// A call of `named` on the queue whose key base is `base`.
    pub(crate) fn new(named: &'a Named, base: String, args: Vec<Vec<u8>>) -> Self {
        Call {
            named,
            base,
            args,
            retry_flag: None,
            acknowledged: false,
            repeatable: true,
        }
    }

    /// Marks argument `index` as the retry flag.
    pub(crate) fn retried_at(mut self, index: usize) -> Self {
        self.retry_flag = Some(index);
        self
    }

    /// Marks the call as one never to repeat after a broken connection.
    pub(crate) fn once(mut self) -> Self {
        self.repeatable = false;
        self
    }

    /// Marks the call as acknowledging a write.
    pub(crate) fn acknowledged(mut self) -> Self {
        self.acknowledged = true;
        self
    }
}

impl RedisBackend {
    /// Runs a script call, repeating it (with its retry flag set) when the connection broke
    /// before the reply arrived, and loading the scripts when the server does not know it.
    ///
    /// A call the server refused as a whole ([`not_run`]: a redirection, `TRYAGAIN` while
    /// the queue's slot moves between masters, ...) is repeated too, but without setting the
    /// retry flag: nothing of it ran, so the repeat is a first try. Set after such a refusal,
    /// the flag would make a settlement of a job that had already succeeded under the same
    /// token answer as if it had gone through (a second acknowledgement) instead of being
    /// refused. A flag set by an earlier lost reply stays set.
    pub(crate) async fn run(&self, call: Call<'_>) -> Result<Value, BackendError> {
        let Call {
            named,
            base,
            mut args,
            retry_flag,
            acknowledged,
            repeatable,
        } = call;
        let retries = self.inner.options.retries;
        let wait = self.inner.options.replicas.filter(|_| acknowledged);
        let mut conn = self.inner.conn.clone();
        let mut attempt = 0;
        let mut reloaded = false;
        loop {
            // After a NOSCRIPT the call is sent with its source (EVAL), which also caches the
            // script on whichever node runs it: on a cluster, the node of this queue's slot.
            let mut evalsha = if reloaded {
                let mut eval = redis::cmd("EVAL");
                eval.arg(named.source.as_str());
                eval
            } else {
                let mut evalsha = redis::cmd("EVALSHA");
                evalsha.arg(named.hash());
                evalsha
            };
            keys::declare(&mut evalsha, &base, named.per_queue);
            for arg in &args {
                evalsha.arg(arg.as_slice());
            }
            let reply = match wait {
                None => evalsha.query_async::<Value>(&mut conn).await.map(Ok),
                Some(wait) => {
                    let mut pipe = redis::pipe();
                    pipe.add_command(evalsha);
                    pipe.cmd("WAIT")
                        .arg(wait.replicas)
                        .arg(wait_ms(wait.timeout));
                    pipe.query_async::<(Value, Value)>(&mut conn)
                        .await
                        .map(|(value, confirmed)| {
                            let confirmed = number(&confirmed).unwrap_or(0);
                            if confirmed < u64::from(wait.replicas) {
                                Err(confirmed)
                            } else {
                                Ok(value)
                            }
                        })
                }
            };
            match reply {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(confirmed)) => {
                    // The primary has the change; too few replicas confirmed it in time.
                    let wait = wait.unwrap_or_default();
                    return Err(BackendError::Unavailable(Box::new(
                        RedisStoreError::Unconfirmed {
                            op: named.name,
                            confirmed,
                            wanted: wait.replicas,
                            timeout: wait.timeout,
                        },
                    )));
                }
                Err(err) if err.kind() == ErrorKind::NoScriptError && !reloaded => {
                    reloaded = true;
                    // Best effort: the EVAL above does not depend on it.
                    if let Err(err) = self.load_scripts().await {
                        tracing::debug!(error = %err, "reloading scripts failed");
                    }
                }
                Err(err)
                    if is_transient(&err) && (repeatable || not_run(&err)) && attempt < retries =>
                {
                    attempt += 1;
                    tracing::debug!(script = named.name, attempt, error = %err, "retrying");
                    if let Some(index) = retry_flag.filter(|_| !not_run(&err)) {
                        args[index] = b"1".to_vec();
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(err) => return Err(error::script(named.name, err)),
            }
        }
    }

    /// Runs one command, repeating it after a broken connection.
    pub(crate) async fn cmd_query<T: FromRedisValue>(
        &self,
        op: &'static str,
        cmd: &Cmd,
    ) -> Result<T, BackendError> {
        let mut conn = self.inner.conn.clone();
        let mut attempt = 0;
        loop {
            match cmd.query_async::<T>(&mut conn).await {
                Ok(value) => return Ok(value),
                Err(err) if is_transient(&err) && attempt < self.inner.options.retries => {
                    attempt += 1;
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(err) => return Err(error::command(op, err)),
            }
        }
    }

    /// Runs a pipeline of reads (or other commands safe to repeat), repeating it after a
    /// broken connection.
    pub(crate) async fn pipe_query<T: FromRedisValue>(
        &self,
        op: &'static str,
        pipe: &Pipeline,
    ) -> Result<T, BackendError> {
        let mut conn = self.inner.conn.clone();
        let mut attempt = 0;
        loop {
            match pipe.query_async::<T>(&mut conn).await {
                Ok(value) => return Ok(value),
                Err(err) if is_transient(&err) && attempt < self.inner.options.retries => {
                    attempt += 1;
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(err) => return Err(error::command(op, err)),
            }
        }
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((20u64 << attempt.min(5)).min(500))
}

/// The shortest time a request id's kept reply lives (`req:<id>`): a minute, as before the
/// time was computed.
const MIN_REQUEST_KEEP: Duration = Duration::from_secs(60);

/// The longest: a day, for settings whose window has no real end (a replica wait of
/// `Duration::MAX`).
const MAX_REQUEST_KEEP: Duration = Duration::from_secs(24 * 60 * 60);

/// How long a call of a client with `options` may go on trying: every try (the first and
/// [`RedisOptions::retries`](crate::RedisOptions::retries) repeats) may wait for a connection
/// (the connect timeout) and then for its reply (the reply timeout), and the repeats back
/// off in between.
pub(crate) fn retry_window(options: &crate::RedisOptions) -> Duration {
    let per_try = options
        .connect_timeout
        .saturating_add(options.reply_timeout());
    let tries = options.retries.saturating_add(1);
    // backoff(1..=4) is 40, 80, 160, 320 ms; from the fifth repeat on, 500 ms each.
    let early: Duration = (1..=options.retries.min(4)).map(backoff).sum();
    let late = backoff(5).saturating_mul(options.retries.saturating_sub(4));
    per_try
        .saturating_mul(tries)
        .saturating_add(early)
        .saturating_add(late)
}

/// How long a script keeps a call's reply under its request id (`req:<id>`, in
/// milliseconds): the client's whole [`retry_window`], at least a minute and at most a day.
/// Every try looks for the kept reply, so a try that reaches the server late (after a repeat
/// of it went through) answers what the repeat did instead of running again.
pub(crate) fn request_keep_ms(options: &crate::RedisOptions) -> u64 {
    let keep = retry_window(options).clamp(MIN_REQUEST_KEEP, MAX_REQUEST_KEEP);
    u64::try_from(keep.as_millis()).unwrap_or(u64::MAX)
}

/// `WAIT`'s timeout argument for `timeout`, in whole milliseconds rounded up. To `WAIT`, 0
/// means "no limit", so a timeout under a millisecond (`Duration::ZERO` too) waits 1 ms
/// rather than for ever, and one past what Redis reads (a signed 64-bit count of
/// milliseconds; `Duration::MAX`) is 0, no limit, which is what so long a wait asks for.
/// The timeout as milliseconds went out truncated before: a sub-millisecond timeout blocked
/// for ever and `Duration::MAX` was refused as out of range.
fn wait_ms(timeout: std::time::Duration) -> u64 {
    let ms = timeout.as_nanos().div_ceil(1_000_000).max(1);
    u64::try_from(ms)
        .ok()
        .filter(|ms| *ms <= i64::MAX as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::{request_keep_ms, retry_window, wait_ms};
    use crate::RedisOptions;
    use std::time::Duration;

    #[test]
    fn a_request_is_kept_for_the_whole_retry_window() {
        // Defaults: 4 tries of 5 s connect + 10 s reply, backing off 40 + 80 + 160 ms.
        let defaults = RedisOptions::new();
        assert_eq!(retry_window(&defaults), Duration::from_millis(60_280));
        assert_eq!(request_keep_ms(&defaults), 60_280);
        let patient = RedisOptions {
            retries: 10,
            ..RedisOptions::new().response_timeout(Duration::from_secs(20))
        }
        .wait_for_replicas(1, Duration::from_secs(2));
        // 11 tries of 5 + 22 s, backing off 40 + 80 + 160 + 320 + 6 * 500 ms.
        assert_eq!(request_keep_ms(&patient), 11 * 27_000 + 3_600);
        let quick = RedisOptions {
            retries: 0,
            ..RedisOptions::new()
                .connect_timeout(Duration::from_millis(100))
                .response_timeout(Duration::from_millis(100))
        };
        assert_eq!(request_keep_ms(&quick), 60_000);
        let endless = RedisOptions {
            retries: u32::MAX,
            ..RedisOptions::new().wait_for_replicas(1, Duration::MAX)
        };
        assert_eq!(request_keep_ms(&endless), 24 * 60 * 60 * 1000);
    }

    #[test]
    fn wait_timeouts_never_become_redis_no_limit_by_accident() {
        assert_eq!(wait_ms(Duration::ZERO), 1);
        assert_eq!(wait_ms(Duration::from_micros(500)), 1);
        assert_eq!(wait_ms(Duration::from_micros(1_500)), 2);
        assert_eq!(wait_ms(Duration::from_secs(2)), 2_000);
        assert_eq!(
            wait_ms(Duration::from_millis(i64::MAX as u64)),
            i64::MAX as u64
        );
        assert_eq!(wait_ms(Duration::from_secs(u64::MAX)), 0);
        assert_eq!(wait_ms(Duration::MAX), 0);
    }
}
