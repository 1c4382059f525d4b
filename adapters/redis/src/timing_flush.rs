//! Flushing run times: this client's pending run times (`timing.rs`) added to each queue's
//! histogram in Redis by one `timing` script call per queue.

use fairq_worker::BackendError;

use crate::backend::RedisBackend;
use crate::call::Call;

impl RedisBackend {
    /// Adds this client's pending run times to Redis.
    pub(crate) async fn flush_timing(&self) -> Result<(), BackendError> {
        for (queue, args) in self.inner.timing.drain() {
            // Not repeated after a broken connection: a lost flush loses run times, a
            // repeated one would count them twice.
            let call = Call::new(
                &self.inner.scripts.timing,
                self.inner.keys.queue_base(&queue),
                args,
            )
            .once();
            self.run(call).await?;
        }
        Ok(())
    }

    /// Flushes in the background when the pending run times are old enough.
    pub(crate) fn maybe_flush_timing(&self) {
        if !self.inner.timing.due(self.inner.options.timing_flush) {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move {
            if let Err(err) = store.flush_timing().await {
                tracing::debug!(error = %err, "run times not flushed");
            }
        });
    }
}
