//! Operator calls: statistics, listing, revival, purging and pruning. Each works queue by queue
//! (every queue's keys live in one slot), so on a cluster they gather from every node.

use std::collections::HashMap;

use fairq_core::job::TransitionError;
use fairq_core::stats::RetryStats;
use fairq_worker::{
    BackendError, JobId, JobInfo, JobStatus, ListFilter, Purge, QueueStats, Retention,
    ReviveTarget, StatusCounts,
};

use crate::backend::RedisBackend;
use crate::call::Call;
use crate::record::{self, ms, number, status, text};
use crate::scripts::Named;
use crate::timing::summary;

/// Ids a listing or purge looks at per script call.
const WALK_BUDGET: usize = 2_000;

/// Statuses that keep a set of their own (the others are found by walking `all`).
fn own_set(status: JobStatus) -> bool {
    matches!(
        status,
        JobStatus::Blocked | JobStatus::Retrying | JobStatus::Dead
    )
}

impl RedisBackend {
    /// The statistics of `queue`, `None` for a queue without jobs or counters (removed).
    pub(crate) async fn queue_stats(
        &self,
        queue: &str,
    ) -> Result<Option<QueueStats>, BackendError> {
        let base = self.inner.keys.queue_base(queue);
        let mut pipe = redis::pipe();
        pipe.cmd("HGETALL").arg(format!("{base}counts"));
        pipe.cmd("HGETALL").arg(format!("{base}rstat"));
        pipe.cmd("HGETALL").arg(format!("{base}hist"));
        pipe.cmd("HGETALL").arg(format!("{base}pstat"));
        pipe.cmd("ZRANGE")
            .arg(format!("{base}errs"))
            .arg(0)
            .arg(0)
            .arg("WITHSCORES");
        pipe.cmd("ZRANGE")
            .arg(format!("{base}retry_at"))
            .arg(0)
            .arg(0)
            .arg("WITHSCORES");
        #[allow(clippy::type_complexity)]
        let (counts, rstat, hist, pstat, errs, next_retry): (
            HashMap<String, i64>,
            HashMap<String, u64>,
            HashMap<u64, u64>,
            HashMap<String, u64>,
            Vec<(String, u64)>,
            Vec<(String, u64)>,
        ) = self.pipe_query("reading stats", &pipe).await?;
        if counts.is_empty() && rstat.is_empty() && hist.is_empty() && pstat.is_empty() {
            // Never used, or removed: the registry keeps its number, not the queue.
            return Ok(None);
        }
        let count = |status: JobStatus| {
            counts
                .get(status.as_str())
                .map_or(0, |n| u64::try_from(*n).unwrap_or(0))
        };
        let get = |m: &HashMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
        Ok(Some(QueueStats {
            queue: queue.to_string(),
            counts: StatusCounts {
                blocked: count(JobStatus::Blocked),
                scheduled: count(JobStatus::Scheduled),
                running: count(JobStatus::Running),
                retrying: count(JobStatus::Retrying),
                succeeded: count(JobStatus::Succeeded),
                dead: count(JobStatus::Dead),
            },
            retries: RetryStats {
                ok: get(&rstat, "ok"),
                retries: get(&rstat, "retries"),
                dead: get(&rstat, "dead"),
                failures: get(&rstat, "failures"),
            },
            processing_ms: summary(&hist, &pstat),
            oldest_error_at: errs.first().map(|(_, at)| *at),
            next_retry_at: next_retry.first().map(|(_, at)| *at),
        }))
    }

