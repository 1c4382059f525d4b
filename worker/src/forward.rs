//! Forwarding the store calls a wrapper does not change to the store it wraps.

/// Inside `impl<B: Backend> Backend for Wrapper<B>`, where the wrapper keeps its store in a
/// field named `inner`: every [`Backend`](crate::Backend) method but `enqueue` and
/// `enqueue_many` (the ones wrappers change), forwarded unchanged, so a wrapper does not
/// repeat twenty signatures and cannot forget one (a forgotten provided method would
/// silently fall back to its default instead of the inner store's).
macro_rules! forward_backend_except_enqueue {
    () => {
        fn claim(
            &self,
            queue: &str,
            max: usize,
            lease: Duration,
        ) -> impl Future<Output = Result<Vec<Job>, BackendError>> + Send {
            self.inner.claim(queue, max, lease)
        }

        fn settle(
            &self,
            batch: Vec<Finished>,
        ) -> impl Future<Output = Result<Each<Settled>, BackendError>> + Send {
            self.inner.settle(batch)
        }

        fn complete(&self, claim: Claim) -> impl Future<Output = Result<(), BackendError>> + Send {
            self.inner.complete(claim)
        }

        fn fail(
            &self,
            job: &Job,
            failure: Failure,
        ) -> impl Future<Output = Result<Outcome, BackendError>> + Send {
            self.inner.fail(job, failure)
        }

        fn release(
            &self,
            claims: Vec<Claim>,
        ) -> impl Future<Output = Result<Each<()>, BackendError>> + Send {
            self.inner.release(claims)
        }

        fn heartbeat(
            &self,
            claim: Claim,
            lease: Duration,
        ) -> impl Future<Output = Result<Millis, BackendError>> + Send {
            self.inner.heartbeat(claim, lease)
        }

        fn heartbeat_many(
            &self,
            claims: Vec<Claim>,
            lease: Duration,
        ) -> impl Future<Output = Result<Each<Millis>, BackendError>> + Send {
            self.inner.heartbeat_many(claims, lease)
        }

        fn settle_and_claim(
            &self,
            batch: Vec<Finished>,
            queue: &str,
            max: usize,
            lease: Duration,
        ) -> impl Future<Output = Result<SettledAndClaimed, BackendError>> + Send {
            self.inner.settle_and_claim(batch, queue, max, lease)
        }

        fn rescue(&self, queue: &str) -> impl Future<Output = Result<u64, BackendError>> + Send {
            self.inner.rescue(queue)
        }

        fn hold_retries(
            &self,
            queue: &str,
            until: Millis,
        ) -> impl Future<Output = Result<u64, BackendError>> + Send {
            self.inner.hold_retries(queue, until)
        }

        fn warm_up(&self, calls: usize) -> impl Future<Output = Result<(), BackendError>> + Send {
            self.inner.warm_up(calls)
        }

        fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
            self.inner.wait_for_jobs(queue, timeout)
        }

        fn claims_cost_mostly_fixed(&self) -> bool {
            self.inner.claims_cost_mostly_fixed()
        }

        fn stats(&self) -> impl Future<Output = Result<Vec<QueueStats>, BackendError>> + Send {
            self.inner.stats()
        }

        fn live_counts(
            &self,
            queue: &str,
        ) -> impl Future<Output = Result<$crate::LiveCounts, BackendError>> + Send {
            self.inner.live_counts(queue)
        }

        fn list(
            &self,
            filter: ListFilter,
        ) -> impl Future<Output = Result<Vec<JobInfo>, BackendError>> + Send {
            self.inner.list(filter)
        }

        fn get(
            &self,
            id: JobId,
        ) -> impl Future<Output = Result<Option<JobInfo>, BackendError>> + Send {
            self.inner.get(id)
        }

        fn revive(
            &self,
            target: ReviveTarget,
        ) -> impl Future<Output = Result<u64, BackendError>> + Send {
            self.inner.revive(target)
        }

        fn purge(&self, purge: Purge) -> impl Future<Output = Result<u64, BackendError>> + Send {
            self.inner.purge(purge)
        }

        fn prune(
            &self,
            retention: $crate::Retention,
        ) -> impl Future<Output = Result<u64, BackendError>> + Send {
            self.inner.prune(retention)
        }

        fn remove_queue(
            &self,
            queue: &str,
        ) -> impl Future<Output = Result<u64, BackendError>> + Send {
            self.inner.remove_queue(queue)
        }
    };
}

pub(crate) use forward_backend_except_enqueue;
