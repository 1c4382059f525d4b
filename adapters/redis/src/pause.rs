//! Pausing and resuming a queue: the queue's own `paused` key holds its claims (read by
//! `claim_jobs` in `lua/prelude.lua`, set and cleared by `lua/pause.lua`, which also wakes
//! waiters on resume), and the deployment-wide `<prefix>:paused` set lists paused queues for
//! operators. The two are written one after the other, never in one script (they sit in
//! different Redis Cluster slots), in the order that keeps a listed queue's flag the truth:
//! listed before it is flagged, unflagged before it is unlisted, and a listing shows only
//! queues whose flag is set.

use fairq_worker::BackendError;

use crate::backend::RedisBackend;
use crate::call::Call;

impl RedisBackend {
    /// Pauses (`true`) or resumes (`false`) handing out `queue`'s jobs.
    pub(crate) async fn set_queue_paused(
        &self,
        queue: &str,
        paused: bool,
    ) -> Result<(), BackendError> {
        let listing = self.inner.keys.paused();
        if paused {
            let _: i64 = self
                .cmd_query(
                    "pausing a queue",
                    redis::cmd("SADD").arg(&listing).arg(queue),
                )
                .await?;
        }
        // Setting or clearing the flag twice leaves it as once: safe to repeat.
        self.run(Call::new(
            &self.inner.scripts.pause,
            self.inner.keys.queue_base(queue),
            vec![if paused { b"1".to_vec() } else { b"0".to_vec() }],
        ))
        .await?;
        if !paused {
            let _: i64 = self
                .cmd_query(
                    "resuming a queue",
                    redis::cmd("SREM").arg(&listing).arg(queue),
                )
                .await?;
        }
        Ok(())
    }

    /// The paused queues, by name.
    pub(crate) async fn paused_queues(&self) -> Result<Vec<String>, BackendError> {
        let listed: Vec<String> = self
            .cmd_query(
                "listing paused queues",
                redis::cmd("SMEMBERS").arg(self.inner.keys.paused()),
            )
            .await?;
        let mut paused = Vec::new();
        for queue in listed {
            let flag = format!("{}paused", self.inner.keys.queue_base(&queue));
            let flagged: bool = self
                .cmd_query("listing paused queues", redis::cmd("EXISTS").arg(flag))
                .await?;
            if flagged {
                paused.push(queue);
            }
        }
        paused.sort();
        Ok(paused)
    }
}
