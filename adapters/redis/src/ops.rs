//! The [`Backend`] operations: each state change is one script call on the job's queue.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fairq_core::job::{millis, Millis, Outcome, TransitionError};
use fairq_core::retry::Decision;
use fairq_core::stats::{Histogram, RetryStats, Summary};
use fairq_worker::{
    random_u64, Backend, BackendError, Claim, Failure, Job, JobId, JobInfo, JobStatus, ListFilter,
    NewJob, OnConflict, Purge, QueueStats, RetryTarget, StatusCounts,
};
use redis::Value;

use crate::backend::RedisBackend;
use crate::error::corrupt;
use crate::keys::encode_fkey;
use crate::record::{self, ms, number, refusal, status, text};

/// Fields per job in `enqueue.lua`'s arguments.
const ENQUEUE_FIELDS: usize = 10;

/// `HMGET token attempts retry` of a job whose lease expired.
type ExpiredRow = (Option<u64>, Option<u32>, Option<Vec<u8>>);

fn check_queue(queue: &str) -> Result<(), BackendError> {
    if queue.is_empty() {
        return Err(BackendError::Invalid("queue name is empty".into()));
    }
    Ok(())
}

fn check_job(job: &NewJob) -> Result<(), BackendError> {
    check_queue(&job.queue)?;
    if job.kind.is_empty() {
        return Err(BackendError::Invalid("job kind is empty".into()));
    }
    Ok(())
}

impl RedisBackend {
    fn base(&self, queue: &str) -> String {
        self.inner.keys.queue_base(queue)
    }

    /// Every queue that ever held a job, sorted.
    pub(crate) async fn queue_names(&self) -> Result<Vec<String>, BackendError> {
        let mut names: Vec<String> = self
            .cmd_query(
                "listing queues",
                redis::cmd("SMEMBERS").arg(self.inner.keys.queues()),
            )
            .await?;
        names.sort();
        Ok(names)
    }

    async fn queues_for(&self, queue: &Option<String>) -> Result<Vec<String>, BackendError> {
        match queue {
            Some(queue) => Ok(vec![queue.clone()]),
            None => self.queue_names().await,
        }
    }

