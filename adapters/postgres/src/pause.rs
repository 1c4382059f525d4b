//! Pausing and resuming a queue: a row in `paused` holds the queue's claims (see
//! `sql/pause.rs` and the claim in `sql/worker.rs`), so every worker process sees the pause
//! from its next claim, and it outlasts restarts.

use fairq_worker::BackendError;

use crate::core::Core;
use crate::rows::to_db;

impl Core {
    /// Pauses (`true`) or resumes (`false`) handing out `queue`'s jobs.
    pub(crate) async fn set_paused(&self, queue: &str, paused: bool) -> Result<(), BackendError> {
        let client = self.client().await?;
        let result = if paused {
            let now = to_db(self.now());
            client.execute(&self.sql.pause.pause, &[&queue, &now]).await
        } else {
            client
                .execute(&self.sql.pause.resume, &[&queue, &self.sql.channel])
                .await
        };
        result.map(drop).map_err(|e| self.err(e))
    }

    /// The paused queues, by name.
    pub(crate) async fn paused(&self) -> Result<Vec<String>, BackendError> {
        let client = self.client().await?;
        let rows = client
            .query(&self.sql.pause.paused, &[])
            .await
            .map_err(|e| self.err(e))?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
