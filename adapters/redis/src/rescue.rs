//! Rescue of expired leases, and the queue housekeeping that rides along with it.

use fairq_core::job::{verdict, DeadReason, Outcome, Setback};
use fairq_worker::{BackendError, JobId};

use crate::backend::RedisBackend;
use crate::call::Call;
use crate::record::{self, ms, number, reason_name};

/// `HMGET token attempts retry` of a job whose lease expired, as stored: each field is
/// parsed on its own, so that one unreadable record does not fail the batch.
type ExpiredRow = (Option<Vec<u8>>, Option<Vec<u8>>, Option<Vec<u8>>);

/// A count stored in a job hash (token, attempts), if it is one: decimal digits only, at most
/// 15 of them, as the scripts' `whole` reads them (so that what this side cannot read, the
/// script sets aside).
fn whole(raw: Option<&[u8]>) -> Option<u64> {
    let raw = raw?;
    if raw.is_empty() || raw.len() > 15 || !raw.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// Fairness tails looked at per housekeeping call.
const TAIL_SWEEP: u32 = 200;

/// How long a job blocked on another queue waits between rechecks of its dependency (ms).
const RECHECK_MS: u64 = 60_000;

/// Blocked jobs rechecked per housekeeping call.
const RECHECK_LIMIT: u32 = 100;

impl RedisBackend {
    pub(crate) async fn rescue_queue(&self, queue: &str) -> Result<u64, BackendError> {
        let base = self.inner.keys.queue_base(queue);
        self.housekeeping(queue).await?;
        let batch = self.inner.options.batch.max(1);
        let mut rescued = 0;
        loop {
            let now = self.now();
            let mut expired: Vec<u64> = self
                .cmd_query(
                    "finding expired leases",
                    redis::cmd("ZRANGEBYSCORE")
                        .arg(format!("{base}leased"))
                        .arg("-inf")
                        .arg(now)
                        .arg("LIMIT")
                        .arg(0)
                        .arg(batch),
                )
                .await?;
            if expired.is_empty() {
                return Ok(rescued);
            }
            // Taken back in id order, as the reference store does.
            expired.sort_unstable();
            let mut pipe = redis::pipe();
            for id in &expired {
                pipe.cmd("HMGET")
                    .arg(format!("{base}job:{id}"))
                    .arg("token")
                    .arg("attempts")
                    .arg("retry");
            }
            let rows: Vec<ExpiredRow> = self.pipe_query("reading expired jobs", &pipe).await?;
            let mut args = vec![ms(now).into_bytes()];
            for (id, (token, attempts, retry)) in expired.iter().zip(rows) {
                let job = JobId(*id);
                let (Some(token), Some(attempts)) =
                    (whole(token.as_deref()), whole(attempts.as_deref()))
                else {
                    // Gone, or its token or attempt counter is no whole number (no claim
                    // hands such a job out, but the record may have been written behind the
                    // store's back): the script sets it aside, as a claim does.
                    tracing::warn!(%job, "missing or unreadable token or attempt counter; the job is set aside");
                    args.push(id.to_string().into_bytes());
                    args.push(Vec::new());
                    args.push(b"corrupt".to_vec());
                    args.push(ms(now).into_bytes());
                    args.push(reason_name(DeadReason::Discarded).as_bytes().to_vec());
                    continue;
                };
                let attempts = u32::try_from(attempts).unwrap_or(u32::MAX);
                let retry = retry.unwrap_or_default();
                let outcome = match record::policy(job, &retry) {
                    Ok(policy) => {
                        verdict(&policy, attempts, Setback::LeaseExpired, now, self.random())
                    }
                    Err(err) => {
                        tracing::warn!(%job, error = %err, "unreadable retry policy; the job dies");
                        Outcome::Dead {
                            reason: DeadReason::Discarded,
                        }
                    }
                };
                let (decision, run_at, reason) = match outcome {
                    Outcome::Retry { run_at } => ("retry", run_at, ""),
                    Outcome::Dead { reason } => ("dead", now, reason_name(reason)),
                };
                args.push(id.to_string().into_bytes());
                args.push(token.to_string().into_bytes());
                args.push(decision.as_bytes().to_vec());
                args.push(ms(run_at).into_bytes());
                args.push(reason.as_bytes().to_vec());
            }
            let reply = self
                .run(Call::new(&self.inner.scripts.rescue, base.clone(), args))
                .await?;
            let n = number(&reply).unwrap_or(0);
            rescued += n;
            // Stop when the batch was the last one, or nothing in it could be taken back
            // (leases extended meanwhile): the next call will look again.
            if expired.len() < batch || n == 0 {
                return Ok(rescued);
            }
        }
    }

    /// Forgets stale fairness tails and rechecks jobs blocked on other queues (releasing
    /// those whose dependency succeeded).
    async fn housekeeping(&self, queue: &str) -> Result<(), BackendError> {
        let reply = self
            .run(Call::new(
                &self.inner.scripts.maintain,
                self.inner.keys.queue_base(queue),
                vec![
                    ms(self.now()).into_bytes(),
                    TAIL_SWEEP.to_string().into_bytes(),
                    RECHECK_MS.to_string().into_bytes(),
                    RECHECK_LIMIT.to_string().into_bytes(),
                ],
            ))
            .await?;
        let due = record::array(&reply);
        let mut release = Vec::new();
        for pair in due.chunks(2) {
            let (Some(id), Some(dep)) =
                (pair.first().and_then(number), pair.get(1).and_then(number))
            else {
                continue;
            };
            let dep = JobId(dep);
            let Some(dep_queue) = self.queue_of(dep).await? else {
                continue;
            };
            if self.dependency_state(dep, &dep_queue).await? == "succeeded" {
                release.push((queue.to_string(), JobId(id), dep));
            }
        }
        if !release.is_empty() {
            self.unblock(release).await?;
        }
        Ok(())
    }
}
