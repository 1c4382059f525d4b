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

use std::sync::Arc;

use fairq_worker::{BackendError, Failure, Finished, Job};
use futures::future::BoxFuture;

use crate::settle::Plan;
use crate::store::PgBackend;

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
