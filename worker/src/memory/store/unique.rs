//! Which unfinished job holds each unique key, per queue. Looked up by `&str`, so checking or
//! releasing a key copies no string (a map keyed by `(queue, key)` pairs had to build an
//! owned pair for every lookup).

use hashbrown::HashMap;

use crate::job::JobId;

/// `queue → unique key → job` of unfinished jobs.
#[derive(Debug, Default)]
pub(super) struct UniqueKeys {
    queues: HashMap<String, HashMap<String, JobId>>,
}

impl UniqueKeys {
    /// The job holding `key` in `queue`.
    pub(super) fn get(&self, queue: &str, key: &str) -> Option<JobId> {
        self.queues.get(queue)?.get(key).copied()
    }

    /// Gives `key` in `queue` to `id`.
    pub(super) fn insert(&mut self, queue: &str, key: &str, id: JobId) {
        self.queues
            .entry_ref(queue)
            .or_default()
            .insert(key.to_string(), id);
    }

    /// Frees `key` in `queue` if `id` holds it.
    pub(super) fn release(&mut self, queue: &str, key: &str, id: JobId) {
        let Some(keys) = self.queues.get_mut(queue) else {
            return;
        };
        if keys.get(key) == Some(&id) {
            keys.remove(key);
        }
    }
}
