//! Settlement: how finished attempts are recorded, many per statement, each fenced on its own
//! lease token; and the rescue of expired leases, which records lost attempts the same way.
//!
//! A batch becomes a [`Plan`]: core's verdict for each entry, computed here from the entry
//! alone ([`Finished::verdict`]), so the statement never reads a job before changing it. The
//! `SETTLE` statement applies every entry whose job still runs under the entry's token and
//! names the jobs it changed; the entries it does not name were refused, and each gets its own
//! answer from the job's lifecycle (a stale lease, a job no longer running, an unknown job).
//! Settlements that arrive together from several tasks are written by one statement
//! ([`Settler`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, PoisonError};

use fairq_core::job::{LeaseToken, Lifecycle, Millis, Setback, State};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{BackendError, Claim, Each, Finished, JobId, Random, Settled};
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::core::Core;
use crate::error::corrupt;
use crate::exec::Exec;
use crate::found::{firsts, Changed};
use crate::rows::{self, from_db, policy_from_db, reason_name, to_db};
use crate::self_settled::merge;
use crate::settler::Request;
use crate::sql::SETTLE_BEGIN;
use crate::store::PgBackend;

/// The message recorded on a job whose lease expired (the same words as every store).
pub(crate) const LEASE_EXPIRED: &str = "lease expired: the worker stopped renewing it";

/// One entry of a settlement, with the verdict it applies.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) claim: Claim,
    /// What the entry leads to if it applies (its answer).
    pub(crate) settled: Settled,
    /// The failure message (a failed attempt).
    pub(crate) message: Option<String>,
}

/// A batch ready for the `SETTLE` statement.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) entries: Vec<Entry>,
    /// Per entry: whether it is the first with its (job, token) (see [`firsts`]).
    first: Vec<bool>,
    now: Millis,
    /// The entries are expired leases taken back by a rescue.
    rescue: bool,
    /// How many entries earlier statements of the same event sent (see
    /// [`Plan::numbered_after`]).
    before: i64,
}

impl Plan {
    /// Core's verdict for every entry of `batch` at `now`.
    pub(crate) fn new(batch: Vec<Finished>, now: Millis, random: &dyn Random) -> Plan {
        let entries = batch
            .into_iter()
            .map(|finished| {
                let settled = finished
                    .verdict(now, random.next_u64())
                    .map_or(Settled::Succeeded, Settled::from);
                Entry {
                    claim: finished.claim,
                    message: finished.failure().map(|f| f.stored_message().into_owned()),
                    settled,
                }
            })
            .collect();
        Plan::of(entries, now, false)
    }

    fn of(entries: Vec<Entry>, now: Millis, rescue: bool) -> Plan {
        let first = firsts(entries.iter().map(|e| e.claim));
        Plan {
            entries,
            first,
            now,
            rescue,
            before: 0,
        }
    }

    /// Numbers the entries after `before` entries that earlier statements of the same event
    /// sent (a rescue's earlier batches), so the jobs this plan makes due now go after theirs.
    fn numbered_after(mut self, before: i64) -> Plan {
        self.before = before;
        self
    }

    /// The answers when the statement committed but what it did could not be read in full
    /// (`applied`: what its rows said, if they could be read): the entries it names as
    /// applied get their verdicts, every other entry an error saying so. A caller that
    /// claimed in the same transaction still gets its jobs.
    pub(crate) fn unread(&self, applied: Option<&Applied>, err: &BackendError) -> Each<Settled> {
        let why = format!(
            "the settlement committed, but whether this entry was applied could not be \
             read: {err}"
        );
        self.entries
            .iter()
            .enumerate()
            .map(|(i, e)| match applied {
                Some(applied) if self.first[i] && applied.took(e.claim) => Ok(e.settled),
                _ if err.is_transient() => Err(BackendError::Unavailable(why.clone().into())),
                _ => Err(BackendError::Store(why.clone().into())),
            })
            .collect()
    }

