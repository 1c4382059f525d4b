//! Dependencies between jobs of different queues (different Cluster slots, so no script can
//! see both): the dependent waits blocked in its queue, registered with the dependency's queue;
//! the dependency's success returns its registered dependents and the store releases each in
//! its own queue. A recheck in each queue's housekeeping repairs a release that a crash
//! between the two steps left undone (see maintain.lua).

use std::collections::BTreeMap;

use fairq_worker::{BackendError, JobId};

use crate::backend::RedisBackend;
use crate::call::Call;
use crate::record::{ms, text};

impl RedisBackend {
    /// The state of `dep` in `dep_queue`: `missing`, `succeeded` or `pending`.
    pub(crate) async fn dependency_state(
        &self,
        dep: JobId,
        dep_queue: &str,
    ) -> Result<String, BackendError> {
        let reply = self
            .run(Call::new(
                &self.inner.scripts.depend,
                self.inner.keys.queue_base(dep_queue),
                vec![b"check".to_vec(), dep.0.to_string().into_bytes()],
            ))
            .await?;
        Ok(text(&reply).unwrap_or_default())
    }

    /// Registers job `id` of `queue` as waiting for `dep` of `dep_queue`; returns `dep`'s
    /// state: `succeeded` (the caller releases the job itself), `pending` (registered) or
    /// `missing` (deleted since the caller looked: pruned, purged, or a success that was not
    /// kept; nothing is registered).
    pub(crate) async fn register_dependent(
        &self,
        dep: JobId,
        dep_queue: &str,
        queue: &str,
        id: JobId,
    ) -> Result<String, BackendError> {
        let reply = self
            .run(
                Call::new(
                    &self.inner.scripts.depend,
                    self.inner.keys.queue_base(dep_queue),
                    vec![
                        b"register".to_vec(),
                        dep.0.to_string().into_bytes(),
                        registration_of(queue, id).into_bytes(),
                    ],
                )
                .acknowledged(),
            )
            .await?;
        Ok(text(&reply).unwrap_or_default())
    }

    /// Releases blocked jobs `(queue, id, dependency)` whose dependency succeeded, one script
    /// call per queue, in the order of their ids (the order they were enqueued in, within a
    /// queue), as the reference store releases them: the dependents a success returns come
    /// from a set, whose members Redis lists in no particular order. Returns how many were
    /// released.
    pub(crate) async fn unblock(
        &self,
        jobs: Vec<(String, JobId, JobId)>,
    ) -> Result<u64, BackendError> {
        let mut by_queue: BTreeMap<String, Vec<(JobId, JobId)>> = BTreeMap::new();
        for (queue, id, dep) in jobs {
            by_queue.entry(queue).or_default().push((id, dep));
        }
        let mut released = 0;
        for (queue, mut jobs) in by_queue {
            jobs.sort_unstable_by_key(|&(id, _)| id.0);
            let mut args = vec![ms(self.now()).into_bytes()];
            for (id, dep) in jobs {
                args.push(id.0.to_string().into_bytes());
                args.push(dep.0.to_string().into_bytes());
            }
            let reply = self
                .run(
                    Call::new(
                        &self.inner.scripts.unblock,
                        self.inner.keys.queue_base(&queue),
                        args,
                    )
                    .acknowledged(),
                )
                .await?;
            released += crate::record::number(&reply).unwrap_or(0);
        }
        Ok(released)
    }

    /// Drops registrations `(dependency, '<queue>\n<id>')` from `dep_queue`, the dependencies'
    /// queue, whose jobs no longer wait (depend.lua's `forget`), in one script call: a
    /// dependency left with no dependent loses its mark, so that a store not keeping
    /// successes deletes its success. Returns how many were dropped.
    pub(crate) async fn forget_registrations(
        &self,
        dep_queue: &str,
        registrations: &[(JobId, String)],
    ) -> Result<u64, BackendError> {
        if registrations.is_empty() {
            return Ok(0);
        }
        let mut args = vec![b"forget".to_vec()];
        for (dep, entry) in registrations {
            args.push(dep.0.to_string().into_bytes());
            args.push(entry.clone().into_bytes());
        }
        let reply = self
            .run(
                Call::new(
                    &self.inner.scripts.depend,
                    self.inner.keys.queue_base(dep_queue),
                    args,
                )
                .acknowledged(),
            )
            .await?;
        Ok(crate::record::number(&reply).unwrap_or(0))
    }

    /// After jobs `(id, dependency)` of `queue` that were blocked on jobs of other queues were
    /// deleted (purged or cancelled), drops their registrations there, one call per
    /// dependencies' queue. The deletion and this cannot be one script (the two queues may
    /// live on different Cluster nodes); a registration this does not drop (a failure here,
    /// logged, or a crash in between) only keeps its dependency marked, so that its success
    /// is kept until a prune, as before registrations were dropped, and a dead one until a
    /// prune finds the registration stale.
    pub(crate) async fn forget_deleted_dependents(
        &self,
        queue: &str,
        deleted: Vec<(JobId, JobId)>,
    ) {
        let mut by_queue: BTreeMap<std::sync::Arc<str>, Vec<(JobId, String)>> = BTreeMap::new();
        for (id, dep) in deleted {
            match self.queue_of(dep).await {
                Ok(Some(dep_queue)) => by_queue
                    .entry(dep_queue)
                    .or_default()
                    .push((dep, registration_of(queue, id))),
                // A queue number the registry does not know holds no registration.
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(job = %id, dependency = %dep, error = %err,
                        "registration of a deleted dependent not dropped");
                }
            }
        }
        for (dep_queue, registrations) in by_queue {
            if let Err(err) = self.forget_registrations(&dep_queue, &registrations).await {
                tracing::warn!(queue = %dep_queue, error = %err,
                    "registrations of deleted dependents not dropped");
            }
        }
    }

    /// Releases the other-queue dependents a success returned (`'<queue>\n<id>'` each).
    pub(crate) async fn release_dependents(&self, dep: JobId, dependents: &[String]) {
        let jobs: Vec<(String, JobId, JobId)> = dependents
            .iter()
            .filter_map(|d| {
                let (queue, id) = registration(d)?;
                Some((queue.to_string(), JobId(id.parse().ok()?), dep))
            })
            .collect();
        if jobs.is_empty() {
            return;
        }
        if let Err(err) = self.unblock(jobs).await {
            // The dependents' queues recheck blocked jobs in their housekeeping.
            tracing::warn!(job = %dep, error = %err, "dependents in other queues not released yet");
        }
    }
}

/// How a dependent in another queue is filed in its dependency's `xdeps:<id>` set: its
/// queue's name, a line break, its id.
pub(crate) fn registration_of(queue: &str, id: JobId) -> String {
    format!("{queue}\n{}", id.0)
}

/// The queue and the id of a registration made by [`registration_of`]. The id is a decimal
/// number, and a queue name may hold line breaks: the last one ends the name.
pub(crate) fn registration(entry: &str) -> Option<(&str, &str)> {
    entry.rsplit_once('\n')
}

#[cfg(test)]
mod tests {
    use super::{registration, registration_of};
    use fairq_worker::JobId;

    #[test]
    fn a_registration_names_its_queue_whatever_the_name_holds() {
        for queue in ["b", "b\nx", "\n", "a\n\nb\n", "{q}"] {
            let entry = registration_of(queue, JobId(131_073));
            assert_eq!(registration(&entry), Some((queue, "131073")), "{queue:?}");
        }
        assert_eq!(registration("no line break"), None);
    }
}
