//! Enqueueing: one script call per queue and chunk, the ids given by the script.
//!
//! A queue's jobs are cut into chunks of [`RedisOptions::batch`](crate::RedisOptions::batch),
//! one script call each, so that no call holds the server for long, unless the script could
//! refuse one of them (a unique key under [`OnConflict::Error`], a dependency in the same
//! queue): then they all go in one call, which enqueues all of them or, refused, none. A
//! dependency in another queue was looked at before anything is sent.

use std::sync::atomic::Ordering;

use fairq_worker::{check_call_size, BackendError, JobId, NewJob, OnConflict};
use futures::future::join_all;

use crate::backend::RedisBackend;
use crate::call::Call;
use crate::error::corrupt;
use crate::keys::{encode_fkey, QUEUE_BITS};
use crate::record::{self, ms, number, text};

/// Fields per job in `enqueue.lua`'s arguments.
const ENQUEUE_FIELDS: usize = 10;

/// How a job's dependency is handled by the enqueue script.
enum Dependency {
    None,
    /// On a job of the same queue: checked and registered by the script.
    Local(JobId),
    /// On a job of another queue that has not succeeded: the job starts blocked and is
    /// registered with that queue after the enqueue.
    Blocked(JobId, String),
    /// On a job of another queue that already succeeded.
    Ready(JobId),
}

impl Dependency {
    fn arg(&self) -> String {
        match self {
            Dependency::None => String::new(),
            Dependency::Local(dep) => format!("{}:local", dep.0),
            Dependency::Blocked(dep, _) => format!("{}:blocked", dep.0),
            Dependency::Ready(dep) => format!("{}:ready", dep.0),
        }
    }
}

impl RedisBackend {
    pub(crate) async fn enqueue_batch(
        &self,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<JobId>, BackendError> {
        let now = self.now();
        check_call_size(&jobs)?;
        for job in &jobs {
            job.check(now)?;
        }
        let mut deps = Vec::with_capacity(jobs.len());
        for job in &jobs {
            deps.push(self.dependency(job).await?);
        }
        // Group by queue (keeping order) and cut into chunks: one script call each, all sent
        // at once. A queue whose jobs the script could refuse goes in one chunk, so that a
        // refusal leaves none of its jobs behind (chunks commit on their own).
        let mut by_queue: Vec<(String, Vec<usize>)> = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            match by_queue.iter_mut().find(|(q, _)| *q == job.queue) {
                Some((_, members)) => members.push(i),
                None => by_queue.push((job.queue.clone(), vec![i])),
            }
        }
        let floor = self.inner.highwater.load(Ordering::Relaxed) + 1;
        let mut chunks: Vec<(&str, &[usize])> = Vec::new();
        let mut calls = Vec::new();
        for (queue, members) in &by_queue {
            let number = self.queue_number(queue).await?;
            let refusable = members.iter().any(|&i| may_be_refused(&jobs[i], &deps[i]));
            let size = if refusable {
                members.len()
            } else {
                self.inner.options.batch.max(1)
            };
            for chunk in members.chunks(size) {
                let mut args = Vec::with_capacity(5 + chunk.len() * ENQUEUE_FIELDS);
                args.push(ms(now).into_bytes());
                args.push(chunk.len().to_string().into_bytes());
                args.push(self.request_id().into_bytes());
                args.push(self.request_keep_arg());
                args.push(number.to_string().into_bytes());
                for &i in chunk {
                    let job = &jobs[i];
                    let retry = serde_json::to_vec(&job.effective_retry())
                        .map_err(|e| BackendError::Invalid(format!("retry policy: {e}")))?;
                    let meta = serde_json::to_vec(&job.metadata)
                        .map_err(|e| BackendError::Invalid(format!("metadata: {e}")))?;
                    args.push(job.kind.clone().into_bytes());
                    args.push(encode_fkey(job.key.as_deref()).into_bytes());
                    args.push(job.payload.clone());
                    args.push(ms(job.schedule.run_at(now)).into_bytes());
                    args.push(retry);
                    args.push(
                        job.unique_key
                            .as_ref()
                            .map_or(String::new(), |u| format!("+{u}"))
                            .into_bytes(),
                    );
                    args.push(
                        match job.on_conflict {
                            OnConflict::Error => "error",
                            OnConflict::Ignore => "ignore",
                        }
                        .as_bytes()
                        .to_vec(),
                    );
                    args.push(deps[i].arg().into_bytes());
                    args.push(meta);
                    args.push((floor + i as u64).to_string().into_bytes());
                }
                chunks.push((queue, chunk));
                calls.push(
                    Call::new(
                        &self.inner.scripts.enqueue,
                        self.inner.keys.queue_base(queue),
                        args,
                    )
                    .acknowledged(),
                );
            }
        }
        let replies = join_all(calls.into_iter().map(|call| self.run(call))).await;
        let mut out = vec![JobId(0); jobs.len()];
        // Positions answered with a job that held their unique key already (OnConflict::Ignore):
        // nothing was enqueued there, so nothing is registered for them below.
        let mut existing = vec![false; jobs.len()];
        let mut failure = None;
        for ((queue, chunk), reply) in chunks.iter().zip(replies) {
            let reply = match reply {
                Ok(reply) => reply,
                Err(err) => {
                    failure.get_or_insert(err);
                    continue;
                }
            };
            let fields = record::array(&reply);
            match fields.first().and_then(text).as_deref() {
                Some("ok") => {
                    for (slot, &i) in chunk.iter().enumerate() {
                        let (id, held) = fields
                            .get(slot + 1)
                            .and_then(enqueued_id)
                            .ok_or_else(|| corrupt("enqueue reply", format!("{reply:?}")))?;
                        self.inner
                            .highwater
                            .fetch_max(id >> QUEUE_BITS, Ordering::Relaxed);
                        out[i] = JobId(id);
                        existing[i] = held;
                    }
                }
                Some("dup") => {
                    failure.get_or_insert(BackendError::Duplicate {
                        queue: queue.to_string(),
                        key: fields.get(1).and_then(text).unwrap_or_default(),
                        existing: JobId(fields.get(2).and_then(number).unwrap_or(0)),
                    });
                }
                Some("nodep") => {
                    let dep = JobId(fields.get(1).and_then(number).unwrap_or(0));
                    failure.get_or_insert(BackendError::UnknownDependency(dep));
                }
                _ => return Err(corrupt("enqueue reply", format!("{reply:?}"))),
            }
        }
        if let Some(err) = failure {
            return Err(err);
        }
        // Jobs blocked on another queue's job: register them there, and release them at once
        // if the dependency succeeded in between. (A crash before this leaves them blocked
        // until the dependency's recheck; see maintain.lua.) A dependency deleted in between
        // (a success that was not kept, a prune, a purge) can release nobody: the dependent
        // is deleted again and the enqueue refused, as if the dependency had been gone
        // before. A position answered with the job that already held its unique key made no
        // job: that job does not depend on this one's dependency, and is left alone.
        let mut unknown = None;
        for (i, dep) in deps.iter().enumerate() {
            if existing[i] {
                continue;
            }
            if let Dependency::Blocked(dep, dep_queue) = dep {
                let queue = &jobs[i].queue;
                match self
                    .register_dependent(*dep, dep_queue, queue, out[i])
                    .await?
                    .as_str()
                {
                    "succeeded" => {
                        self.unblock(vec![(queue.clone(), out[i], *dep)]).await?;
                    }
                    "missing" => {
                        match self.cancel_job(out[i]).await {
                            Ok(()) | Err(BackendError::NotFound(_)) => {}
                            Err(err) => return Err(err),
                        }
                        unknown.get_or_insert(BackendError::UnknownDependency(*dep));
                    }
                    _ => {}
                }
            }
        }
        if let Some(err) = unknown {
            return Err(err);
        }
        Ok(out)
    }

