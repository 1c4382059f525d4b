//! The syncs of [`SyncPolicy::Periodic`](crate::SyncPolicy): a timer thread syncs the writer's
//! segment (and the sealed ones not yet synced) every interval. On a storage without helper
//! threads ([`Storage::helper_threads`](crate::storage::Storage::helper_threads), the simulated
//! disk) there is no timer thread: the first put that finds the interval passed on the
//! journal's clock ([`JournalConfig::clock`](crate::JournalConfig)) syncs after its own write,
//! so a run with a [`ManualClock`](crate::ManualClock) syncs at the same puts every time.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::state::{DueSync, Inner};
use crate::sync::lock;
use crate::JournalError;

impl Inner {
    /// After a put under inline periodic syncs: syncs if the interval has passed. The put
    /// was acknowledged already (it reached the operating system); a failed sync poisons the
    /// queue, as the timer thread's would, and the next put reports it.
    #[inline]
    pub(crate) fn sync_if_due(&self) {
        if let Some(due) = &self.due_sync {
            self.sync_if_due_slow(due);
        }
    }

    #[cold]
    fn sync_if_due_slow(&self, due: &DueSync) {
        let now = self.config.clock.now_ms();
        let next = due.next_ms.load(Ordering::Acquire);
        // One put of those that find it due takes it.
        if now < next
            || due
                .next_ms
                .compare_exchange(
                    next,
                    now.saturating_add(due.every_ms),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_err()
        {
            return;
        }
        if self.check_poisoned().is_ok()
            && let Err(e) = self.sync_writer()
        {
            tracing::error!(queue = %self.name, error = %e, "periodic sync failed");
        }
    }

    /// Stops the timer thread, if there is one, and waits for it.
    pub(crate) fn stop_flusher(&self) {
        {
            let (m, cv) = &*self.stop;
            *lock(m) = true;
            cv.notify_all();
        }
        let handle = lock(&self.flusher).take();
        if let Some(h) = handle
            && h.thread().id() != std::thread::current().id()
            && h.join().is_err()
        {
            tracing::error!(queue = %self.name, "periodic sync thread panicked");
        }
    }
}

/// Starts the timer thread that syncs every `every`.
pub(crate) fn spawn_flusher(inner: &Arc<Inner>, every: Duration) -> Result<(), JournalError> {
    let weak = Arc::downgrade(inner);
    let stop = inner.stop.clone();
    let handle = std::thread::Builder::new()
        .name(format!("fairq-journal-sync-{}", inner.name))
        .spawn(move || loop {
            {
                let (m, cv) = &*stop;
                let g = lock(m);
                let (g, _) = cv
                    .wait_timeout_while(g, every, |stopped| !*stopped)
                    .unwrap_or_else(|p| p.into_inner());
                if *g {
                    return;
                }
            }
            let Some(inner) = weak.upgrade() else { return };
            if inner.check_poisoned().is_ok()
                && let Err(e) = inner.sync_writer()
            {
                tracing::error!(queue = %inner.name, error = %e, "periodic sync failed");
            }
        })
        .map_err(|e| JournalError::io(&inner.dir, e))?;
    *lock(&inner.flusher) = Some(handle);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sync_is_due_one_interval_after_opening() {
        let due = DueSync::new(Duration::from_millis(250), 1_000);
        assert_eq!(due.every_ms, 250);
        assert_eq!(due.next_ms.load(Ordering::Relaxed), 1_250);
        // An interval too long for milliseconds in a u64 never comes due.
        let never = DueSync::new(Duration::MAX, 1_000);
        assert_eq!(never.next_ms.load(Ordering::Relaxed), u64::MAX);
    }
}