    /// Whether applying the plan may make jobs due at once: a retry without delay, or a
    /// success that may release dependents.
    pub(crate) fn may_make_due(&self) -> bool {
        self.entries.iter().any(|e| match e.settled {
            Settled::Succeeded => true,
            Settled::Retry { run_at } => run_at <= self.now,
            Settled::Dead { .. } => false,
        })
    }

    /// The statement's arguments.
    pub(crate) fn args(&self) -> SettleArgs {
        let sent = self
            .entries
            .iter()
            .zip(&self.first)
            .filter(|(_, first)| **first)
            .map(|(e, _)| e);
        let mut args = SettleArgs {
            ids: Vec::new(),
            tokens: Vec::new(),
            verdicts: Vec::new(),
            run_at: Vec::new(),
            reasons: Vec::new(),
            messages: Vec::new(),
            now: to_db(self.now),
            rescue: self.rescue,
            before: self.before,
        };
        for e in sent {
            args.ids.push(to_db(e.claim.id.0));
            args.tokens.push(to_db(e.claim.token.0));
            let (verdict, run_at, reason) = match e.settled {
                Settled::Succeeded => ("succeeded", None, None),
                Settled::Retry { run_at } => ("retry", Some(to_db(run_at)), None),
                Settled::Dead { reason } => ("dead", None, Some(reason_name(reason))),
            };
            args.verdicts.push(verdict);
            args.run_at.push(run_at);
            args.reasons.push(reason);
            args.messages.push(e.message.clone());
        }
        args
    }
}

/// The arguments of one `SETTLE` statement.
pub(crate) struct SettleArgs {
    ids: Vec<i64>,
    tokens: Vec<i64>,
    verdicts: Vec<&'static str>,
    run_at: Vec<Option<i64>>,
    reasons: Vec<Option<&'static str>>,
    messages: Vec<Option<String>>,
    now: i64,
    rescue: bool,
    before: i64,
}

impl SettleArgs {
    pub(crate) fn params<'a>(&'a self, due_channel: &'a String) -> [&'a (dyn ToSql + Sync); 10] {
        [
            &self.ids,
            &self.tokens,
            &self.verdicts,
            &self.run_at,
            &self.reasons,
            &self.messages,
            &self.now,
            &self.rescue,
            due_channel,
            &self.before,
        ]
    }
}

/// What a `SETTLE` statement changed.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// The jobs it changed, with the tokens of the entries that changed them.
    changed: HashSet<(JobId, LeaseToken)>,
    /// The jobs entries named but it did not change, as it found them.
    unchanged: HashMap<JobId, Lifecycle>,
    /// Queues in which it made jobs due at once (they need a promotion).
    pub(crate) due_now: BTreeSet<String>,
}

impl Applied {
    pub(crate) fn len(&self) -> usize {
        self.changed.len()
    }

    fn took(&self, claim: Claim) -> bool {
        self.changed.contains(&(claim.id, claim.token))
    }
}

impl Core {
    /// Reads the rows of a `SETTLE` statement and records the waiting jobs it made in the due
    /// times (except in `promoted`, a queue whose promotion ran after it in its transaction).
    pub(crate) fn absorb(
        &self,
        rows: &[Row],
        now: Millis,
        promoted: Option<&str>,
    ) -> Result<Applied, BackendError> {
        let mut applied = Applied::default();
        for row in rows {
            let tag: i32 = row.try_get(0).map_err(|e| corrupt(e.to_string()))?;
            if tag == 0 {
                continue;
            }
            let id: i64 = row.try_get(1).map_err(|e| corrupt(e.to_string()))?;
            if tag == 4 {
                applied
                    .unchanged
                    .insert(JobId(from_db(id)), rows::lifecycle(row, 5)?);
                continue;
            }
            let queue: String = row.try_get(2).map_err(|e| corrupt(e.to_string()))?;
            let at: Option<i64> = row.try_get(3).map_err(|e| corrupt(e.to_string()))?;
            let token: Option<i64> = row.try_get(4).map_err(|e| corrupt(e.to_string()))?;
            if let (true, Some(token)) = (tag != 3, token) {
                applied
                    .changed
                    .insert((JobId(from_db(id)), LeaseToken(from_db(token))));
            }
            if let Some(at) = at.map(from_db) {
                if promoted != Some(queue.as_str()) {
                    self.waiting(&queue, at);
                    if at <= now {
                        applied.due_now.insert(queue);
                    }
                }
            }
        }
        Ok(applied)
    }