    /// Registers a dependency on a job of another queue; returns the enqueue mode.
    async fn cross_dependency(
        &self,
        dep: JobId,
        dep_queue: &str,
        queue: &str,
        id: u64,
    ) -> Result<&'static str, BackendError> {
        let reply = self
            .eval(
                &self.inner.scripts.depend,
                &self.base(dep_queue),
                vec![
                    b"register".to_vec(),
                    dep.0.to_string().into_bytes(),
                    format!("{queue}\n{id}").into_bytes(),
                ],
                None,
            )
            .await?;
        match text(&reply).as_deref() {
            Some("pending") => Ok("blocked"),
            Some("succeeded") => Ok("ready"),
            _ => Err(BackendError::UnknownDependency(dep)),
        }
    }

    /// Releases `id` of `queue`, blocked on `dep` of another queue that succeeded.
    async fn release(&self, queue: &str, id: &str, dep: JobId) -> Result<(), BackendError> {
        self.eval(
            &self.inner.scripts.release,
            &self.base(queue),
            vec![
                id.as_bytes().to_vec(),
                dep.0.to_string().into_bytes(),
                ms(self.now()).into_bytes(),
            ],
            None,
        )
        .await
        .map(drop)
    }

    async fn enqueue_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        for job in &jobs {
            check_job(job)?;
        }
        let ids = self.reserve_ids(jobs.len()).await?;
        // Dependencies: same-queue ones are checked by the script; others are registered
        // with the queue of the job depended on first.
        let mut deps: Vec<String> = Vec::with_capacity(jobs.len());
        let mut cross: Vec<(usize, JobId, String)> = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            let Some(dep) = job.depends_on else {
                deps.push(String::new());
                continue;
            };
            let dep_queue = self
                .queue_of(dep)
                .await?
                .ok_or(BackendError::UnknownDependency(dep))?;
            if *dep_queue == *job.queue {
                deps.push(format!("{}:local", dep.0));
            } else {
                let mode = self
                    .cross_dependency(dep, &dep_queue, &job.queue, ids[i])
                    .await?;
                if mode == "blocked" {
                    cross.push((i, dep, dep_queue.to_string()));
                }
                deps.push(format!("{}:{mode}", dep.0));
            }
        }
        // Group by queue (keeping order), cut into chunks, one script call per chunk.
        let mut by_queue: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            match by_queue.iter_mut().find(|(q, _)| *q == job.queue) {
                Some((_, members)) => members.push(i),
                None => by_queue.push((job.queue.clone(), vec![i])),
            }
        }
        let now = self.now();
        let mut pipe = redis::pipe();
        let mut index = redis::cmd("HSET");
        index.arg(self.inner.keys.index());
        for (i, job) in jobs.iter().enumerate() {
            index.arg(ids[i]).arg(&job.queue);
        }
        pipe.add_command(index).ignore();
        let mut register = redis::cmd("SADD");
        register.arg(self.inner.keys.queues());
        for (queue, _) in &by_queue {
            register.arg(queue);
        }
        pipe.add_command(register).ignore();
        let mut chunks: Vec<(&str, &[usize])> = Vec::new();
        for (queue, members) in &by_queue {
            for chunk in members.chunks(self.inner.options.batch.max(1)) {
                chunks.push((queue, chunk));
                let mut call = redis::cmd("EVALSHA");
                call.arg(self.inner.scripts.enqueue.script.get_hash())
                    .arg(1)
                    .arg(self.base(queue))
                    .arg(now)
                    .arg(chunk.len());
                for &i in chunk {
                    let job = &jobs[i];
                    let retry = serde_json::to_vec(&job.effective_retry())
                        .map_err(|e| BackendError::Invalid(format!("retry policy: {e}")))?;
                    let meta = serde_json::to_vec(&job.metadata)
                        .map_err(|e| BackendError::Invalid(format!("metadata: {e}")))?;
                    call.arg(ids[i])
                        .arg(&job.kind)
                        .arg(encode_fkey(job.key.as_deref()))
                        .arg(job.payload.as_slice())
                        .arg(job.schedule.run_at(now))
                        .arg(retry)
                        .arg(
                            job.unique_key
                                .as_ref()
                                .map_or(String::new(), |u| format!("+{u}")),
                        )
                        .arg(match job.on_conflict {
                            OnConflict::Error => "error",
                            OnConflict::Ignore => "ignore",
                        })
                        .arg(&deps[i])
                        .arg(meta);
                }
                debug_assert_eq!(ENQUEUE_FIELDS, 10);
                pipe.add_command(call);
            }
        }
        let replies: Vec<Value> = self.pipe_query("enqueue", &pipe).await?;
        let mut out = vec![JobId(0); jobs.len()];
        let mut failure = None;
        let mut unused = Vec::new();
        for ((queue, chunk), reply) in chunks.iter().zip(&replies) {
            let fields = record::array(reply);
            match fields.first().and_then(text).as_deref() {
                Some("ok") => {
                    for (slot, &i) in chunk.iter().enumerate() {
                        let id = fields
                            .get(slot + 1)
                            .and_then(number)
                            .ok_or_else(|| corrupt("enqueue reply", format!("{reply:?}")))?;
                        if id != ids[i] {
                            unused.push(ids[i]);
                        }
                        out[i] = JobId(id);
                    }
                }
                Some("dup") => {
                    unused.extend(chunk.iter().map(|&i| ids[i]));
                    failure.get_or_insert(BackendError::Duplicate {
                        queue: queue.to_string(),
                        key: fields.get(1).and_then(text).unwrap_or_default(),
                        existing: JobId(fields.get(2).and_then(number).unwrap_or(0)),
                    });
                }
                Some("nodep") => {
                    unused.extend(chunk.iter().map(|&i| ids[i]));
                    let dep = JobId(fields.get(1).and_then(number).unwrap_or(0));
                    failure.get_or_insert(BackendError::UnknownDependency(dep));
                }
                _ => return Err(corrupt("enqueue reply", format!("{reply:?}"))),
            }
        }
        if !unused.is_empty() {
            let mut tidy = redis::cmd("HDEL");
            tidy.arg(self.inner.keys.index()).arg(&unused);
            // Best effort: a dangling index entry only makes `get` look at a missing hash.
            let _ = self.cmd_query::<u64>("tidying the id index", &tidy).await;
        }
        if let Some(err) = failure {
            return Err(err);
        }
        // A dependency of another queue may have succeeded between registration and enqueue:
        // look again and release the job if so (its completion found nothing to release).
        for (i, dep, dep_queue) in cross {
            let again = self
                .eval(
                    &self.inner.scripts.depend,
                    &self.base(&dep_queue),
                    vec![b"check".to_vec(), dep.0.to_string().into_bytes()],
                    None,
                )
                .await?;
            if text(&again).as_deref() == Some("succeeded") {
                self.release(&jobs[i].queue, &out[i].0.to_string(), dep)
                    .await?;
            }
        }
        Ok(out)
    }

    async fn claim_jobs(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        check_queue(queue)?;
        if max == 0 {
            return Ok(Vec::new());
        }
        let reply = self
            .eval(
                &self.inner.scripts.claim,
                &self.base(queue),
                vec![
                    ms(self.now()).into_bytes(),
                    max.to_string().into_bytes(),
                    ms(millis(lease)).into_bytes(),
                    self.inner.options.promote_limit.to_string().into_bytes(),
                ],
                None,
            )
            .await?;
        let queue_name: Arc<str> = Arc::from(queue);
        record::array(&reply)
            .iter()
            .map(|row| {
                let job = record::claimed(queue, row)?;
                self.remember_claim(job.claim.id, &queue_name);
                Ok(job)
            })
            .collect()
    }

    async fn claim_queue(&self, claim: Claim) -> Result<Arc<str>, BackendError> {
        self.queue_of(claim.id)
            .await?
            .ok_or(BackendError::NotFound(claim.id))
    }

    async fn complete_job(&self, claim: Claim) -> Result<(), BackendError> {
        let queue = self.claim_queue(claim).await?;
        let reply = self
            .eval(
                &self.inner.scripts.complete,
                &self.base(&queue),
                vec![
                    claim.id.0.to_string().into_bytes(),
                    claim.token.0.to_string().into_bytes(),
                    ms(self.now()).into_bytes(),
                    b"0".to_vec(),
                ],
                Some(3),
            )
            .await?;
        let reply = status("complete", &reply)?;
        match reply[0].as_str() {
            "ok" => {
                self.forget_claim(claim.id);
                for dependent in &reply[1..] {
                    if let Some((dep_queue, dep_id)) = dependent.split_once('\n') {
                        self.release(dep_queue, dep_id, claim.id).await?;
                    }
                }
                Ok(())
            }
            "done" => {
                self.forget_claim(claim.id);
                Ok(())
            }
            _ => Err(refusal(claim.id, claim.token, &reply)),
        }
    }

    async fn fail_job(&self, claim: Claim, failure: Failure) -> Result<Outcome, BackendError> {
        let queue = self.claim_queue(claim).await?;
        let base = self.base(&queue);
        let (attempts, retry): (Option<u32>, Option<Vec<u8>>) = self
            .cmd_query(
                "reading a failed job",
                redis::cmd("HMGET")
                    .arg(format!("{base}job:{}", claim.id))
                    .arg("attempts")
                    .arg("retry"),
            )
            .await?;
        let (Some(attempts), Some(retry)) = (attempts, retry) else {
            return Err(BackendError::NotFound(claim.id));
        };
        let now = self.now();
        // The decision is fairq-core's; the script applies it only if `claim.token` still
        // holds the lease, so it belongs to exactly the attempt read above.
        let (decision, run_at) = if failure.permanent {
            ("discard", now)
        } else {
            match record::policy(claim.id, &retry)?.decide_with_random(attempts, random_u64()) {
                Decision::Retry { after } => ("retry", now.saturating_add(millis(after))),
                Decision::GiveUp => ("dead", now),
            }
        };
        let reply = self
            .eval(
                &self.inner.scripts.fail,
                &base,
                vec![
                    claim.id.0.to_string().into_bytes(),
                    claim.token.0.to_string().into_bytes(),
                    ms(now).into_bytes(),
                    decision.as_bytes().to_vec(),
                    ms(run_at).into_bytes(),
                    failure.message.into_bytes(),
                    b"0".to_vec(),
                ],
                Some(6),
            )
            .await?;
        let reply = status("fail", &reply)?;
        match reply[0].as_str() {
            "ok" => {
                self.forget_claim(claim.id);
                Ok(match decision {
                    "retry" => Outcome::Retry { run_at },
                    _ => Outcome::Dead,
                })
            }
            "done" => {
                self.forget_claim(claim.id);
                Ok(match reply.get(1).map(String::as_str) {
                    Some("retrying") => Outcome::Retry {
                        run_at: reply.get(2).and_then(|s| s.parse().ok()).unwrap_or(run_at),
                    },
                    _ => Outcome::Dead,
                })
            }
            _ => Err(refusal(claim.id, claim.token, &reply)),
        }
    }

    async fn heartbeat_job(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        let queue = self.claim_queue(claim).await?;
        let reply = self
            .eval(
                &self.inner.scripts.heartbeat,
                &self.base(&queue),
                vec![
                    claim.id.0.to_string().into_bytes(),
                    claim.token.0.to_string().into_bytes(),
                    ms(self.now()).into_bytes(),
                    ms(millis(lease)).into_bytes(),
                ],
                None,
            )
            .await?;
        let reply = status("heartbeat", &reply)?;
        match reply[0].as_str() {
            "ok" => reply
                .get(1)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| corrupt("heartbeat reply", format!("{reply:?}"))),
            _ => Err(refusal(claim.id, claim.token, &reply)),
        }
    }

    async fn rescue_queue(&self, queue: &str) -> Result<u64, BackendError> {
        check_queue(queue)?;
        let base = self.base(queue);
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
            for (id, row) in expired.iter().zip(rows) {
                let (Some(token), Some(attempts), Some(retry)) = row else {
                    continue;
                };
                let job = JobId(*id);
                let (decision, run_at) =
                    match record::policy(job, &retry)?.decide_with_random(attempts, random_u64()) {
                        Decision::Retry { after } => ("retry", now.saturating_add(millis(after))),
                        Decision::GiveUp => ("dead", now),
                    };
                args.push(id.to_string().into_bytes());
                args.push(token.to_string().into_bytes());
                args.push(decision.as_bytes().to_vec());
                args.push(ms(run_at).into_bytes());
            }
            let reply = self
                .eval(&self.inner.scripts.rescue, &base, args, None)
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

    async fn queue_stats(&self, queue: &str) -> Result<QueueStats, BackendError> {
        let base = self.base(queue);
        let mut pipe = redis::pipe();
        for status in JobStatus::ALL {
            pipe.cmd("ZCARD").arg(format!("{base}st:{status}"));
        }
        pipe.cmd("HGETALL").arg(format!("{base}rstat"));
        pipe.cmd("HGETALL").arg(format!("{base}hist"));
        pipe.cmd("HGETALL").arg(format!("{base}pstat"));
        pipe.cmd("ZRANGE")
            .arg(format!("{base}errs"))
            .arg(0)
            .arg(0)
            .arg("WITHSCORES");
        pipe.atomic();
        #[allow(clippy::type_complexity)]
        let (b, s, r, t, ok, d, rstat, hist, pstat, errs): (
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
            HashMap<String, u64>,
            HashMap<u64, u64>,
            HashMap<String, u64>,
            Vec<(String, u64)>,
        ) = self.pipe_query("reading stats", &pipe).await?;
        let counts = StatusCounts {
            blocked: b,
            scheduled: s,
            running: r,
            retrying: t,
            succeeded: ok,
            dead: d,
        };
        let get = |m: &HashMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
        let retries = RetryStats {
            ok: get(&rstat, "ok"),
            retries: get(&rstat, "retries"),
            dead: get(&rstat, "dead"),
            failures: get(&rstat, "failures"),
        };
        Ok(QueueStats {
            queue: queue.to_string(),
            counts,
            retries,
            processing_ms: summary(&hist, &pstat),
            oldest_error_at: errs.first().map(|(_, at)| *at),
        })
    }

    async fn list_queue(
        &self,
        queue: &str,
        filter: &ListFilter,
    ) -> Result<Vec<JobInfo>, BackendError> {
        let base = self.base(queue);
        let index = match filter.status {
            Some(status) => format!("{base}st:{status}"),
            None => format!("{base}all"),
        };
        let from = filter
            .after
            .map_or("-inf".to_string(), |after| format!("({}", after.0));
        let ids: Vec<u64> = self
            .cmd_query(
                "listing jobs",
                redis::cmd("ZRANGEBYSCORE")
                    .arg(index)
                    .arg(from)
                    .arg("+inf")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(filter.limit),
            )
            .await?;
        self.infos(queue, &ids).await
    }

    async fn infos(&self, queue: &str, ids: &[u64]) -> Result<Vec<JobInfo>, BackendError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in ids {
            pipe.cmd("HGETALL").arg(self.inner.keys.job(queue, *id));
        }
        let hashes: Vec<HashMap<String, Vec<u8>>> = self.pipe_query("reading jobs", &pipe).await?;
        let mut out = Vec::with_capacity(ids.len());
        for (id, hash) in ids.iter().zip(hashes) {
            // Deleted between the index read and now.
            if !hash.is_empty() {
                out.push(record::info(queue, JobId(*id), &hash)?);
            }
        }
        Ok(out)
    }

    async fn revive(&self, target: RetryTarget) -> Result<u64, BackendError> {
        let now = ms(self.now()).into_bytes();
        match target {
            RetryTarget::One(id) => {
                let queue = self.queue_of(id).await?.ok_or(BackendError::NotFound(id))?;
                let reply = self
                    .eval(
                        &self.inner.scripts.revive,
                        &self.base(&queue),
                        vec![now, b"one".to_vec(), id.0.to_string().into_bytes()],
                        None,
                    )
                    .await?;
                let reply = status("revive", &reply)?;
                match reply[0].as_str() {
                    "ok" => Ok(1),
                    "dup" => Err(BackendError::Duplicate {
                        queue: queue.to_string(),
                        key: reply.get(1).cloned().unwrap_or_default(),
                        existing: JobId(reply.get(2).and_then(|s| s.parse().ok()).unwrap_or(0)),
                    }),
                    "notdead" => Err(BackendError::Transition {
                        id,
                        source: TransitionError::NotDead {
                            state: record::state_name(reply.get(1).map_or("", String::as_str)),
                        },
                    }),
                    _ => Err(BackendError::NotFound(id)),
                }
            }
            RetryTarget::AllDead { queue } => {
                let batch = self.inner.options.batch.max(1);
                let mut revived = 0;
                for queue in self.queues_for(&queue).await? {
                    let mut after = String::new();
                    loop {
                        let reply = self
                            .eval(
                                &self.inner.scripts.revive,
                                &self.base(&queue),
                                vec![
                                    now.clone(),
                                    b"all".to_vec(),
                                    batch.to_string().into_bytes(),
                                    after.clone().into_bytes(),
                                ],
                                None,
                            )
                            .await?;
                        let fields = record::array(&reply);
                        revived += fields.get(1).and_then(number).unwrap_or(0);
                        after = fields.get(2).and_then(text).unwrap_or_default();
                        let seen = fields.get(3).and_then(number).unwrap_or(0);
                        if seen < batch as u64 || after.is_empty() {
                            break;
                        }
                    }
                }
                Ok(revived)
            }
        }
    }

    /// Runs a deleting script (purge or prune) until it deletes less than a batch, then
    /// drops the deleted ids from the id index.
    async fn delete_batches(
        &self,
        queue: &str,
        script: &crate::scripts::Named,
        args: Vec<Vec<u8>>,
    ) -> Result<u64, BackendError> {
        let batch = self.inner.options.batch.max(1);
        let mut deleted = 0;
        loop {
            let reply = self
                .eval(script, &self.base(queue), args.clone(), None)
                .await?;
            let ids: Vec<u64> = record::array(&reply).iter().filter_map(number).collect();
            deleted += ids.len() as u64;
            if !ids.is_empty() {
                self.cmd_query::<u64>(
                    "tidying the id index",
                    redis::cmd("HDEL").arg(self.inner.keys.index()).arg(&ids),
                )
                .await?;
            }
            if ids.len() < batch {
                return Ok(deleted);
            }
        }
    }
}

