//! How a batch's refused entries are answered: by the job's lifecycle as the entry found it.
//!
//! A batch is answered as if its entries were applied one after the other. The statement
//! applies them all at once, so for a job that one entry of the batch changed, the entries
//! before that one found the job still running under that entry's token, and the entries
//! after it found the job as that entry left it; the entries of other jobs found them as the
//! statement did.

use std::collections::{HashMap, HashSet};

use fairq_core::job::{Lease, LeaseToken, Lifecycle};
use fairq_worker::{Claim, JobId};

/// For each job a batch changed: the position of the entry that changed it, its token, and
/// the job as it left it.
#[derive(Debug, Default)]
pub(crate) struct Changed(HashMap<JobId, (usize, LeaseToken, Lifecycle)>);

impl Changed {
    /// Entry `index`, with `claim`, changed its job to `after`.
    pub(crate) fn record(&mut self, index: usize, claim: Claim, after: Lifecycle) {
        self.0
            .entry(claim.id)
            .or_insert((index, claim.token, after));
    }

    /// The job of entry `index` as that entry found it, given the jobs the batch did not
    /// change as the statement found them (`None`: no such job).
    pub(crate) fn as_found(
        &self,
        index: usize,
        id: JobId,
        unchanged: &HashMap<JobId, Lifecycle>,
    ) -> Option<Lifecycle> {
        match self.0.get(&id) {
            Some(&(changer, token, _)) if index < changer => Some(Lifecycle::running(Lease {
                token,
                deadline: 0,
                attempt: 1,
            })),
            Some((_, _, after)) => Some(*after),
            None => unchanged.get(&id).cloned(),
        }
    }
}

/// Per entry: whether it is the first with its (job, token). A repeat is not sent to the
/// statement (one statement must not change a row twice); it finds the job as the first left
/// it.
pub(crate) fn firsts(claims: impl Iterator<Item = Claim>) -> Vec<bool> {
    let mut seen = HashSet::new();
    claims.map(|c| seen.insert((c.id, c.token))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairq_core::job::State;

    fn claim(id: u64, token: u64) -> Claim {
        Claim {
            id: JobId(id),
            token: LeaseToken(token),
        }
    }

    #[test]
    fn entries_before_the_change_find_the_job_running() {
        let mut changed = Changed::default();
        let done = Lifecycle::restore(State::Succeeded { at: 1 }, 2, 2);
        changed.record(1, claim(7, 2), done);
        let mut unchanged = HashMap::new();
        unchanged.insert(JobId(8), Lifecycle::restore(State::Blocked, 0, 0));
        let before = changed.as_found(0, JobId(7), &unchanged).unwrap();
        assert!(matches!(before.state(), State::Running { lease } if lease.token == LeaseToken(2)));
        let after = changed.as_found(2, JobId(7), &unchanged).unwrap();
        assert!(after.state().is_final());
        assert_eq!(
            changed.as_found(0, JobId(8), &unchanged).unwrap().state(),
            &State::Blocked
        );
        assert!(changed.as_found(0, JobId(9), &unchanged).is_none());
    }

    #[test]
    fn repeats_are_recognised_by_job_and_token() {
        let f = firsts([claim(1, 1), claim(1, 2), claim(1, 1), claim(2, 1)].into_iter());
        assert_eq!(f, vec![true, true, false, true]);
    }
}
