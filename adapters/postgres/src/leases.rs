//! Writes on held leases: extending many at once, and handing claimed jobs back unstarted.
//!
//! Each is one statement fenced per row on `(id, token)` and the running state; the entries
//! it does not change get the lifecycle's refusal, as in settlement.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use fairq_core::job::{LeaseToken, Lifecycle, Millis, State};
use fairq_worker::{BackendError, Claim, Each, JobId};

use crate::core::Core;
use crate::exec::Exec;
use crate::found::{firsts, Changed};
use crate::rows::{deadline, from_db, to_db};

/// How a refused entry is explained: the lifecycle call it asked for.
type Check = fn(&mut Lifecycle, Claim, Millis) -> Result<(), fairq_core::job::TransitionError>;

impl Core {
    /// Extends each lease of `claims` to `now + lease` (never shortening it) with one
    /// statement; one answer per claim, in order.
    pub(crate) async fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> Result<Each<Millis>, BackendError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let mut answers: Vec<Option<Result<Millis, BackendError>>> =
            (0..claims.len()).map(|_| None).collect();
        for _ in 0..3 {
            let open: Vec<usize> = (0..claims.len())
                .filter(|&i| answers[i].is_none())
                .collect();
            if open.is_empty() {
                break;
            }
            let now = self.now();
            // In id order, the order every statement that waits for a running job's row
            // lock takes them in (see `HEARTBEAT`): a worker's heartbeat and its own
            // settlement of some of the same jobs then never wait for each other in a circle.
            let mut entries: Vec<(i64, i64)> = open
                .iter()
                .map(|&i| (to_db(claims[i].id.0), to_db(claims[i].token.0)))
                .collect();
            entries.sort_unstable();
            let (ids, tokens): (Vec<i64>, Vec<i64>) = entries.into_iter().unzip();
            let rows = conn
                .rows(&self.sql.heartbeat, &[&ids, &tokens, &deadline(now, lease)])
                .await
                .map_err(|e| self.err(e))?;
            let extended: HashMap<(JobId, LeaseToken), Millis> = rows
                .iter()
                .map(|r| {
                    let id = JobId(from_db(r.get(0)));
                    let token = LeaseToken(from_db(r.get(1)));
                    (
                        (id, token),
                        from_db(r.get::<_, Option<i64>>(2).unwrap_or(0)),
                    )
                })
                .collect();
            let mut refused = Vec::new();
            for &i in &open {
                match extended.get(&(claims[i].id, claims[i].token)) {
                    Some(&until) => answers[i] = Some(Ok(until)),
                    None => refused.push(i),
                }
            }
            let check: Check =
                |life, claim, now| life.heartbeat(claim.token, now, Duration::ZERO).map(drop);
            let unchanged = Changed::default();
            for (i, answer) in self
                .explain(conn, &claims, &refused, &unchanged, now, check)
                .await?
            {
                answers[i] = answer.map(Err);
            }
        }
        Ok(answers.into_iter().map(unexplained).collect())
    }

    /// Hands `claims` back before their handlers started: each job whose lease is still
    /// current is due again now (after the jobs already waiting), its attempt refunded and its
    /// lease fenced; one answer per claim, in order.
    pub(crate) async fn release(&self, claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let now = self.now();
        let first = firsts(claims.iter().copied());
        let sent: Vec<usize> = (0..claims.len()).filter(|&i| first[i]).collect();
        let ids: Vec<i64> = sent.iter().map(|&i| to_db(claims[i].id.0)).collect();
        let tokens: Vec<i64> = sent.iter().map(|&i| to_db(claims[i].token.0)).collect();
        let rows = conn
            .rows(
                &self.sql.release,
                &[&ids, &tokens, &to_db(now), &self.sql.due_channel],
            )
            .await
            .map_err(|e| self.err(e))?;
        let mut released = HashMap::new();
        let mut queues = BTreeSet::new();
        for row in &rows {
            let token: i64 = row.get(2);
            let state: &str = row.get(3);
            let attempts = u32::try_from(row.get::<_, i64>(4).max(0)).unwrap_or(u32::MAX);
            let state = if state == "retrying" {
                State::Retrying { run_at: now }
            } else {
                State::Scheduled { run_at: now }
            };
            released.insert(
                (JobId(from_db(row.get(0))), LeaseToken(from_db(token))),
                Lifecycle::restore(state, attempts, from_db(token)),
            );
            let queue: String = row.get(1);
            self.waiting(&queue, now);
            queues.insert(queue);
        }
        self.promote_after(conn, &queues, now).await;
        let mut changed = Changed::default();
        let mut answers: Vec<Option<Result<(), BackendError>>> = Vec::with_capacity(claims.len());
        for (i, c) in claims.iter().enumerate() {
            if let (true, Some(after)) = (first[i], released.get(&(c.id, c.token))) {
                changed.record(i, *c, *after);
                answers.push(Some(Ok(())));
            } else {
                answers.push(None);
            }
        }
        let refused: Vec<usize> = (0..claims.len())
            .filter(|&i| answers[i].is_none())
            .collect();
        let check: Check = |life, claim, now| life.release(claim.token, now);
        for (i, answer) in self
            .explain(conn, &claims, &refused, &changed, now, check)
            .await?
        {
            // A hand-back the lifecycle would take is one that raced with another change:
            // the caller may hand it back again.
            answers[i] = Some(answer.map_or_else(
                || {
                    Err(BackendError::Unavailable(
                        "the job changed while it was handed back; retry".into(),
                    ))
                },
                Err,
            ));
        }
        Ok(answers.into_iter().map(unexplained).collect())
    }

    /// The lifecycle's refusal of each entry of `claims` at `indexes`, as the entry found its
    /// job (`None`: it would take it, so the job changed under the statement).
    async fn explain(
        &self,
        conn: &dyn Exec,
        claims: &[Claim],
        indexes: &[usize],
        changed: &Changed,
        now: Millis,
        check: Check,
    ) -> Result<Vec<(usize, Option<BackendError>)>, BackendError> {
        if indexes.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = indexes
            .iter()
            .map(|&i| to_db(claims[i].id.0))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let jobs: HashMap<JobId, Lifecycle> = self
            .get_many(conn, &ids)
            .await?
            .into_iter()
            .map(|(info, life)| (info.id, life))
            .collect();
        Ok(indexes
            .iter()
            .map(|&i| {
                let claim = claims[i];
                let refusal =
                    match changed.as_found(i, claim.id, &jobs) {
                        None => Some(BackendError::NotFound(claim.id)),
                        Some(mut life) => check(&mut life, claim, now).err().map(|source| {
                            BackendError::Transition {
                                id: claim.id,
                                source,
                            }
                        }),
                    };
                (i, refusal)
            })
            .collect())
    }
}

/// An entry still without an answer after every try.
fn unexplained<T>(answer: Option<Result<T, BackendError>>) -> Result<T, BackendError> {
    answer.unwrap_or_else(|| {
        Err(BackendError::Unavailable(
            "the job kept changing while its lease was extended; retry".into(),
        ))
    })
}
