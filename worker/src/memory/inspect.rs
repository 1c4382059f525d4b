//! [`Inspect`] for the in-memory store: one pass over its records per query, and pausing.

use std::future::Future;
use std::sync::PoisonError;

use fairq_core::job::Millis;

use super::MemoryBackend;
use crate::error::BackendError;
use crate::inspect::{Capabilities, Inspect, KeyBacklog, Scan, Started};
use crate::job::JobId;

impl MemoryBackend {
    /// True while `queue` is paused.
    pub(super) fn is_paused(&self, queue: &str) -> bool {
        self.inner
            .paused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(queue)
    }
}

/// Answers every query from its records (the budget is not needed: nothing is copied but the
/// answer), cancels jobs, and pauses queues: a paused queue's claims return nothing, and its
/// workers wait until it is resumed.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::{Backend, Inspect, MemoryBackend, NewJob};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryBackend::new();
/// store.enqueue(NewJob::new("mail", "send", vec![])).await?;
/// store.set_paused("mail", true).await?;
/// assert!(store.claim("mail", 1, Duration::from_secs(30)).await?.is_empty());
/// assert_eq!(store.paused().await?, ["mail"]);
/// store.set_paused("mail", false).await?;
/// assert_eq!(store.claim("mail", 1, Duration::from_secs(30)).await?.len(), 1);
/// # Ok::<(), fairq_worker::BackendError>(())
/// # }).unwrap();
/// ```
impl Inspect for MemoryBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            pause: true,
            cancel: true,
        }
    }

    fn backlog_by_key(
        &self,
        queue: &str,
        now: Millis,
        _budget: usize,
    ) -> impl Future<Output = Result<Scan<KeyBacklog>, BackendError>> + Send {
        let scan = crate::job::check_queue_name(queue).map(|()| Scan {
            items: self.store().backlog_by_key(queue, now),
            complete: true,
        });
        async move { scan }
    }

    fn started_since(
        &self,
        queue: &str,
        since: Millis,
        _budget: usize,
    ) -> impl Future<Output = Result<Scan<Started>, BackendError>> + Send {
        let scan = crate::job::check_queue_name(queue).map(|()| Scan {
            items: self.store().started_since(queue, since),
            complete: true,
        });
        async move { scan }
    }

    fn cancel(&self, id: JobId) -> impl Future<Output = Result<(), BackendError>> + Send {
        let result = self.with_store(|store, _| store.cancel(id));
        async move { result }
    }

    fn set_paused(
        &self,
        queue: &str,
        paused: bool,
    ) -> impl Future<Output = Result<(), BackendError>> + Send {
        let checked = crate::job::check_queue_name(queue);
        if checked.is_ok() {
            let mut set = self
                .inner
                .paused
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if paused {
                set.insert(queue.to_string());
            } else {
                set.remove(queue);
            }
        }
        if checked.is_ok() && !paused {
            // Workers waiting on the queue look again.
            self.waker(queue).notify_waiters();
        }
        async { checked }
    }

    fn paused(&self) -> impl Future<Output = Result<Vec<String>, BackendError>> + Send {
        let queues = self
            .inner
            .paused
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        async move { Ok(queues) }
    }
}
