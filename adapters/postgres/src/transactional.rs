//! Jobs that run inside their own database transaction (byplay's promise): the handler's
//! writes and the job's success commit together, or neither does.
//!
//! [`PgBackend::run_in_transaction`] opens a transaction on a pooled connection and hands it to
//! the work. When the work returns `Ok`, the job's success is written *in that transaction*
//! by the settlement statement, fenced on the job's lease token, and the transaction commits:
//! the handler's writes, the jobs it enqueued through the transaction and the job's success
//! become visible at once. A lease lost meanwhile (the job was rescued, maybe claimed again)
//! makes the fenced write find nothing, and the whole transaction rolls back, so a fenced
//! worker's writes never land. When the work fails or panics, the transaction rolls back and
//! the failure goes the usual way: the worker settles it (in a batch with other jobs) and core's
//! verdict decides between a retry and death.
//!
//! The worker then settles the success as it settles every job; the store recognises an
//! attempt whose success its own transaction already recorded and answers it without writing
//! again, so transactional jobs and other jobs share the worker's batches.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use fairq_worker::{BackendError, Claim, Each, Failure, Finished, Job, Settled};
use futures::future::BoxFuture;

use crate::settle::Plan;
use crate::store::PgBackend;

/// Claims whose success was committed in the job's own transaction, until the worker settles
/// them. Bounded: a worker that never settles them (it was stopped) cannot grow it for ever.
/// Past the bound the oldest claim is forgotten, one at a time, so only a claim that has
/// waited behind [`REMEMBERED`] newer ones is ever settled again (and then answered as no
/// longer running); the ones a live worker is about to settle stay.
#[derive(Debug, Default)]
pub(crate) struct SelfSettled {
    inner: Mutex<Remembered>,
}

/// The claims, and the order they came in (it may still name claims settled since).
#[derive(Debug, Default)]
struct Remembered {
    claims: HashSet<Claim>,
    order: VecDeque<Claim>,
}

/// Most claims remembered (see [`SelfSettled`]).
const REMEMBERED: usize = 100_000;

impl SelfSettled {
    fn insert(&self, claim: Claim) {
        self.insert_bounded(claim, REMEMBERED);
    }

    fn insert_bounded(&self, claim: Claim, bound: usize) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Remembered { claims, order } = &mut *inner;
        while claims.len() >= bound.max(1) {
            match order.pop_front() {
                Some(oldest) => {
                    claims.remove(&oldest);
                }
                None => claims.clear(),
            }
        }
        if claims.insert(claim) {
            order.push_back(claim);
        }
        // Settled claims leave `claims` at once and `order` lazily: keep it from outgrowing
        // the set by more than the set's own size.
        if order.len() > 2 * claims.len() + 16 {
            order.retain(|c| claims.contains(c));
        }
    }

    /// Splits `batch` into the successes already recorded (marked `true`) and the entries
    /// still to write.
    pub(crate) fn split(&self, batch: Vec<Finished>) -> (Vec<bool>, Vec<Finished>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.claims.is_empty() {
            return (Vec::new(), batch);
        }
        let mut done = Vec::with_capacity(batch.len());
        let mut rest = Vec::with_capacity(batch.len());
        for finished in batch {
            let recorded = finished.is_success() && inner.claims.remove(&finished.claim);
            done.push(recorded);
            if !recorded {
                rest.push(finished);
            }
        }
        (done, rest)
    }
}

/// Puts the answers of a split batch back in order.
pub(crate) fn merge(done: Vec<bool>, rest: Each<Settled>) -> Each<Settled> {
    if done.is_empty() {
        return rest;
    }
    let mut rest = rest.into_iter();
    done.into_iter()
        .map(|recorded| {
            if recorded {
                Ok(Settled::Succeeded)
            } else {
                rest.next().unwrap_or_else(|| {
                    Err(BackendError::Store("a settlement went unanswered".into()))
                })
            }
        })
        .collect()
}