    pub(crate) async fn all_stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.flush_timing().await?;
        let mut out = Vec::new();
        for queue in self.queue_names().await? {
            out.extend(self.queue_stats(&queue).await?);
        }
        Ok(out)
    }

    /// Walks `index` of `queue` by id with `named` until `enough` says stop or the walk ends.
    /// Returns the ids each call answered.
    async fn walk(
        &self,
        queue: &str,
        named: &Named,
        index: &str,
        after: Option<JobId>,
        extra: &[Vec<u8>],
        mut enough: impl FnMut(&[u64]) -> bool,
    ) -> Result<(), BackendError> {
        let mut cursor = after.map_or(String::new(), |id| id.0.to_string());
        loop {
            let mut args = vec![index.as_bytes().to_vec(), cursor.clone().into_bytes()];
            args.extend(extra.iter().cloned());
            let reply = self
                .run(Call::new(named, self.inner.keys.queue_base(queue), args))
                .await?;
            let fields = record::array(&reply);
            let next = fields.first().and_then(text).unwrap_or_default();
            let ids: Vec<u64> = fields.iter().skip(1).filter_map(number).collect();
            if enough(&ids) || next.is_empty() {
                return Ok(());
            }
            cursor = next;
        }
    }

    async fn list_queue(
        &self,
        queue: &str,
        filter: &ListFilter,
    ) -> Result<Vec<JobInfo>, BackendError> {
        let (index, wanted) = match filter.status {
            Some(status) if own_set(status) => (format!("st:{status}"), String::new()),
            Some(status) => ("all".to_string(), status.as_str().to_string()),
            None => ("all".to_string(), String::new()),
        };
        let mut ids = Vec::new();
        let limit = filter.limit;
        self.walk(
            queue,
            &self.inner.scripts.list,
            &index,
            filter.after,
            &[
                limit.to_string().into_bytes(),
                WALK_BUDGET.to_string().into_bytes(),
                wanted.into_bytes(),
            ],
            |found| {
                ids.extend_from_slice(found);
                ids.len() >= limit
            },
        )
        .await?;
        ids.truncate(limit);
        self.infos(queue, &ids, true).await
    }

    /// The jobs `ids` of `queue`. With `skip_bad`, a record that does not parse is left out
    /// (with a warning) instead of failing the whole answer.
    async fn infos(
        &self,
        queue: &str,
        ids: &[u64],
        skip_bad: bool,
    ) -> Result<Vec<JobInfo>, BackendError> {
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
            if hash.is_empty() {
                continue;
            }
            match record::info(queue, JobId(*id), &hash) {
                Ok(info) => out.push(info),
                Err(err) if skip_bad => {
                    tracing::warn!(queue, job = id, error = %err, "unreadable job left out");
                }
                Err(err) => return Err(err),
            }
        }
        Ok(out)
    }

    pub(crate) async fn list_jobs(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        let mut out = Vec::new();
        for queue in self.queues_for(&filter.queue).await? {
            out.extend(self.list_queue(&queue, &filter).await?);
        }
        out.sort_by_key(|info| info.id);
        out.truncate(filter.limit);
        Ok(out)
    }

    pub(crate) async fn get_job(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        let Some(queue) = self.queue_of(id).await? else {
            return Ok(None);
        };
        Ok(self.infos(&queue, &[id.0], false).await?.into_iter().next())
    }

    pub(crate) async fn revive_jobs(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        let now = ms(self.now()).into_bytes();
        match target {
            ReviveTarget::One(id) => {
                let queue = self.queue_of(id).await?.ok_or(BackendError::NotFound(id))?;
                let reply = self
                    .run(
                        Call::new(
                            &self.inner.scripts.revive,
                            self.inner.keys.queue_base(&queue),
                            vec![
                                now,
                                self.request_id().into_bytes(),
                                self.request_keep_arg(),
                                b"one".to_vec(),
                                id.0.to_string().into_bytes(),
                            ],
                        )
                        .acknowledged(),
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
            ReviveTarget::AllDead { queue } => {
                let batch = self.inner.options.batch.max(1);
                let mut revived = 0;
                for queue in self.queues_for(&queue).await? {
                    let mut after = String::new();
                    loop {
                        let reply = self
                            .run(
                                Call::new(
                                    &self.inner.scripts.revive,
                                    self.inner.keys.queue_base(&queue),
                                    vec![
                                        now.clone(),
                                        self.request_id().into_bytes(),
                                        self.request_keep_arg(),
                                        b"all".to_vec(),
                                        batch.to_string().into_bytes(),
                                        after.clone().into_bytes(),
                                    ],
                                )
                                .acknowledged(),
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

    pub(crate) async fn purge_jobs(&self, purge: Purge) -> Result<u64, BackendError> {
        let statuses: Vec<JobStatus> = JobStatus::ALL
            .into_iter()
            .filter(|s| *s != JobStatus::Running && purge.status.is_none_or(|p| p == *s))
            .collect();
        let index = match statuses.as_slice() {
            [] => return Ok(0),
            [only] if own_set(*only) => format!("st:{only}"),
            _ => "all".to_string(),
        };
        let mut deleted = 0;
        for queue in self.queues_for(&purge.queue).await? {
            let mut cursor = String::new();
            loop {
                let mut args = vec![
                    index.as_bytes().to_vec(),
                    cursor.into_bytes(),
                    WALK_BUDGET.to_string().into_bytes(),
                ];
                args.extend(statuses.iter().map(|s| s.as_str().as_bytes().to_vec()));
                let reply = self
                    .run(Call::new(
                        &self.inner.scripts.purge,
                        self.inner.keys.queue_base(&queue),
                        args,
                    ))
                    .await?;
                let fields = record::array(&reply);
                cursor = fields.first().and_then(text).unwrap_or_default();
                deleted += fields.get(1).map_or(0, |ids| record::array(ids).len()) as u64;
                // Deleted jobs that were blocked on jobs of other queues: their
                // registrations there go too (see `forget_deleted_dependents`).
                let others: Vec<(JobId, JobId)> = fields
                    .get(2)
                    .map(record::array)
                    .unwrap_or_default()
                    .chunks_exact(2)
                    .filter_map(|pair| Some((JobId(number(&pair[0])?), JobId(number(&pair[1])?))))
                    .collect();
                if !others.is_empty() {
                    self.forget_deleted_dependents(&queue, others).await;
                }
                if cursor.is_empty() {
                    break;
                }
            }
        }
        Ok(deleted)
    }

    /// Removes `queue` (see [`Backend::remove_queue`](fairq_worker::Backend::remove_queue)):
    /// a script deletes its finished jobs a slice at a time, checking each time that no job is
    /// live, and with the last slice the queue's structures.
    pub(crate) async fn remove_queue_named(&self, queue: &str) -> Result<u64, BackendError> {
        // Timings this client still holds for the queue would bring its histogram back.
        self.flush_timing().await?;
        let mut deleted = 0;
        loop {
            let reply = self
                .run(Call::new(
                    &self.inner.scripts.remove,
                    self.inner.keys.queue_base(queue),
                    vec![WALK_BUDGET.to_string().into_bytes()],
                ))
                .await?;
            let fields = record::array(&reply);
            let tag = fields.first().and_then(text).unwrap_or_default();
            match tag.as_str() {
                "unknown" => return Err(BackendError::UnknownQueue(queue.to_string())),
                "live" => {
                    return Err(BackendError::QueueNotEmpty {
                        queue: queue.to_string(),
                        live: fields.get(1).and_then(number).unwrap_or(0),
                    })
                }
                "more" | "done" => {
                    deleted += fields.len().saturating_sub(1) as u64;
                    if tag == "done" {
                        // The script deleted the queue's pause flag: unlist it too.
                        let _: i64 = self
                            .cmd_query(
                                "removing a queue",
                                redis::cmd("SREM").arg(self.inner.keys.paused()).arg(queue),
                            )
                            .await?;
                        return Ok(deleted);
                    }
                }
                _ => {
                    return Err(crate::error::corrupt(
                        "removing a queue",
                        format!("{reply:?}"),
                    ))
                }
            }
        }
    }

    /// Deletes the finished jobs `retention` no longer keeps, queue by queue, with
    /// `lua/prune.lua` (see there): each call looks at up to [`RedisOptions::batch`] ids, and
    /// calls go on until one says the queue is done. Succeeded jobs are read from `finished`
    /// only up to the succeeded cutoff, dead ones from `dead_at` only up to the dead cutoff: a
    /// kept outcome costs nothing. A retention that keeps everything calls nothing.
    ///
    /// [`RedisOptions::batch`]: crate::RedisOptions::batch
    pub(crate) async fn prune_jobs(&self, retention: Retention) -> Result<u64, BackendError> {
        if retention.keeps_everything() {
            return Ok(0);
        }
        let now = self.now();
        let cutoffs = retention.cutoffs(now);
        let mut deleted = 0;
        for queue in self.queue_names().await? {
            let (n, held) = self.prune_queue(&queue, now, cutoffs, true).await?;
            deleted += n;
            // Dead jobs kept for dependents of other queues: drop the registrations whose
            // jobs no longer wait (purged since), then prune once more what that freed.
            if self.forget_stale_dependents(&queue, held).await? {
                deleted += self.prune_queue(&queue, now, cutoffs, false).await?.0;
            }
        }
        Ok(deleted)
    }

    /// Runs `prune.lua` on `queue` until it has looked at every candidate; returns how many
    /// jobs went and, for the dead jobs kept because jobs of other queues are registered as
    /// waiting for them, each `(job, '<queue>\n<id>')` registration.
    async fn prune_queue(
        &self,
        queue: &str,
        now: u64,
        (succeeded, dead): (Option<u64>, Option<u64>),
        mut may_walk: bool,
    ) -> Result<(u64, Vec<(JobId, String)>), BackendError> {
        let cutoff = |c: Option<u64>| c.map_or(Vec::new(), |c| ms(c).into_bytes());
        let batch = self.inner.options.batch.max(1);
        let mut deleted = 0;
        let mut skip = 0u64;
        let mut held = Vec::new();
        loop {
            let reply = self
                .run(Call::new(
                    &self.inner.scripts.prune,
                    self.inner.keys.queue_base(queue),
                    vec![
                        ms(now).into_bytes(),
                        cutoff(succeeded),
                        cutoff(dead),
                        batch.to_string().into_bytes(),
                        if may_walk {
                            b"1".to_vec()
                        } else {
                            b"0".to_vec()
                        },
                        skip.to_string().into_bytes(),
                    ],
                ))
                .await?;
            let fields = record::array(&reply);
            let at = |i: usize| fields.get(i).and_then(number).unwrap_or(0);
            let (more, walked, kept, n) = (at(0) == 1, at(1) == 1, at(2), at(3));
            deleted += n;
            skip += kept;
            let pairs = fields.get(4 + n as usize..).unwrap_or_default();
            for pair in pairs.chunks_exact(2) {
                if let (Some(id), Some(entry)) = (number(&pair[0]), record::text(&pair[1])) {
                    held.push((JobId(id), entry));
                }
            }
            may_walk &= !walked;
            if !more {
                return Ok((deleted, held));
            }
        }
    }

    /// Drops the registrations `(dependency, '<queue>\n<id>')` of `queue`'s dead jobs whose
    /// dependent no longer waits for them in its own queue; returns whether it dropped any.
    async fn forget_stale_dependents(
        &self,
        queue: &str,
        held: Vec<(JobId, String)>,
    ) -> Result<bool, BackendError> {
        let mut dropped = false;
        for (dep, entry) in held {
            let Some((their_queue, id)) = crate::deps::registration(&entry) else {
                continue;
            };
            if self.still_waits(their_queue, id, dep).await? {
                continue;
            }
            self.forget_registrations(queue, &[(dep, entry)]).await?;
            dropped = true;
        }
        Ok(dropped)
    }

    /// Whether job `id` of `queue` is blocked on `dep`.
    async fn still_waits(&self, queue: &str, id: &str, dep: JobId) -> Result<bool, BackendError> {
        let args = vec![
            b"waits".to_vec(),
            dep.0.to_string().into_bytes(),
            id.as_bytes().to_vec(),
        ];
        let reply = self
            .run(Call::new(
                &self.inner.scripts.depend,
                self.inner.keys.queue_base(queue),
                args,
            ))
            .await?;
        Ok(number(&reply) == Some(1))
    }
}
