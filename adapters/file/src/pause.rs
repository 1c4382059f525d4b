//! Pausing and resuming a queue ([`Inspect::set_paused`](fairq_worker::Inspect)): the flag
//! lives in the queue's persisted totals, so the owner journals it durably before answering
//! and a reopened store (or a read-only look) finds the queue as it was left. A paused
//! queue's claims take nothing, through `claim` or `settle_and_claim`, and its waiters wait
//! for the resume instead of claiming in a loop; clients ask the owner over the folder's
//! socket.

use fairq_worker::BackendError;

use crate::local::{Local, Persist};
use crate::writer::State;

impl Local {
    /// Pauses (`true`) or resumes (`false`) handing out `queue`'s jobs, durably; a resume
    /// wakes the queue's waiters.
    pub(crate) async fn set_paused(&self, queue: &str, paused: bool) -> Result<(), BackendError> {
        self.change(Persist::Durable, |st, _, _| {
            // Resuming a queue that has no totals changes nothing (and makes none).
            let totals = if paused {
                if !st.totals.contains_key(queue) && st.store.retry_stats(queue).is_none() {
                    // A queue the store did not know: the totals made here are persisted,
                    // and a reopened store lists every queue with totals (with no jobs, as
                    // here), so `stats` lists it from now on too.
                    st.store.set_retry_stats(queue, Default::default());
                }
                Some(st.totals.entry(queue.to_string()).or_default())
            } else {
                st.totals.get_mut(queue)
            };
            if let Some(totals) = totals.filter(|t| t.paused != paused) {
                totals.paused = paused;
                st.pause_changed.push(queue.to_string());
            }
            Ok(())
        })
        .await?;
        if !paused {
            self.wake_queue(queue);
        }
        Ok(())
    }

    /// The paused queues, by name.
    pub(crate) fn paused(&self) -> Result<Vec<String>, BackendError> {
        self.read(State::paused_queues)
    }
}
