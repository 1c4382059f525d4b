//! The [`Backend`] implementation: each method is one of the store's operations.

use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::{
    check_hold_until, check_queue_name, Backend, BackendError, Claim, Each, Finished, Job, JobId,
    JobInfo, ListFilter, LiveCounts, NewJob, Purge, QueueStats, Retention, ReviveTarget, Settled,
    SettledAndClaimed,
};

use crate::backend::RedisBackend;
use crate::error::corrupt;
use crate::settle::Next;

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
        check_queue_name(queue)?;
        self.claim_jobs(queue, max, lease).await
    }

    async fn settle(&self, batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self.settle_batch(batch, None).await?.settled)
    }

    async fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<SettledAndClaimed, BackendError> {
        if let Err(refused) = check_queue_name(queue) {
            let settled = self.settle(batch).await?;
            return Ok(SettledAndClaimed {
                settled,
                claimed: Err(refused),
            });
        }
        self.settle_batch(batch, Some(Next { queue, max, lease }))
            .await
    }

    async fn release(&self, claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        self.hand_back(claims).await
    }

    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        self.heartbeat_claims(vec![claim], lease)
            .await?
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(corrupt("heartbeat reply", "no answer")))
    }

    async fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> Result<Each<Millis>, BackendError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        self.heartbeat_claims(claims, lease).await
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        check_queue_name(queue)?;
        self.rescue_queue(queue).await
    }

    async fn wait_for_jobs(&self, queue: &str, timeout: Duration) {
        self.wait(queue, timeout).await
    }

    async fn hold_retries(&self, queue: &str, until: Millis) -> Result<u64, BackendError> {
        check_queue_name(queue)?;
        check_hold_until(until)?;
        self.hold_queue_retries(queue, until).await
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.all_stats().await
    }

    /// One queue's counters (a few hash reads; [`stats`](Backend::stats) reads every queue).
    async fn live_counts(&self, queue: &str) -> Result<LiveCounts, BackendError> {
        check_queue_name(queue)?;
        Ok(self
            .queue_stats(queue)
            .await?
            .map(|s| LiveCounts::from(s.counts))
            .unwrap_or_default())
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        filter.check()?;
        self.list_jobs(filter).await
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        self.get_job(id).await
    }

    async fn revive(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        target.check()?;
        self.revive_jobs(target).await
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        purge.check()?;
        self.purge_jobs(purge).await
    }

    async fn prune(&self, retention: Retention) -> Result<u64, BackendError> {
        self.prune_jobs(retention).await
    }

    async fn remove_queue(&self, queue: &str) -> Result<u64, BackendError> {
        check_queue_name(queue)?;
        self.remove_queue_named(queue).await
    }
}