    /// Settles `plan` on a connection of its own: one statement (in a transaction of its own
    /// under [`SETTLE_BEGIN`], see [`Core::alone`]), then the promotions of the queues where it made jobs due, then an answer for
    /// every entry. A statement whose reply was lost is sent again on a fresh connection,
    /// which recognises what the first one did.
    pub(crate) async fn settle(&self, plan: &Plan) -> Result<Each<Settled>, BackendError> {
        if plan.entries.is_empty() {
            return Ok(Vec::new());
        }
        match self.settle_once(plan, false).await {
            Err(e) if e.is_transient() => self.settle_once(plan, true).await,
            other => other,
        }
    }

    /// Settles `plan` again after the reply of an earlier try was lost, recognising the
    /// entries that try applied.
    pub(crate) async fn settle_after_lost_reply(
        &self,
        plan: &Plan,
    ) -> Result<Each<Settled>, BackendError> {
        self.settle_once(plan, true).await
    }

    async fn settle_once(
        &self,
        plan: &Plan,
        recovering: bool,
    ) -> Result<Each<Settled>, BackendError> {
        let client = self.client().await?;
        let settle = client
            .prepare_cached(&self.sql.settle)
            .await
            .map_err(|e| self.err(e))?;
        let args = plan.args();
        let params = args.params(&self.sql.due_channel);
        let (client, rows) = self.alone(client, SETTLE_BEGIN, &settle, &params).await?;
        let conn: &dyn Exec = &*client;
        let applied = self.absorb(&rows, plan.now, None)?;
        self.promote_after(conn, &applied.due_now, plan.now).await;
        self.answer(conn, plan, &applied, recovering).await
    }

    /// Promotes the queues where a write made jobs due at once. The write has committed, so a
    /// failure here is only reported: the due times still say the queue needs a promotion,
    /// which its next claim runs.
    pub(crate) async fn promote_after(
        &self,
        conn: &dyn Exec,
        queues: &BTreeSet<String>,
        now: Millis,
    ) {
        for queue in queues {
            if let Err(e) = self.make_due(conn, queue, now).await {
                tracing::warn!(queue = %queue, error = %e, "fairq-postgres: promotion after a settlement failed");
            }
        }
    }

