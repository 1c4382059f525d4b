//! Cancelling one job ([`Inspect::cancel`]): in one transaction, the job's row is locked and
//! read, a running job is refused, and any other is deleted with the one-job versions of the
//! purge statements (see `sql/cancel.rs`), so it leaves what a purge leaves.

use fairq_worker::{BackendError, Capabilities, Inspect, JobId};

use crate::core::Core;
use crate::exec::Exec;
use crate::rows::{from_db, to_db};
use crate::store::PgBackend;

impl Core {
    /// Deletes job `id` unless it is running.
    pub(crate) async fn cancel(&self, id: JobId) -> Result<(), BackendError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        let db_id = to_db(id.0);
        let rows = tx
            .rows(&self.sql.cancel.state, &[&db_id])
            .await
            .map_err(|e| self.err(e))?;
        let live = match rows.first().map(|r| r.get::<_, String>(0)) {
            Some(state) if state == "running" => {
                // Dropping the transaction rolls it back and lets the row go.
                return Err(BackendError::Invalid(format!(
                    "job {id} is running: it cannot be cancelled"
                )));
            }
            Some(_) => true,
            // Not live: finished (archived), or unknown.
            None => false,
        };
        let gone = if live {
            let rows = tx
                .rows(&self.sql.cancel.live, &[&db_id])
                .await
                .map_err(|e| self.err(e))?;
            // A blocked job's dependency may be left with no dependent.
            self.unmark_depended(&tx, rows.first()).await?
        } else {
            let rows = tx
                .rows(&self.sql.cancel.done, &[&db_id])
                .await
                .map_err(|e| self.err(e))?;
            rows.first().map_or(0, |r| from_db(r.get(0)))
        };
        if gone == 0 {
            return Err(BackendError::NotFound(id));
        }
        tx.commit().await.map_err(|e| self.err(e))
    }
}

/// Operator queries per fairness key (the dashboard's tenants view), read through `list`,
/// cancelling one job that is not running, and pausing queues: a paused queue hands out no
/// job to any worker process from its next claim on, until it is resumed (the pause is a row
/// in the store, so it outlasts restarts).
///
/// ```no_run
/// use fairq_worker::{Backend, Inspect, NewJob};
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let store = fairq_postgres::PgBackend::connect(
///     "postgres://postgres@127.0.0.1/test",
///     fairq_postgres::PgOptions::default().migrate(true),
/// ).await?;
/// assert!(store.capabilities().cancel);
/// let id = store.enqueue(NewJob::new("mail", "send", vec![])).await?;
/// store.cancel(id).await?;
/// assert!(store.get(id).await?.is_none());
/// store.set_paused("mail", true).await?;
/// assert_eq!(store.paused().await?, ["mail"]);
/// store.set_paused("mail", false).await?;
/// # Ok(()) }
/// ```
impl Inspect for PgBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            pause: true,
            cancel: true,
        }
    }

    async fn cancel(&self, id: JobId) -> Result<(), BackendError> {
        self.inner.core.cancel(id).await
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<(), BackendError> {
        fairq_worker::check_queue_name(queue)?;
        self.inner.core.set_paused(queue, paused).await
    }

    async fn paused(&self) -> Result<Vec<String>, BackendError> {
        self.inner.core.paused().await
    }
}