/// The lowest value of `value`'s bucket, as `record_time` in the scripts computes it (the
/// bucketing of fairq-core's `Histogram`: exact below 128, then 64 buckets per power of two).
fn bucket_low(value: u64) -> u64 {
    if value < 128 {
        return value;
    }
    let shift = 63 - value.leading_zeros() - 6;
    (value >> shift) << shift
}

/// Run-time percentiles from the stored buckets and exact totals: the buckets are replayed
/// into a core `Histogram` (one sample of the min and of the max bucket at the exact value,
/// so the histogram's clamping matches one that saw every value).
fn summary(hist: &HashMap<u64, u64>, pstat: &HashMap<String, u64>) -> Summary {
    let get = |k: &str| pstat.get(k).copied().unwrap_or(0);
    let count = get("count");
    if count == 0 {
        return Summary::default();
    }
    let (min, max) = (get("min"), get("max"));
    let mut histogram = Histogram::new();
    if min == max {
        histogram.record_n(min, count);
    } else {
        for (&low, &n) in hist {
            let mut n = n;
            for exact in [min, max] {
                if n > 0 && bucket_low(exact) == low {
                    histogram.record(exact);
                    n -= 1;
                }
            }
            histogram.record_n(low, n);
        }
    }
    Summary {
        mean: get("sum") / count,
        ..histogram.summary()
    }
}

