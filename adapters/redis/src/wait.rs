//! Wake-ups without polling: a blocking pop on the queue's signal list.
//!
//! Every script that makes jobs claimable pushes one token per job (at most 64 pending) onto
//! `<queue base>signal`. An idle worker blocks in `BLPOP` on that list on a connection of its
//! own, so it wakes within a round trip of the enqueue. The wait is cut short when a delayed
//! job falls due before the timeout. A token is only a hint: the worker claims after waking,
//! and a spurious wake-up costs one empty claim. A queue that already has claimable jobs is
//! not waited on at all, unless it is paused: then the wait lasts until its resume pushes
//! tokens (or the timeout), so its workers do not claim in a loop.
//!
//! One wait blocks for at most [`LONGEST_BLOCK`], whatever the timeout (`Duration::MAX`
//! included): a longer one returns then, as a spurious wake-up would, and the caller looks
//! again. That bounds how long a connection that went silent can hold a waiter, and keeps
//! the timeout within what the server reads.

use std::time::Duration;

use redis::Value;

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
        let seconds = wait.as_secs_f64();
        let mut blpop = redis::cmd("BLPOP");
        blpop
            .arg(format!("{base}signal"))
            .arg(format!("{seconds:.3}"));
        let pop = blpop.query_async::<Value>(&mut conn);
        // The server answers by its own timeout; the local one only guards a hung connection.
        match tokio::time::timeout(wait + LOCAL_GUARD, pop).await {
            Ok(Ok(value)) => {
                let _ = number(&value);
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
