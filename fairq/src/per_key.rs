//! The dashboard's per-key queries ([`Inspect`]) over whichever store is open: each call goes
//! to the store inside, so stores with native answers keep them.

use fairq_core::job::Millis;
use fairq_worker::{BackendError, Capabilities, Inspect, JobId, KeyBacklog, Scan, Started};

use crate::store::Store;

/// Calls the same method on whichever store is inside.
macro_rules! each {
    ($self:expr, $store:ident => $call:expr) => {
        match $self {
            #[cfg(feature = "file")]
            Store::File($store) => $call,
            Store::Memory($store) => $call,
            #[cfg(feature = "postgres")]
            Store::Postgres($store) => $call,
            #[cfg(feature = "redis")]
            Store::Redis($store) => $call,
        }
    };
}

/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use fairq::{Backend, Inspect, NewJob};
/// let store = fairq::connect("memory:").await.unwrap();
/// store.enqueue(NewJob::new("q", "k", vec![]).key("a")).await.unwrap();
/// let backlog = store.backlog_by_key("q", u64::MAX, 1_000).await.unwrap();
/// assert_eq!(backlog.items[0].due, 1);
/// assert!(store.capabilities().cancel); // the memory store cancels jobs
/// # });
/// ```
impl Inspect for Store {
    fn capabilities(&self) -> Capabilities {
        each!(self, s => s.capabilities())
    }

    async fn backlog_by_key(
        &self,
        queue: &str,
        now: Millis,
        budget: usize,
    ) -> Result<Scan<KeyBacklog>, BackendError> {
        each!(self, s => s.backlog_by_key(queue, now, budget).await)
    }

    async fn started_since(
        &self,
        queue: &str,
        since: Millis,
        budget: usize,
    ) -> Result<Scan<Started>, BackendError> {
        each!(self, s => s.started_since(queue, since, budget).await)
    }

    async fn cancel(&self, id: JobId) -> Result<(), BackendError> {
        each!(self, s => s.cancel(id).await)
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<(), BackendError> {
        each!(self, s => s.set_paused(queue, paused).await)
    }

    async fn paused(&self) -> Result<Vec<String>, BackendError> {
        each!(self, s => s.paused().await)
    }
}