    /// How `job`'s dependency is handled; refuses an unknown one.
    async fn dependency(&self, job: &NewJob) -> Result<Dependency, BackendError> {
        let Some(dep) = job.depends_on else {
            return Ok(Dependency::None);
        };
        let dep_queue = self
            .queue_of(dep)
            .await?
            .ok_or(BackendError::UnknownDependency(dep))?;
        if *dep_queue == *job.queue {
            return Ok(Dependency::Local(dep));
        }
        match self.dependency_state(dep, &dep_queue).await?.as_str() {
            "succeeded" => Ok(Dependency::Ready(dep)),
            "pending" => Ok(Dependency::Blocked(dep, dep_queue.to_string())),
            _ => Err(BackendError::UnknownDependency(dep)),
        }
    }
}

/// Whether `enqueue.lua` could refuse `job` (whose dependency is handled as `dep`): a unique
/// key under [`OnConflict::Error`] may be held, a dependency in the same queue may be gone.
/// (An ignored duplicate is answered, not refused; a dependency in another queue was found
/// before the call.)
fn may_be_refused(job: &NewJob, dep: &Dependency) -> bool {
    matches!(dep, Dependency::Local(_))
        || (job.unique_key.is_some() && job.on_conflict == OnConflict::Error)
}

/// One id of `enqueue.lua`'s reply: the id, and whether it is that of a job that held the
/// position's unique key already (marked with a leading `=`) rather than one just enqueued.
fn enqueued_id(value: &redis::Value) -> Option<(u64, bool)> {
    let answer = text(value)?;
    match answer.strip_prefix('=') {
        Some(existing) => Some((existing.parse().ok()?, true)),
        None => Some((answer.parse().ok()?, false)),
    }
}

#[cfg(test)]
mod tests {
    use super::enqueued_id;
    use redis::Value;

    #[test]
    fn ids_of_jobs_that_held_the_key_already_are_told_apart() {
        let fresh = Value::BulkString(b"131073".to_vec());
        let held = Value::BulkString(b"=65537".to_vec());
        assert_eq!(enqueued_id(&fresh), Some((131_073, false)));
        assert_eq!(enqueued_id(&held), Some((65_537, true)));
        assert_eq!(enqueued_id(&Value::BulkString(b"=x".to_vec())), None);
        assert_eq!(enqueued_id(&Value::Nil), None);
    }
}
