//! Operator calls: statistics, listing, revival of dead jobs, purge and prune.

use std::collections::{BTreeMap, BTreeSet};

use fairq_core::job::{State, TransitionError};
use fairq_core::stats::Histogram;
use fairq_worker::{
    BackendError, JobId, JobInfo, JobStatus, ListFilter, LiveCounts, Purge, QueueStats, Retention,
    ReviveTarget, StatusCounts,
};

use crate::core::Core;
use crate::exec::Exec;
use crate::pipeline::Pipelined;
use crate::rows::{self, from_db, to_db};

/// One queue's numbers while they are being added up.
struct Tally {
    stats: QueueStats,
    runs: Box<Histogram>,
}

impl Tally {
    fn new(queue: &str) -> Tally {
        Tally {
            stats: QueueStats::empty(queue),
            runs: Box::new(Histogram::new()),
        }
    }
}

fn status_of(name: &str) -> Option<JobStatus> {
    name.parse().ok()
}

impl Core {
    pub(crate) async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        let client = self.client().await?;
        let (live, done, base, runs) = tokio::try_join!(
            client.prepare_cached(&self.sql.stats_live),
            client.prepare_cached(&self.sql.stats_done),
            client.prepare_cached(&self.sql.stats_base),
            client.prepare_cached(&self.sql.stats_runs),
        )
        .map_err(|e| self.err(e))?;
        // One snapshot for the four reads: a job that finishes meanwhile moves from the live
        // table to the archive, and two snapshots could count it in both or in neither.
        let tx = Pipelined::new(client);
        let c = tx.client();
        let (begin, live, done, base, runs, commit) = tokio::join!(
            c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"),
            c.query(&live, &[]),
            c.query(&done, &[]),
            c.query(&base, &[]),
            c.query(&runs, &[]),
            c.batch_execute("COMMIT"),
        );
        drop(tx.done());
        // The first error in statement order: the later ones only say the transaction was
        // aborted.
        begin.map_err(|e| self.err(e))?;
        let (live, done, base, runs) = (
            live.map_err(|e| self.err(e))?,
            done.map_err(|e| self.err(e))?,
            base.map_err(|e| self.err(e))?,
            runs.map_err(|e| self.err(e))?,
        );
        commit.map_err(|e| self.err(e))?;
        let mut queues: BTreeMap<String, Tally> = BTreeMap::new();
        fn tally<'a>(queues: &'a mut BTreeMap<String, Tally>, queue: &str) -> &'a mut Tally {
            queues
                .entry(queue.to_string())
                .or_insert_with(|| Tally::new(queue))
        }
        for row in &live {
            let t = tally(&mut queues, row.get(0));
            let state: &str = row.get(1);
            if let Some(status) = status_of(state) {
                t.stats.counts.add(status, from_db(row.get(2)));
            }
            t.stats.retries.failures += from_db(row.get(3));
            if let Some(since) = row.get::<_, Option<i64>>(4).map(from_db) {
                t.stats.oldest_error_at =
                    Some(t.stats.oldest_error_at.map_or(since, |o| o.min(since)));
            }
            if state == "retrying" {
                let at = from_db(row.get::<_, i64>(5));
                t.stats.next_retry_at = Some(t.stats.next_retry_at.map_or(at, |n| n.min(at)));
            }
        }
        for row in &done {
            let t = tally(&mut queues, row.get(0));
            let state: &str = row.get(1);
            let n = from_db(row.get(2));
            if let Some(status) = status_of(state) {
                t.stats.counts.add(status, n);
                match status {
                    JobStatus::Succeeded => t.stats.retries.ok += n,
                    JobStatus::Dead => t.stats.retries.dead += n,
                    _ => {}
                }
            }
            t.stats.retries.retries += from_db(row.get(3));
            t.stats.retries.failures += from_db(row.get(4));
        }
        for row in &base {
            let t = tally(&mut queues, row.get(0));
            t.stats.retries.ok += from_db(row.get(1));
            t.stats.retries.retries += from_db(row.get(2));
            t.stats.retries.dead += from_db(row.get(3));
            t.stats.retries.failures += from_db(row.get(4));
        }
        for row in &runs {
            let t = tally(&mut queues, row.get(0));
            t.runs.record_n(from_db(row.get(1)), from_db(row.get(2)));
        }
        Ok(queues
            .into_values()
            .map(|mut t| {
                t.stats.processing_ms = t.runs.summary();
                t.stats
            })
            .collect())
    }

    pub(crate) async fn live_counts(&self, queue: &str) -> Result<LiveCounts, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let rows = conn
            .rows(&self.sql.live_counts, &[&queue])
            .await
            .map_err(|e| self.err(e))?;
        let mut counts = StatusCounts::default();
        for row in &rows {
            if let Some(status) = status_of(row.get(0)) {
                counts.add(status, from_db(row.get(1)));
            }
        }
        Ok(counts.into())
    }

    pub(crate) async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        if filter.limit == 0 {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let queue = filter.queue.as_deref();
        let state = filter.status.map(|s| s.as_str());
        let after = filter.after.map_or(0, |id| to_db(id.0));
        let limit = i64::try_from(filter.limit).unwrap_or(i64::MAX);
        let rows = conn
            .rows(&self.sql.list, &[&queue, &state, &after, &limit])
            .await
            .map_err(|e| self.err(e))?;
        rows.iter()
            .map(|row| rows::info(row).map(|(info, _)| info))
            .collect()
    }

    pub(crate) async fn revive(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let now = self.now();
        let (queue, id) = match &target {
            ReviveTarget::One(id) => {
                self.revivable(conn, *id).await?;
                (None, Some(to_db(id.0)))
            }
            ReviveTarget::AllDead { queue } => (queue.clone(), None),
        };
        let rows = conn
            .rows(
                &self.sql.revive,
                &[&queue, &id, &to_db(now), &self.sql.due_channel],
            )
            .await
            .map_err(|e| self.err(e))?;
        let mut revived = 0;
        let mut queues = BTreeSet::new();
        for row in &rows {
            let queue: String = row.get(0);
            self.waiting(&queue, now);
            queues.insert(queue);
            revived += from_db(row.get(1));
        }
        // Revived jobs wait behind the jobs whose time came earlier; the promotion orders them.
        self.promote_after(conn, &queues, now).await;
        if let (ReviveTarget::One(id), 0) = (&target, revived) {
            // Changed since the check: another transaction took its unique key, or revived
            // or deleted it. The check says which.
            self.revivable(conn, *id).await?;
            return Err(BackendError::Unavailable(
                "the job changed while it was revived; retry".into(),
            ));
        }
        Ok(revived)
    }

    /// Why the dead job `id` cannot be revived now, if it cannot: it does not exist, it is not
    /// dead, or an unfinished job holds its unique key.
    async fn revivable(&self, conn: &dyn Exec, id: JobId) -> Result<(), BackendError> {
        let Some((info, life)) = self.get_with(conn, id).await? else {
            return Err(BackendError::NotFound(id));
        };
        if !matches!(life.state(), State::Dead { .. }) {
            return Err(BackendError::Transition {
                id,
                source: TransitionError::NotDead {
                    state: life.state().name(),
                },
            });
        }
        if let Some(unique) = &info.unique_key {
            let holders = conn
                .rows(
                    &self.sql.unique_holders,
                    &[&vec![info.queue.as_str()], &vec![unique.as_str()]],
                )
                .await
                .map_err(|e| self.err(e))?;
            if let Some(row) = holders.first() {
                return Err(BackendError::Duplicate {
                    queue: info.queue.clone(),
                    key: unique.clone(),
                    existing: JobId(from_db(row.get(2))),
                });
            }
        }
        Ok(())
    }

    pub(crate) async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        let (live, done) = match purge.status {
            None => (true, true),
            Some(JobStatus::Running) => return Ok(0),
            Some(status) => (!status.is_final(), status.is_final()),
        };
        let mut client = self.client().await?;
        let queue = purge.queue.as_deref();
        let state = purge.status.map(|s| s.as_str());
        let mut purged = 0;
        if live {
            // One transaction: the marks of the dependencies whose dependents went are
            // cleared under locks taken after the delete (see `DEPENDED_LOCK`).
            let tx = client.transaction().await.map_err(|e| self.err(e))?;
            let rows = tx
                .rows(&self.sql.purge_live, &[&queue, &state])
                .await
                .map_err(|e| self.err(e))?;
            purged += self.unmark_depended(&tx, rows.first()).await?;
            tx.commit().await.map_err(|e| self.err(e))?;
        }
        if done {
            let conn: &dyn Exec = &*client;
            let rows = conn
                .rows(&self.sql.purge_done, &[&queue, &state])
                .await
                .map_err(|e| self.err(e))?;
            purged += rows.first().map_or(0, |r| from_db(r.get(0)));
        }
        Ok(purged)
    }

    /// Reads the answer of a delete of live jobs (`PURGE_LIVE`, the cancel's `LIVE`): how many
    /// went, and the dependencies of the blocked ones, whose mark that they have dependents is
    /// cleared here where none is left (see `DEPENDED_LOCK`). `tx` is the delete's
    /// transaction, not yet committed.
    pub(crate) async fn unmark_depended(
        &self,
        tx: &dyn Exec,
        answer: Option<&tokio_postgres::Row>,
    ) -> Result<u64, BackendError> {
        let Some(row) = answer else {
            return Err(crate::error::corrupt("the delete answered no row"));
        };
        let gone: i64 = row
            .try_get(0)
            .map_err(|e| crate::error::corrupt(e.to_string()))?;
        let dependencies: Vec<i64> = row
            .try_get(1)
            .map_err(|e| crate::error::corrupt(e.to_string()))?;
        if !dependencies.is_empty() {
            let locked = tx
                .rows(&self.sql.depended_lock, &[&dependencies])
                .await
                .map_err(|e| self.err(e))?
                .iter()
                .map(|r| r.try_get::<_, i64>(0))
                .collect::<Result<Vec<i64>, _>>()
                .map_err(|e| crate::error::corrupt(e.to_string()))?;
            if !locked.is_empty() {
                tx.rows(&self.sql.depended_clear, &[&locked])
                    .await
                    .map_err(|e| self.err(e))?;
            }
        }
        Ok(from_db(gone))
    }

    /// Removes an idle queue (see `REMOVE_QUEUE`). The removal runs in a transaction that
    /// counts the queue's live jobs again once it has deleted, in a snapshot that holds
    /// every dependent whose enqueue it waited for: one found there undoes the removal.
    pub(crate) async fn remove_queue(&self, queue: &str) -> Result<u64, BackendError> {
        let mut client = self.client().await?;
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        let rows = tx
            .rows(&self.sql.remove_queue, &[&queue])
            .await
            .map_err(|e| self.err(e))?;
        let row = rows
            .first()
            .ok_or_else(|| crate::error::corrupt("the removal answered no row"))?;
        let known: bool = row
            .try_get(0)
            .map_err(|e| crate::error::corrupt(e.to_string()))?;
        let live: i64 = row
            .try_get(1)
            .map_err(|e| crate::error::corrupt(e.to_string()))?;
        let removed: i64 = row
            .try_get(2)
            .map_err(|e| crate::error::corrupt(e.to_string()))?;
        if !known {
            return Err(BackendError::UnknownQueue(queue.to_string()));
        }
        if live > 0 {
            return Err(BackendError::QueueNotEmpty {
                queue: queue.to_string(),
                live: from_db(live),
            });
        }
        let live: i64 = tx
            .rows(&self.sql.queue_live, &[&queue])
            .await
            .map_err(|e| self.err(e))?
            .first()
            .map_or(0, |r| r.get(0));
        if live > 0 {
            // Dropping the transaction rolls it back.
            return Err(BackendError::QueueNotEmpty {
                queue: queue.to_string(),
                live: from_db(live),
            });
        }
        tx.commit().await.map_err(|e| self.err(e))?;
        Ok(from_db(removed))
    }

    /// Deletes the finished jobs `retention` no longer keeps: succeeded jobs that finished,
    /// and dead jobs that died, at or before their outcome's cutoff (now minus its age); an
    /// outcome without an age is never touched. At most `prune_batch` jobs per statement,
    /// each statement its own transaction, until one comes back short. A retention that
    /// keeps everything returns 0 without a round trip.
    ///
    /// When dead jobs go, each batch is a transaction of two statements: `PRUNE_DEAD` locks
    /// the dead jobs to delete, then `PRUNE` deletes them (and the succeeded ones), checking
    /// their dependents in a snapshot taken once the locks are held (see `PRUNE_DEAD`).
    pub(crate) async fn prune(&self, retention: Retention) -> Result<u64, BackendError> {
        if retention.keeps_everything() {
            return Ok(0);
        }
        let (succeeded, dead) = retention.cutoffs(self.now());
        let (succeeded, dead) = (succeeded.map(to_db), dead.map(to_db));
        let mut client = self.client().await?;
        let batch = self.options.prune_batch;
        let mut pruned = 0;
        // Batch after batch, each its own transaction, until one comes back short.
        loop {
            let rows = match dead {
                None => {
                    let none: Vec<i64> = Vec::new();
                    let conn: &dyn Exec = &*client;
                    conn.rows(&self.sql.prune, &[&succeeded, &dead, &batch, &none])
                        .await
                        .map_err(|e| self.err(e))?
                }
                Some(cutoff) => {
                    let tx = client.transaction().await.map_err(|e| self.err(e))?;
                    let locked: Vec<i64> = tx
                        .rows(&self.sql.prune_dead, &[&cutoff, &batch])
                        .await
                        .map_err(|e| self.err(e))?
                        .iter()
                        .map(|r| r.get(0))
                        .collect();
                    let rows = tx
                        .rows(&self.sql.prune, &[&succeeded, &dead, &batch, &locked])
                        .await
                        .map_err(|e| self.err(e))?;
                    tx.commit().await.map_err(|e| self.err(e))?;
                    rows
                }
            };
            let n: i64 = rows.first().map_or(0, |r| r.get(0));
            pruned += from_db(n);
            if n < batch {
                return Ok(pruned);
            }
        }
    }
}