    /// One answer per entry of `plan`: the verdict for the entries `applied` names, the
    /// lifecycle's refusal for the others. An entry that the lifecycle would accept (its job
    /// changed between the statement and this look) is sent again, at most twice.
    pub(crate) async fn answer(
        &self,
        conn: &dyn Exec,
        plan: &Plan,
        applied: &Applied,
        recovering: bool,
    ) -> Result<Each<Settled>, BackendError> {
        let mut answers: Vec<Option<Result<Settled, BackendError>>> =
            (0..plan.entries.len()).map(|_| None).collect();
        let mut changed = Changed::default();
        let take = |answers: &mut Vec<Option<Result<Settled, BackendError>>>,
                    changed: &mut Changed,
                    applied: &Applied| {
            for (i, e) in plan.entries.iter().enumerate() {
                if answers[i].is_none() && plan.first[i] && applied.took(e.claim) {
                    answers[i] = Some(Ok(e.settled));
                    changed.record(i, e.claim, after(e, plan.now));
                }
            }
        };
        take(&mut answers, &mut changed, applied);
        let mut unchanged = applied.unchanged.clone();
        for _ in 0..3 {
            let mut again = Vec::new();
            for (i, (answer, entry)) in answers.iter_mut().zip(&plan.entries).enumerate() {
                if answer.is_some() {
                    continue;
                }
                let Some(life) = changed.as_found(i, entry.claim.id, &unchanged) else {
                    // A store that does not keep succeeded jobs deletes them: a retried
                    // settlement that finds such a job gone finds the first try's work.
                    *answer = Some(if recovering && gone_as_settled(self, entry) {
                        Ok(entry.settled)
                    } else {
                        Err(BackendError::NotFound(entry.claim.id))
                    });
                    continue;
                };
                if recovering && recognised(&life, entry) {
                    *answer = Some(Ok(entry.settled));
                    changed.record(i, entry.claim, life);
                    continue;
                }
                match refusal(&life, entry, plan.now) {
                    Some(e) => *answer = Some(Err(e)),
                    None => again.push(entry.clone()),
                }
            }
            if again.is_empty() {
                break;
            }
            // Jobs that changed under the statement (another session held them): the
            // lifecycle would take these entries now, so they are sent again.
            let retry = Plan::of(again, plan.now, plan.rescue).numbered_after(plan.before);
            let args = retry.args();
            let rows = conn
                .rows(&self.sql.settle, &args.params(&self.sql.due_channel))
                .await
                .map_err(|e| self.err(e))?;
            let done = self.absorb(&rows, plan.now, None)?;
            self.promote_after(conn, &done.due_now, plan.now).await;
            take(&mut answers, &mut changed, &done);
            unchanged.extend(done.unchanged);
        }
        Ok(answers
            .into_iter()
            .map(|a| {
                a.unwrap_or_else(|| {
                    Err(BackendError::Unavailable(
                        "the job kept changing while it was settled; retry".into(),
                    ))
                })
            })
            .collect())
    }

    /// Takes back every job of `queue` whose lease has expired, each by core's verdict for a
    /// lost attempt, through the settlement statement (which re-checks the lease).
    /// Holds back the retries of `queue` until `until` (see
    /// [`Backend::hold_retries`](fairq_worker::Backend::hold_retries)): one statement moves
    /// every earlier retry, whether it waits for its time or already has a place in the fair
    /// order.
    pub(crate) async fn hold_retries(
        &self,
        queue: &str,
        until: Millis,
    ) -> Result<u64, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let rows = conn
            .rows(
                &self.sql.hold_retries,
                &[&queue, &to_db(until), &self.sql.due_channel],
            )
            .await
            .map_err(|e| self.err(e))?;
        let held = rows.first().map_or(0, |r| from_db(r.get::<_, i64>(0)));
        if held > 0 {
            // Due again at `until`: the next look after it promotes them.
            self.waiting(queue, until);
        }
        Ok(held)
    }

    pub(crate) async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let now = self.now();
        let mut rescued = 0;
        // Entries sent by earlier batches: each batch numbers its jobs after theirs, so the
        // jobs the pass makes due now come back in id order across batches.
        let mut sent: i64 = 0;
        let mut due_now = BTreeSet::new();
        loop {
            let rows = conn
                .rows(
                    &self.sql.expired,
                    &[&queue, &to_db(now), &self.options.rescue_batch],
                )
                .await
                .map_err(|e| self.err(e))?;
            let mut entries = Vec::with_capacity(rows.len());
            for row in &rows {
                let attempts: i64 = row.get(1);
                let policy = policy_from_db(row.get(3))?;
                let attempt = u32::try_from(attempts.max(0)).unwrap_or(u32::MAX);
                let outcome = fairq_core::job::verdict(
                    &policy,
                    attempt,
                    Setback::LeaseExpired,
                    now,
                    self.random.next_u64(),
                );
                entries.push(Entry {
                    claim: Claim {
                        id: JobId(from_db(row.get(0))),
                        token: fairq_core::job::LeaseToken(from_db(row.get(2))),
                    },
                    settled: Settled::from(outcome),
                    message: Some(LEASE_EXPIRED.to_string()),
                });
            }
            if !entries.is_empty() {
                let count = i64::try_from(entries.len()).unwrap_or(i64::MAX);
                let plan = Plan::of(entries, now, true).numbered_after(sent);
                sent = sent.saturating_add(count);
                let args = plan.args();
                let rows = conn
                    .rows(&self.sql.settle, &args.params(&self.sql.due_channel))
                    .await
                    .map_err(|e| self.err(e))?;
                let applied = self.absorb(&rows, now, None)?;
                rescued += applied.len() as u64;
                due_now.extend(applied.due_now);
            }
            if (rows.len() as i64) < self.options.rescue_batch {
                break;
            }
        }
        conn.rows(&self.sql.trim_rounds, &[&queue])
            .await
            .map_err(|e| self.err(e))?;
        conn.rows(&self.sql.fold_settled, &[&queue])
            .await
            .map_err(|e| self.err(e))?;
        let released = conn
            .rows(
                &self.sql.release_stragglers,
                &[&queue, &to_db(now), &self.sql.due_channel],
            )
            .await
            .map_err(|e| self.err(e))?;
        if !released.is_empty() {
            self.waiting(queue, now);
            due_now.insert(queue.to_string());
        }
        self.promote_after(conn, &due_now, now).await;
        Ok(rescued)
    }
}

