//! Cancelling one job ([`Inspect::cancel`]): one script on the job's queue (`lua/cancel.lua`)
//! refuses a running job and deletes any other the way purge does.

use fairq_worker::{BackendError, Capabilities, Inspect, JobId};

use crate::backend::RedisBackend;
use crate::call::Call;
use crate::record::status;

impl RedisBackend {
    /// Deletes job `id` unless it is running.
    pub(crate) async fn cancel_job(&self, id: JobId) -> Result<(), BackendError> {
        let queue = self.queue_of(id).await?.ok_or(BackendError::NotFound(id))?;
        let reply = self
            .run(
                Call::new(
                    &self.inner.scripts.cancel,
                    self.inner.keys.queue_base(&queue),
                    vec![id.0.to_string().into_bytes(), b"0".to_vec()],
                )
                .retried_at(1)
                .acknowledged(),
            )
            .await?;
        let reply = status("cancel", &reply)?;
        match reply[0].as_str() {
            "ok" => {
                // Blocked on a job of another queue: its registration there goes too.
                if let Some(dep) = reply.get(1).and_then(|d| d.parse().ok()) {
                    self.forget_deleted_dependents(&queue, vec![(id, JobId(dep))])
                        .await;
                }
                Ok(())
            }
            "running" => Err(BackendError::Invalid(format!(
                "job {id} is running: it cannot be cancelled"
            ))),
            _ => Err(BackendError::NotFound(id)),
        }
    }
}

/// Operator queries per fairness key (the dashboard's tenants view), read through `list`,
/// cancelling one job that is not running, and pausing queues: a paused queue hands out no
/// job to any worker from its next claim on, until it is resumed (the pause is kept in
/// Redis, so it outlasts worker restarts).
///
/// ```no_run
/// use fairq_redis::{RedisBackend, RedisOptions};
/// use fairq_worker::{Backend, Inspect, NewJob};
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let store = RedisBackend::connect("redis://127.0.0.1:6379/", RedisOptions::new()).await?;
/// assert!(store.capabilities().cancel);
/// let id = store.enqueue(NewJob::new("mail", "send", vec![])).await?;
/// store.cancel(id).await?;
/// assert!(store.get(id).await?.is_none());
/// store.set_paused("mail", true).await?;
/// assert_eq!(store.paused().await?, ["mail"]);
/// store.set_paused("mail", false).await?;
/// # Ok(()) }
/// ```
impl Inspect for RedisBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            pause: true,
            cancel: true,
        }
    }

    async fn cancel(&self, id: JobId) -> Result<(), BackendError> {
        self.cancel_job(id).await
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<(), BackendError> {
        fairq_worker::check_queue_name(queue)?;
        self.set_queue_paused(queue, paused).await
    }

    async fn paused(&self) -> Result<Vec<String>, BackendError> {
        self.paused_queues().await
    }
}
