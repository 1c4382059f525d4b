//! Holding a queue's retries back while its retry sweep waits out a failing downstream
//! ([`Backend::hold_retries`](fairq_worker::Backend::hold_retries)).
//!
//! Retrying jobs are indexed by their run time in `<queue base>retry_at`, so the hold finds
//! exactly the retries due before its end, and [`QueueStats::next_retry_at`] is the index's
//! first score.
//!
//! [`QueueStats::next_retry_at`]: fairq_worker::QueueStats::next_retry_at

use fairq_core::job::Millis;
use fairq_worker::BackendError;

use crate::backend::RedisBackend;
use crate::call::Call;
use crate::record::{ms, number};

impl RedisBackend {
    pub(crate) async fn hold_queue_retries(
        &self,
        queue: &str,
        until: Millis,
    ) -> Result<u64, BackendError> {
        let args = vec![ms(self.now()).into_bytes(), ms(until).into_bytes()];
        let reply = self
            .run(Call::new(
                &self.inner.scripts.hold,
                self.inner.keys.queue_base(queue),
                args,
            ))
            .await?;
        Ok(number(&reply).unwrap_or(0))
    }
}
