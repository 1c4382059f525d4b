//! The [`Backend`] implementation of [`PgBackend`]: each call is one operation of the store
//! (see the modules named in each method).

use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::{
    check_hold_until, check_queue_name, Backend, BackendError, Claim, Each, Finished, Job, JobId,
    JobInfo, ListFilter, LiveCounts, NewJob, Purge, QueueStats, Retention, ReviveTarget, Settled,
    SettledAndClaimed,
};

use crate::error::corrupt;
use crate::store::PgBackend;

impl Backend for PgBackend {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        self.inner
            .core
            .enqueue_many(vec![job])
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| corrupt("the insert returned no id"))
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        self.inner.core.enqueue_many(jobs).await
    }

    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        check_queue_name(queue)?;
        let claimed = match self.inner.core.claim(queue, max, lease).await {
            // A pooled connection that died since its last use: one more try on a fresh one
            // (a claim whose reply was lost is recovered by lease expiry).
            Err(e) if e.is_transient() => self.inner.core.claim(queue, max, lease).await,
            other => other,
        };
        if let Ok(jobs) = &claimed {
            self.claimed(queue, jobs.len(), max);
        }
        claimed
    }

    async fn settle(&self, batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        self.settle_together(batch).await
    }

    async fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<SettledAndClaimed, BackendError> {
        if let Err(refused) = check_queue_name(queue) {
            let settled = self.settle_together(batch).await?;
            return Ok(SettledAndClaimed {
                settled,
                claimed: Err(refused),
            });
        }
        let both = self
            .inner
            .core
            .settle_and_claim(batch, queue, max, lease)
            .await?;
        if let Ok(jobs) = &both.claimed {
            self.claimed(queue, jobs.len(), max);
        }
        Ok(both)
    }

    async fn release(&self, claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        self.inner.core.release(claims).await
    }

    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        let answer = match self.heartbeat_many(vec![claim], lease).await {
            // A pooled connection that died since its last use: one more try.
            Err(e) if e.is_transient() => self.heartbeat_many(vec![claim], lease).await?,
            other => other?,
        };
        answer
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(corrupt("no answer for a heartbeat")))
    }

    async fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> Result<Each<Millis>, BackendError> {
        self.inner.core.heartbeat_many(claims, lease).await
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        check_queue_name(queue)?;
        self.inner.core.rescue(queue).await
    }

    async fn hold_retries(&self, queue: &str, until: Millis) -> Result<u64, BackendError> {
        check_queue_name(queue)?;
        check_hold_until(until)?;
        self.inner.core.hold_retries(queue, until).await
    }

    async fn warm_up(&self, calls: usize) -> Result<(), BackendError> {
        self.inner.core.warm_up(calls).await
    }

    async fn wait_for_jobs(&self, queue: &str, timeout: Duration) {
        self.wait(queue, timeout).await
    }

    /// A claim is one pipelined transaction: its round trip and its commit (a WAL flush)
    /// cost about as much as locking and updating a few hundred rows, so larger claims are
    /// cheaper per job.
    fn claims_cost_mostly_fixed(&self) -> bool {
        true
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.inner.core.stats().await
    }

    /// One queue's live jobs, read through the indexes of ready and waiting jobs (the
    /// queue's live rows only; [`stats`](Backend::stats) reads every table whole).
    async fn live_counts(&self, queue: &str) -> Result<LiveCounts, BackendError> {
        check_queue_name(queue)?;
        self.inner.core.live_counts(queue).await
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        filter.check()?;
        self.inner.core.list(filter).await
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        let client = self.inner.core.client().await?;
        Ok(self
            .inner
            .core
            .get_with(&*client, id)
            .await?
            .map(|(info, _)| info))
    }

    async fn revive(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        target.check()?;
        self.inner.core.revive(target).await
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        purge.check()?;
        self.inner.core.purge(purge).await
    }

    /// Deletes the finished jobs `retention` no longer keeps, each outcome by its own age
    /// (see [`Retention`]), in batches of [`PgOptions::prune_batch`](crate::PgOptions::prune_batch)
    /// jobs, each its own transaction; their counters are folded into the statistics first.
    /// A retention that keeps everything returns 0 without touching the database.
    async fn prune(&self, retention: Retention) -> Result<u64, BackendError> {
        self.inner.core.prune(retention).await
    }

    async fn remove_queue(&self, queue: &str) -> Result<u64, BackendError> {
        check_queue_name(queue)?;
        self.inner.core.remove_queue(queue).await
    }
}