/// The job as an applied `entry` left it (for the entries after it in the same batch).
fn after(entry: &Entry, now: Millis) -> Lifecycle {
    let state = match entry.settled {
        Settled::Succeeded => State::Succeeded { at: now },
        Settled::Retry { run_at } => State::Retrying { run_at },
        Settled::Dead { reason } => State::Dead { at: now, reason },
    };
    Lifecycle::restore(state, 1, entry.claim.token.0)
}

/// Whether `entry`, retried after a lost reply, names a job that its first try may have
/// deleted: a success, in a store that does not keep succeeded jobs. While its lease holds
/// nothing else deletes a running job; should the lease have run out in the meantime, the job
/// is gone because another worker's success was not kept either (or, rarer still, because it
/// was purged while waiting to run again).
fn gone_as_settled(core: &Core, entry: &Entry) -> bool {
    !core.options.keep_succeeded && matches!(entry.settled, Settled::Succeeded)
}

/// Whether a job already shows what `entry` would have done: its settlement committed but the
/// reply was lost.
fn recognised(life: &Lifecycle, entry: &Entry) -> bool {
    if life.last_token() != entry.claim.token.0 {
        return false;
    }
    matches!(
        (entry.settled, life.state()),
        (Settled::Succeeded, State::Succeeded { .. })
            | (Settled::Retry { .. }, State::Retrying { .. })
            | (Settled::Dead { .. }, State::Dead { .. })
    )
}

/// Why the lifecycle refuses `entry` (`None`: it would take it).
fn refusal(life: &Lifecycle, entry: &Entry, now: Millis) -> Option<BackendError> {
    let mut life = *life;
    let token = entry.claim.token;
    let result = match entry.settled {
        Settled::Succeeded => life.complete(token, now),
        Settled::Retry { .. } | Settled::Dead { .. } => life
            .setback(token, Setback::Failed, now, &RetryPolicy::new(0), 0)
            .map(drop),
    };
    result.err().map(|source| BackendError::Transition {
        id: entry.claim.id,
        source,
    })
}

/// Most settlement statements in flight at once, on separate connections, so the server can
/// flush their commits together.
const FLIGHTS: usize = 4;

impl PgBackend {
    /// Settles `batch`, together with whatever other tasks settle at the same time.
    pub(crate) async fn settle_together(
        &self,
        batch: Vec<Finished>,
    ) -> Result<Each<Settled>, BackendError> {
        let (done, batch) = self.inner.core.self_settled.split(batch);
        let answers = self.settle_rest(batch).await?;
        Ok(merge(done, answers))
    }

    async fn settle_rest(&self, batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        let request = Request { batch, reply };
        let sender = {
            let mut slot = self
                .inner
                .settler
                .sender
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match slot.as_ref() {
                Some(sender) if !sender.is_closed() => sender.clone(),
                _ => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    tokio::spawn(run_settler(self.inner.core.clone(), rx));
                    *slot = Some(tx.clone());
                    tx
                }
            }
        };
        match sender.send(request) {
            Ok(()) => answer.await.unwrap_or_else(|_| {
                Err(BackendError::Unavailable(
                    "the settlement task stopped before answering".into(),
                ))
            }),
            // The settler died with its runtime: settle directly.
            Err(mpsc::error::SendError(request)) => {
                let core = &self.inner.core;
                let plan = Plan::new(request.batch, core.now(), &*core.random);
                core.settle(&plan).await
            }
        }
    }
}

