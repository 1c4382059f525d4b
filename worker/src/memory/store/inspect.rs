//! The operator queries of [`Inspect`](crate::Inspect), answered in one pass over the store's
//! records: no job is copied, and no payload is touched.

use std::collections::BTreeMap;

use fairq_core::job::{Millis, State};

use super::Store;
use crate::error::BackendError;
use crate::inspect::{KeyBacklog, Started};
use crate::job::JobId;

impl Store {
    /// The unfinished jobs of `queue` per fairness key at `now`, ordered by key.
    ///
    /// ```
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![]).key("a"); 2], 0).unwrap();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![]).key("b").run_at_millis(50)], 0).unwrap();
    /// let keys = store.backlog_by_key("q", 10);
    /// assert_eq!((keys[0].due, keys[1].later), (2, 1));
    /// ```
    pub fn backlog_by_key(&self, queue: &str, now: Millis) -> Vec<KeyBacklog> {
        let mut keys: BTreeMap<Option<&str>, KeyBacklog> = BTreeMap::new();
        for (id, record) in self.jobs.iter().filter(|(_, r)| r.queue == queue) {
            let state = record.life.state();
            if state.is_final() {
                continue;
            }
            keys.entry(record.key.as_deref())
                .or_insert_with(|| KeyBacklog::new(record.key.clone()))
                .add(id, state, now);
        }
        keys.into_values().collect()
    }

    /// The last attempts of `queue`'s jobs that started at or after `since`, by job id.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// store.enqueue_many(vec![NewJob::new("q", "k", vec![])], 100).unwrap();
    /// let job = store.claim("q", 1, Duration::from_secs(30), 130).remove(0);
    /// store.complete(job.claim, 150).unwrap();
    /// let started = store.started_since("q", 0);
    /// assert_eq!((started[0].wait_ms(), started[0].run_ms()), (30, Some(20)));
    /// ```
    pub fn started_since(&self, queue: &str, since: Millis) -> Vec<Started> {
        self.jobs
            .iter()
            .filter(|(_, r)| r.queue == queue && r.life.attempts() > 0 && r.claimed_at >= since)
            .filter_map(|(id, r)| {
                let (finished_at, succeeded) = match *r.life.state() {
                    State::Succeeded { at } => (Some(at), true),
                    State::Dead { at, .. } => (Some(at), false),
                    State::Running { .. } => (None, false),
                    // Waiting for a retry (or revived): its last attempt's times are gone.
                    _ => return None,
                };
                Some(Started {
                    id,
                    key: r.key.clone(),
                    run_at: r.due_at,
                    started_at: r.claimed_at,
                    finished_at,
                    succeeded,
                })
            })
            .collect()
    }

    /// Deletes job `id` unless it is running.
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::memory::store::Store;
    /// use fairq_worker::NewJob;
    /// let mut store = Store::default();
    /// let ids = store.enqueue_many(vec![NewJob::new("q", "k", vec![]); 2], 0).unwrap();
    /// store.claim("q", 1, Duration::from_secs(30), 0);
    /// assert!(store.cancel(ids[0]).is_err()); // running
    /// store.cancel(ids[1]).unwrap();
    /// assert!(store.get(ids[1]).is_none());
    /// ```
    pub fn cancel(&mut self, id: JobId) -> Result<(), BackendError> {
        let record = self.jobs.get(&id).ok_or(BackendError::NotFound(id))?;
        if let State::Running { .. } = record.life.state() {
            return Err(BackendError::Invalid(format!(
                "job {id} is running: it cannot be cancelled"
            )));
        }
        self.remove(id);
        Ok(())
    }
}