impl Backend for RedisBackend {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        let ids = self.enqueue_batch(vec![job]).await?;
        ids.into_iter()
            .next()
            .ok_or_else(|| corrupt("enqueue reply", "no id"))
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        self.enqueue_batch(jobs).await
    }

    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        self.claim_jobs(queue, max, lease).await
    }

    async fn complete(&self, claim: Claim) -> Result<(), BackendError> {
        self.complete_job(claim).await
    }

    async fn fail(&self, claim: Claim, failure: Failure) -> Result<Outcome, BackendError> {
        self.fail_job(claim, failure).await
    }

    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        self.heartbeat_job(claim, lease).await
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        self.rescue_queue(queue).await
    }

    async fn wait_for_jobs(&self, queue: &str, timeout: Duration) {
        self.wait(queue, timeout).await
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        let mut out = Vec::new();
        for queue in self.queue_names().await? {
            out.push(self.queue_stats(&queue).await?);
        }
        Ok(out)
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        let mut out = Vec::new();
        for queue in self.queues_for(&filter.queue).await? {
            out.extend(self.list_queue(&queue, &filter).await?);
        }
        out.sort_by_key(|info| info.id);
        out.truncate(filter.limit);
        Ok(out)
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        let Some(queue) = self.queue_of(id).await? else {
            return Ok(None);
        };
        Ok(self.infos(&queue, &[id.0]).await?.into_iter().next())
    }

    async fn retry(&self, target: RetryTarget) -> Result<u64, BackendError> {
        self.revive(target).await
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        let statuses: Vec<JobStatus> = JobStatus::ALL
            .into_iter()
            .filter(|s| *s != JobStatus::Running && purge.status.is_none_or(|p| p == *s))
            .collect();
        if statuses.is_empty() {
            return Ok(0);
        }
        let mut args = vec![self.inner.options.batch.max(1).to_string().into_bytes()];
        args.extend(statuses.iter().map(|s| s.as_str().as_bytes().to_vec()));
        let mut deleted = 0;
        for queue in self.queues_for(&purge.queue).await? {
            deleted += self
                .delete_batches(&queue, &self.inner.scripts.purge, args.clone())
                .await?;
        }
        Ok(deleted)
    }

    async fn prune(&self, older_than: Duration) -> Result<u64, BackendError> {
        let cutoff = self.now().saturating_sub(millis(older_than));
        let args = vec![
            ms(cutoff).into_bytes(),
            self.inner.options.batch.max(1).to_string().into_bytes(),
        ];
        let mut deleted = 0;
        for queue in self.queue_names().await? {
            deleted += self
                .delete_batches(&queue, &self.inner.scripts.prune, args.clone())
                .await?;
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_replay_into_the_same_summary() {
        let values = [
            1_000u64, 1_000, 1_001, 5, 127, 128, 0, 65_535, 2_000_000, 2_000_001,
        ];
        let mut reference = Histogram::new();
        let mut hist = HashMap::new();
        let mut pstat = HashMap::from([("min".to_string(), u64::MAX), ("max".to_string(), 0)]);
        for (i, &v) in values.iter().enumerate() {
            reference.record(v);
            *hist.entry(bucket_low(v)).or_insert(0) += 1;
            pstat.insert("count".into(), i as u64 + 1);
            *pstat.entry("sum".into()).or_insert(0) += v;
            let min = pstat["min"].min(v);
            let max = pstat["max"].max(v);
            pstat.insert("min".into(), min);
            pstat.insert("max".into(), max);
            assert_eq!(summary(&hist, &pstat), reference.summary(), "after {v}");
        }
    }

    #[test]
    fn bucket_low_is_within_one_part_in_64() {
        for v in [128u64, 200, 4_095, 1 << 40, u64::MAX] {
            let low = bucket_low(v);
            assert!(low <= v && v - low <= v / 64, "{v} -> {low}");
        }
    }
}