async fn run_settler(core: Arc<Core>, mut rx: mpsc::UnboundedReceiver<Request>) {
    let max = core.options.complete_batch;
    let flights = Arc::new(Semaphore::new(FLIGHTS));
    while let Some(first) = rx.recv().await {
        let Ok(flight) = flights.clone().acquire_owned().await else {
            return;
        };
        let mut entries = first.batch.len();
        let mut requests = vec![first];
        while entries < max {
            match rx.try_recv() {
                Ok(request) => {
                    entries += request.batch.len();
                    requests.push(request);
                }
                Err(_) => break,
            }
        }
        let core = core.clone();
        tokio::spawn(async move {
            let sizes: Vec<usize> = requests.iter().map(|r| r.batch.len()).collect();
            let mut replies = Vec::with_capacity(requests.len());
            let mut all = Vec::with_capacity(entries);
            for request in requests {
                all.extend(request.batch);
                replies.push(request.reply);
            }
            let plan = Plan::new(all, core.now(), &*core.random);
            match core.settle(&plan).await {
                Ok(answers) => {
                    let mut answers = answers.into_iter();
                    for (reply, n) in replies.into_iter().zip(sizes) {
                        let _ = reply.send(Ok(answers.by_ref().take(n).collect()));
                    }
                }
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(Err(share(&e)));
                    }
                }
            }
            drop(flight);
        });
    }
}

/// A copy of an error for every request of a failed statement.
pub(crate) fn share(err: &BackendError) -> BackendError {
    match err {
        BackendError::Unavailable(e) => BackendError::Unavailable(e.to_string().into()),
        other => BackendError::Store(other.to_string().into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairq_core::job::DeadReason;
    use fairq_worker::{Failure, FixedRandom, Job};

    fn job(id: u64, token: u64) -> Job {
        let mut job = Job::example(vec![]);
        job.claim = Claim {
            id: JobId(id),
            token: LeaseToken(token),
        };
        job
    }

    #[test]
    fn a_plan_sends_each_job_once_with_core_verdicts() {
        let batch = vec![
            Finished::new(&job(1, 1), Ok(())),
            Finished::new(&job(2, 1), Err(Failure::permanent("no"))),
            Finished::new(&job(1, 1), Ok(())),
        ];
        let plan = Plan::new(batch, 50, &FixedRandom(0));
        let args = plan.args();
        assert_eq!(args.ids, vec![1, 2], "the repeat is not sent");
        assert!(!plan.first[2]);
        assert_eq!(args.verdicts, vec!["succeeded", "dead"]);
        assert_eq!(args.reasons, vec![None, Some("discarded")]);
        assert_eq!(args.messages, vec![None, Some("no".to_string())]);
        assert_eq!(
            plan.entries[1].settled,
            Settled::Dead {
                reason: DeadReason::Discarded
            }
        );
        assert!(plan.may_make_due(), "a success may release dependents");
    }

    #[test]
    fn a_refused_entry_gets_the_lifecycles_reason() {
        let life = Lifecycle::restore(State::Succeeded { at: 5 }, 1, 1);
        let entry = Entry {
            claim: Claim {
                id: JobId(1),
                token: LeaseToken(1),
            },
            settled: Settled::Succeeded,
            message: None,
        };
        let refused = refusal(&life, &entry, 10).expect("refused");
        assert!(refused.to_string().contains("job 1"), "{refused}");
        assert!(recognised(&life, &entry), "a lost reply of this success");
        let stale = Entry {
            claim: Claim {
                id: JobId(1),
                token: LeaseToken(0),
            },
            ..entry
        };
        assert!(!recognised(&life, &stale));
    }
}
