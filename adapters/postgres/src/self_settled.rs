//! Successes a job's own transaction already committed (`transactional.rs`), remembered
//! until the worker settles them, and the answers of a batch put back in order.

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use fairq_worker::{BackendError, Claim, Each, Finished, Settled};

/// Claims whose success was committed in the job's own transaction, until the worker settles
/// them. Bounded: a worker that never settles them (it was stopped) cannot grow it for ever.
/// Past the bound the oldest claim is forgotten, one at a time, so only a claim that has
/// waited behind [`REMEMBERED`] newer ones is ever settled again (and then answered as no
/// longer running); the ones a live worker is about to settle stay.
#[derive(Debug, Default)]
pub(crate) struct SelfSettled {
    inner: Mutex<Remembered>,
}

/// The claims, and the order they came in (it may still name claims settled since).
#[derive(Debug, Default)]
struct Remembered {
    claims: HashSet<Claim>,
    order: VecDeque<Claim>,
}

/// Most claims remembered (see [`SelfSettled`]).
const REMEMBERED: usize = 100_000;

impl SelfSettled {
    /// Remembers that `claim`'s success was committed in its own transaction.
    pub(crate) fn insert(&self, claim: Claim) {
        self.insert_bounded(claim, REMEMBERED);
    }

    fn insert_bounded(&self, claim: Claim, bound: usize) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Remembered { claims, order } = &mut *inner;
        while claims.len() >= bound.max(1) {
            match order.pop_front() {
                Some(oldest) => {
                    claims.remove(&oldest);
                }
                None => claims.clear(),
            }
        }
        if claims.insert(claim) {
            order.push_back(claim);
        }
        // Settled claims leave `claims` at once and `order` lazily: keep it from outgrowing
        // the set by more than the set's own size.
        if order.len() > 2 * claims.len() + 16 {
            order.retain(|c| claims.contains(c));
        }
    }

    /// Splits `batch` into the successes already recorded (marked `true`) and the entries
    /// still to write.
    pub(crate) fn split(&self, batch: Vec<Finished>) -> (Vec<bool>, Vec<Finished>) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.claims.is_empty() {
            return (Vec::new(), batch);
        }
        let mut done = Vec::with_capacity(batch.len());
        let mut rest = Vec::with_capacity(batch.len());
        for finished in batch {
            let recorded = finished.is_success() && inner.claims.remove(&finished.claim);
            done.push(recorded);
            if !recorded {
                rest.push(finished);
            }
        }
        (done, rest)
    }
}

/// Puts the answers of a split batch back in order.
pub(crate) fn merge(done: Vec<bool>, rest: Each<Settled>) -> Each<Settled> {
    if done.is_empty() {
        return rest;
    }
    let mut rest = rest.into_iter();
    done.into_iter()
        .map(|recorded| {
            if recorded {
                Ok(Settled::Succeeded)
            } else {
                rest.next().unwrap_or_else(|| {
                    Err(BackendError::Store("a settlement went unanswered".into()))
                })
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairq_core::job::LeaseToken;
    use fairq_worker::{Job, JobId};

    fn success(id: u64) -> Finished {
        let mut job = Job::example(vec![]);
        job.claim = Claim {
            id: JobId(id),
            token: LeaseToken(1),
        };
        Finished::new(&job, Ok(()))
    }

    fn claim(id: u64) -> Claim {
        success(id).claim
    }

    #[test]
    fn recorded_successes_are_answered_once_in_batch_order() {
        let remembered = SelfSettled::default();
        remembered.insert(claim(2));
        let (done, rest) = remembered.split(vec![success(1), success(2), success(2)]);
        assert_eq!(done, vec![false, true, false]);
        assert_eq!(
            rest.iter().map(|f| f.claim.id.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        let answers = merge(
            done,
            vec![
                Ok(Settled::Succeeded),
                Err(BackendError::NotFound(JobId(2))),
            ],
        );
        assert_eq!(answers.len(), 3);
        assert!(matches!(answers[1], Ok(Settled::Succeeded)));
        assert!(answers[2].is_err());
    }

    #[test]
    fn past_the_bound_only_the_oldest_claims_are_forgotten() {
        let remembered = SelfSettled::default();
        for id in 1..=10 {
            remembered.insert_bounded(claim(id), 4);
        }
        let (done, _) = remembered.split((1..=10).map(success).collect());
        let kept: Vec<u64> = (1..=10).filter(|id| done[*id as usize - 1]).collect();
        assert_eq!(
            kept,
            vec![7, 8, 9, 10],
            "the four newest stay, the rest went oldest first"
        );
    }

    #[test]
    fn settled_claims_leave_room_and_the_order_stays_small() {
        let remembered = SelfSettled::default();
        for id in 1..=1_000 {
            remembered.insert_bounded(claim(id), 4);
            let (done, _) = remembered.split(vec![success(id)]);
            assert_eq!(done, vec![true], "claim {id} was remembered until settled");
        }
        let inner = remembered.inner.lock().unwrap();
        assert!(inner.claims.is_empty());
        assert!(
            inner.order.len() <= 16,
            "order kept {} stale claims",
            inner.order.len()
        );
    }
}
