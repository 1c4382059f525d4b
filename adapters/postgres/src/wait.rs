//! Waiting for work: [`Backend::wait_for_jobs`](fairq_worker::Backend::wait_for_jobs) sleeps
//! until a notification names the queue, its next waiting job is due, or the timeout.

use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::BackendError;

use crate::core::Core;
use crate::exec::Exec;
use crate::rows::from_db;
use crate::store::PgBackend;

impl Core {
    /// `Ok(None)`: a job is ready now; `Ok(Some(at))`: the next one is due at `at`;
    /// `Ok(Some(u64::MAX))`: nothing is waiting, or the queue is paused (its resume wakes
    /// the waiters: a paused queue's ready jobs must not make them claim in a loop).
    async fn next_due(&self, queue: &str) -> Result<Option<Millis>, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let rows = conn
            .rows(&self.sql.due, &[&queue])
            .await
            .map_err(|e| self.err(e))?;
        let Some(row) = rows.first() else {
            return Ok(Some(u64::MAX));
        };
        let paused = row.get::<_, bool>(2);
        if row.get::<_, bool>(0) && !paused {
            return Ok(None);
        }
        let next = row.get::<_, Option<i64>>(1).map(from_db);
        if let Some(at) = next {
            // Whatever this store's due times say, a job waits until `at`.
            self.waiting(queue, at);
        }
        if paused {
            return Ok(Some(u64::MAX));
        }
        Ok(Some(next.unwrap_or(u64::MAX)))
    }
}

impl PgBackend {
    pub(crate) async fn wait(&self, queue: &str, timeout: Duration) {
        self.start_listener();
        let core = &self.inner.core;
        let notify = core.signals.of(queue);
        let notified = notify.notified();
        tokio::pin!(notified);
        // Register before looking, so a wake-up in between is not missed.
        notified.as_mut().enable();
        let mut wait = timeout;
        if !core.signals.listening() {
            wait = wait.min(core.options.poll_interval);
        }
        match core.next_due(queue).await {
            Ok(None) => return,
            Ok(Some(at)) => {
                let now = core.now();
                if at <= now {
                    return;
                }
                if at != u64::MAX {
                    wait = wait.min(Duration::from_millis(at - now));
                }
            }
            Err(_) => wait = wait.min(core.options.poll_interval),
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}