impl PgBackend {
    /// Runs `work` for `job` inside a transaction of its own and, when it succeeds, records
    /// the job's success in that same transaction, so its writes and its success commit
    /// together (exactly-once effects for work that only writes to this database).
    ///
    /// * `Ok` from `work`: the success is written, fenced on the job's lease, and the
    ///   transaction commits. If the lease was lost meanwhile (the job was rescued) the
    ///   transaction rolls back instead and this returns a failure saying so; the worker's
    ///   settlement of it is then refused, and the job runs again elsewhere.
    /// * `Err` from `work`, or a panic: the transaction rolls back; the failure is returned
    ///   for the worker to settle (a retry or death, by core's verdict).
    ///
    /// Jobs enqueued through the transaction ([`enqueue_in`](Self::enqueue_in)) exist only if
    /// it commits.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_postgres::PgBackend, job: fairq_worker::Job) {
    /// let result = store
    ///     .run_in_transaction(&job, |tx, _job| {
    ///         Box::pin(async move {
    ///             tx.execute("UPDATE accounts SET paid = true WHERE id = 7", &[]).await?;
    ///             Ok::<_, tokio_postgres::Error>(())
    ///         })
    ///     })
    ///     .await;
    /// # let _ = result; }
    /// ```
    pub async fn run_in_transaction<F, E>(&self, job: &Job, work: F) -> Result<(), Failure>
    where
        F: for<'t> FnOnce(
            &'t tokio_postgres::Transaction<'t>,
            &'t Job,
        ) -> BoxFuture<'t, Result<(), E>>,
        E: Into<Failure>,
    {
        let core = &self.inner.core;
        let mut client = core.client().await.map_err(unrecorded)?;
        let tx = client
            .transaction()
            .await
            .map_err(|e| unrecorded(core.err(e)))?;
        // An error or a panic drops the transaction, which rolls it back.
        work(&tx, job).await.map_err(Into::into)?;
        let now = core.now();
        let plan = Plan::new(vec![Finished::new(job, Ok(()))], now, &*core.random);
        let args = plan.args();
        let statement = tx
            .prepare_cached(&core.sql.settle)
            .await
            .map_err(|e| unrecorded(core.err(e)))?;
        let rows = tx
            .query(&statement, &args.params(&core.sql.due_channel))
            .await
            .map_err(|e| unrecorded(core.err(e)))?;
        let applied = core.absorb(&rows, now, None).map_err(unrecorded)?;
        if applied.len() == 0 {
            let answer = core.answer(&tx, &plan, &applied, false).await;
            drop(tx);
            let why = match answer.map(|mut a| a.pop()) {
                Ok(Some(Err(e))) | Err(e) => e.to_string(),
                _ => "the job is no longer held under this lease".to_string(),
            };
            return Err(Failure::retryable(format!(
                "rolled back: the success could not be recorded ({why})"
            )));
        }
        tx.commit().await.map_err(|e| unrecorded(core.err(e)))?;
        core.self_settled.insert(job.claim);
        core.promote_after(&*client, &applied.due_now, now).await;
        Ok(())
    }

    /// A handler for [`Worker::handle`](fairq_worker::Worker) that runs `work` in each job's
    /// own transaction (see [`run_in_transaction`](Self::run_in_transaction)).
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_postgres::PgBackend) -> Result<(), Box<dyn std::error::Error>> {
    /// use fairq_worker::{NewJob, QueueConfig, Worker};
    ///
    /// let worker = Worker::builder(store.clone())
    ///     .queue("billing", QueueConfig::default())
    ///     .handle("charge", store.transactional(|tx, job| {
    ///         Box::pin(async move {
    ///             let amount: i64 = serde_json::from_slice(&job.payload)?;
    ///             tx.execute("INSERT INTO charges (amount) VALUES ($1)", &[&amount]).await?;
    ///             // Enqueued only if this job's transaction commits.
    ///             let store = fairq_postgres::Producer::default();
    ///             store.enqueue(tx, NewJob::json("mail", "receipt", &amount)?).await?;
    ///             Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    ///         })
    ///     }))
    ///     .build()?
    ///     .start()?;
    /// # drop(worker); Ok(()) }
    /// ```
    pub fn transactional<F, E>(
        &self,
        work: F,
    ) -> impl Fn(Job) -> BoxFuture<'static, Result<(), Failure>> + Send + Sync + 'static
    where
        F: for<'t> Fn(&'t tokio_postgres::Transaction<'t>, &'t Job) -> BoxFuture<'t, Result<(), E>>
            + Send
            + Sync
            + 'static,
        E: Into<Failure> + 'static,
    {
        let store = self.clone();
        let work = Arc::new(work);
        move |job: Job| {
            let store = store.clone();
            let work = Arc::clone(&work);
            Box::pin(async move {
                store
                    .run_in_transaction(&job, |tx, job| work(tx, job))
                    .await
            })
        }
    }
}

/// A failure to reach the database: the work's writes did not commit.
fn unrecorded(e: BackendError) -> Failure {
    Failure::retryable(format!("rolled back: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairq_core::job::LeaseToken;
    use fairq_worker::JobId;

    fn success(id: u64) -> Finished {
        let mut job = Job::example(vec![]);
        job.claim = Claim {
            id: JobId(id),
            token: LeaseToken(1),
        };
        Finished::new(&job, Ok(()))
    }

    fn claim(id: u64) -> Claim {
        success(id).claim
    }

    #[test]
    fn recorded_successes_are_answered_once_in_batch_order() {
        let remembered = SelfSettled::default();
        remembered.insert(claim(2));
        let (done, rest) = remembered.split(vec![success(1), success(2), success(2)]);
        assert_eq!(done, vec![false, true, false]);
        assert_eq!(
            rest.iter().map(|f| f.claim.id.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        let answers = merge(
            done,
            vec![
                Ok(Settled::Succeeded),
                Err(BackendError::NotFound(JobId(2))),
            ],
        );
        assert_eq!(answers.len(), 3);
        assert!(matches!(answers[1], Ok(Settled::Succeeded)));
        assert!(answers[2].is_err());
    }

    #[test]
    fn past_the_bound_only_the_oldest_claims_are_forgotten() {
        let remembered = SelfSettled::default();
        for id in 1..=10 {
            remembered.insert_bounded(claim(id), 4);
        }
        let (done, _) = remembered.split((1..=10).map(success).collect());
        let kept: Vec<u64> = (1..=10).filter(|id| done[*id as usize - 1]).collect();
        assert_eq!(
            kept,
            vec![7, 8, 9, 10],
            "the four newest stay, the rest went oldest first"
        );
    }

    #[test]
    fn settled_claims_leave_room_and_the_order_stays_small() {
        let remembered = SelfSettled::default();
        for id in 1..=1_000 {
            remembered.insert_bounded(claim(id), 4);
            let (done, _) = remembered.split(vec![success(id)]);
            assert_eq!(done, vec![true], "claim {id} was remembered until settled");
        }
        let inner = remembered.inner.lock().unwrap();
        assert!(inner.claims.is_empty());
        assert!(
            inner.order.len() <= 16,
            "order kept {} stale claims",
            inner.order.len()
        );
    }
}
