//! Enqueueing, on a pooled connection or inside the caller's own transaction (outbox).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use fairq_core::job::Millis;
use fairq_worker::{check_call_size, BackendError, Clock, JobId, NewJob, OnConflict, SystemClock};
use serde_json::Value;
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row};

use crate::core::Core;
use crate::enqueue_one;
use crate::error::{corrupt, db, PgError};
use crate::exec::{Exec, Plain};
use crate::payload;
use crate::rows::{from_db, metadata_to_db, policy_to_db, to_db};
use crate::schema::{SchemaName, DEFAULT_SCHEMA};
use crate::sql::Sql;

/// Enqueues jobs through any `tokio_postgres` client or transaction, so a job commits or
/// rolls back with the caller's own writes (the outbox pattern): rolled back, the job never
/// existed; committed, it runs; never visible to workers before the commit.
///
/// A `Producer` needs no pool: it is the schema name and a clock. Get one from
/// [`PgBackend::producer`](crate::PgBackend::producer) or build it with [`Producer::new`].
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use fairq_postgres::Producer;
/// use fairq_worker::NewJob;
///
/// let (mut client, connection) =
///     tokio_postgres::connect("postgres://postgres@127.0.0.1/test", tokio_postgres::NoTls).await?;
/// tokio::spawn(connection);
/// let producer = Producer::new("fairq")?;
/// let tx = client.transaction().await?;
/// tx.execute("CREATE TEMP TABLE IF NOT EXISTS signups (email text)", &[]).await?;
/// tx.execute("INSERT INTO signups VALUES ('a@example.com')", &[]).await?;
/// producer.enqueue(&tx, NewJob::json("mail", "welcome", &"a@example.com")?).await?;
/// tx.commit().await?; // the signup and its welcome mail, together
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Producer {
    sql: Arc<Sql>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("schema", &self.sql.schema.as_str())
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// A producer for the jobs of `schema`, on the system clock.
    ///
    /// ```
    /// let p = fairq_postgres::Producer::new("fairq").unwrap();
    /// assert_eq!(p.schema(), "fairq");
    /// assert!(fairq_postgres::Producer::new("no way").is_err());
    /// ```
    pub fn new(schema: &str) -> Result<Producer, PgError> {
        Ok(Producer {
            sql: Arc::new(Sql::new(SchemaName::new(schema)?, true)),
            clock: Arc::new(SystemClock),
        })
    }

    pub(crate) fn from_parts(sql: Arc<Sql>, clock: Arc<dyn Clock>) -> Producer {
        Producer { sql, clock }
    }

    /// Reads enqueue times from `clock` instead of the system clock.
    ///
    /// ```
    /// let p = fairq_postgres::Producer::new("fairq").unwrap()
    ///     .with_clock(fairq_worker::ManualClock::new(5));
    /// assert_eq!(p.schema(), "fairq");
    /// ```
    pub fn with_clock(mut self, clock: impl Clock) -> Producer {
        self.clock = Arc::new(clock);
        self
    }

    /// The schema the jobs go to.
    ///
    /// ```
    /// assert_eq!(fairq_postgres::Producer::default().schema(), "fairq");
    /// ```
    pub fn schema(&self) -> &str {
        self.sql.schema.as_str()
    }

    /// Adds one job on `client` (a `tokio_postgres::Client`, or a `Transaction` to join it);
    /// returns its id. With a deadpool connection pass `&**object`, or its transaction.
    /// Errors are those of [`Backend::enqueue`](fairq_worker::Backend::enqueue).
    ///
    /// ```no_run
    /// # async fn demo(client: &tokio_postgres::Client) -> Result<(), fairq_worker::BackendError> {
    /// let producer = fairq_postgres::Producer::default();
    /// let id = producer.enqueue(client, fairq_worker::NewJob::new("q", "kind", vec![])).await?;
    /// # let _ = id; Ok(()) }
    /// ```
    pub async fn enqueue<C: GenericClient + Sync>(
        &self,
        client: &C,
        job: NewJob,
    ) -> Result<JobId, BackendError> {
        let ids = self.enqueue_many(client, vec![job]).await?;
        ids.into_iter()
            .next()
            .ok_or_else(|| corrupt("the insert returned no id"))
    }

    /// Adds many jobs in one batched statement; returns their ids in order. Pass a
    /// transaction to make the batch all or nothing (on a bare client a batch that hits a
    /// duplicate unique key is undone, but a worker may briefly see it).
    ///
    /// ```no_run
    /// # async fn demo(client: &tokio_postgres::Client) -> Result<(), fairq_worker::BackendError> {
    /// use fairq_worker::NewJob;
    /// let jobs = (0..100).map(|i| NewJob::new("q", "kind", vec![i]).key(format!("t{}", i % 7)));
    /// let ids = fairq_postgres::Producer::default().enqueue_many(client, jobs.collect()).await?;
    /// assert_eq!(ids.len(), 100);
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_many<C: GenericClient + Sync>(
        &self,
        client: &C,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<JobId>, BackendError> {
        let now = self.clock.now();
        validate(&jobs, now)?;
        enqueue_batch(&Plain(client), &self.sql, jobs, now).await
    }
}

impl Default for Producer {
    /// A producer for the default schema on the system clock.
    fn default() -> Self {
        Producer {
            sql: Arc::new(Sql::new(
                SchemaName::new(DEFAULT_SCHEMA).expect("the default schema name is valid"),
                true,
            )),
            clock: Arc::new(SystemClock),
        }
    }
}

/// Rejects a batch the store cannot hold, with the same messages as every store
/// ([`check_call_size`], [`NewJob::check`]), before anything is sent.
pub(crate) fn validate(jobs: &[NewJob], now: Millis) -> Result<(), BackendError> {
    check_call_size(jobs)?;
    jobs.iter().try_for_each(|job| job.check(now).map(drop))
}

/// Which dependencies block: `true` for an unfinished or dead dependency, `false` for one
/// that succeeded. Locks each dependency against a concurrent finish (so no dependent is
/// missed) and, with `mark`, marks it so its finish releases its dependents. A batch whose
/// rows may be left out for a taken unique key passes `mark = false` and marks what its
/// inserted rows name afterwards ([`mark_dependencies`]), since a left-out row is answered
/// with the job holding its key and must change nothing.
async fn resolve_dependencies(
    db_: &dyn Exec,
    sql: &Sql,
    jobs: &[NewJob],
    mark: bool,
) -> Result<HashMap<i64, bool>, BackendError> {
    let schema = sql.schema.as_str();
    let wanted: Vec<i64> = jobs
        .iter()
        .filter_map(|j| j.depends_on)
        .map(|id| to_db(id.0))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let mut blocking = HashMap::new();
    if wanted.is_empty() {
        return Ok(blocking);
    }
    let (live, archived) = if mark {
        (&sql.deps_live, &sql.deps_archived)
    } else {
        (&sql.deps_live_lock, &sql.deps_archived_lock)
    };
    for row in db_
        .rows(live, &[&wanted])
        .await
        .map_err(|e| db(e, schema))?
    {
        blocking.insert(
            row.try_get::<_, i64>(0)
                .map_err(|e| corrupt(e.to_string()))?,
            true,
        );
    }
    let rest: Vec<i64> = wanted
        .iter()
        .copied()
        .filter(|id| !blocking.contains_key(id))
        .collect();
    if !rest.is_empty() {
        for row in db_
            .rows(archived, &[&rest])
            .await
            .map_err(|e| db(e, schema))?
        {
            let id: i64 = row.try_get(0).map_err(|e| corrupt(e.to_string()))?;
            let state: String = row.try_get(1).map_err(|e| corrupt(e.to_string()))?;
            blocking.insert(id, state != "succeeded");
        }
    }
    if let Some(missing) = jobs
        .iter()
        .filter_map(|j| j.depends_on)
        .find(|id| !blocking.contains_key(&to_db(id.0)))
    {
        return Err(BackendError::UnknownDependency(missing));
    }
    Ok(blocking)
}

/// Marks the dependencies named by the rows of `jobs` that went in (`inserted` holds their
/// indexes), which [`resolve_dependencies`] locked without marking: one statement, none if
/// they name no dependency. Returns a dependency it no longer found: one deleted between
/// the look-up and now, which only a caller without a transaction leaves possible.
async fn mark_dependencies(
    db_: &dyn Exec,
    sql: &Sql,
    jobs: &[NewJob],
    inserted: impl Iterator<Item = usize>,
) -> Result<Option<JobId>, BackendError> {
    let named: Vec<i64> = inserted
        .filter_map(|i| jobs[i].depends_on)
        .map(|id| to_db(id.0))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if named.is_empty() {
        return Ok(None);
    }
    let rows = db_
        .rows(&sql.deps_mark, &[&named])
        .await
        .map_err(|e| db(e, sql.schema.as_str()))?;
    let mut found = HashSet::with_capacity(rows.len());
    for row in &rows {
        found.insert(
            row.try_get::<_, i64>(0)
                .map_err(|e| corrupt(e.to_string()))?,
        );
    }
    Ok(named
        .into_iter()
        .find(|id| !found.contains(id))
        .map(|id| JobId(from_db(id))))
}

/// Whether `job` waits for its dependency (an unfinished or dead one; see
/// [`resolve_dependencies`]).
fn blocked(job: &NewJob, blocking: &HashMap<i64, bool>) -> bool {
    job.depends_on
        .is_some_and(|d| blocking.get(&to_db(d.0)).copied().unwrap_or(true))
}

/// Runs the batch statement (see `ENQUEUE`) for `jobs`; its rows.
async fn insert_batch(
    db_: &dyn Exec,
    sql: &Sql,
    jobs: &[NewJob],
    blocking: &HashMap<i64, bool>,
    now: Millis,
) -> Result<Vec<Row>, BackendError> {
    let n = jobs.len();
    let mut queue = Vec::with_capacity(n);
    let mut kind = Vec::with_capacity(n);
    let mut key = Vec::with_capacity(n);
    let mut payload = Vec::with_capacity(n);
    let mut payload_json: Vec<Option<Value>> = Vec::with_capacity(n);
    let mut metadata: Vec<Value> = Vec::with_capacity(n);
    let mut retry: Vec<Option<Value>> = Vec::with_capacity(n);
    let mut unique = Vec::with_capacity(n);
    let mut depends = Vec::with_capacity(n);
    let mut blocked = Vec::with_capacity(n);
    let mut run_at = Vec::with_capacity(n);
    for job in jobs {
        queue.push(job.queue.as_str());
        kind.push(job.kind.as_str());
        key.push(job.key.as_deref());
        let columns = payload::split(&job.payload);
        payload.push(columns.bytes);
        payload_json.push(columns.json);
        metadata.push(metadata_to_db(&job.metadata));
        retry.push(policy_to_db(job.retry.as_ref())?);
        unique.push(job.unique_key.as_deref());
        depends.push(job.depends_on.map(|d| to_db(d.0)));
        blocked.push(self::blocked(job, blocking));
        run_at.push(to_db(job.schedule.run_at(now)));
    }
    let now_db = to_db(now);
    let params: [&(dyn ToSql + Sync); 14] = [
        &queue,
        &kind,
        &key,
        &payload,
        &metadata,
        &retry,
        &unique,
        &depends,
        &blocked,
        &run_at,
        &now_db,
        &sql.channel,
        &sql.due_channel,
        &payload_json,
    ];
    let statement = if unique.iter().all(Option::is_none) {
        &sql.enqueue_plain
    } else {
        &sql.enqueue
    };
    db_.rows(statement, &params)
        .await
        .map_err(|e| db(e, sql.schema.as_str()))
}

/// Inserts a batch that [`validate`] passed (see the `ENQUEUE` statement, and `ENQUEUE_ONE`
/// for a single job without a unique key); ids in order.
pub(crate) async fn enqueue_batch(
    db_: &dyn Exec,
    sql: &Sql,
    jobs: Vec<NewJob>,
    now: Millis,
) -> Result<Vec<JobId>, BackendError> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let schema = sql.schema.as_str();
    // Without unique keys every row goes in (or the statement fails), so the dependencies
    // are marked as they are looked up; with them, only once the inserted rows are known.
    let mark_first = jobs.iter().all(|j| j.unique_key.is_none());
    let blocking = resolve_dependencies(db_, sql, &jobs, mark_first).await?;
    let rows = match enqueue_one::lone(&jobs) {
        Some(job) => enqueue_one::insert(db_, sql, job, blocked(job, &blocking), now).await?,
        None => insert_batch(db_, sql, &jobs, &blocking, now).await?,
    };
    let n = jobs.len();

    // Which id each row was planned, which ids went in, who held each unique key.
    let mut inserted: HashSet<i64> = HashSet::new();
    let mut planned: HashMap<usize, i64> = HashMap::new();
    let mut holder: HashMap<usize, i64> = HashMap::new();
    for row in &rows {
        let kind: i32 = row.try_get(0).map_err(|e| corrupt(e.to_string()))?;
        let id: Option<i64> = row.try_get(1).map_err(|e| corrupt(e.to_string()))?;
        let ord: Option<i64> = row.try_get(2).map_err(|e| corrupt(e.to_string()))?;
        let index = ord.and_then(|o| usize::try_from(o - 1).ok());
        match (kind, id, index) {
            (1, Some(id), _) => {
                inserted.insert(id);
            }
            (2, Some(id), Some(i)) => {
                planned.insert(i, id);
            }
            (3, Some(id), Some(i)) => {
                holder.insert(i, id);
            }
            _ => {}
        }
    }
    let inserted_ids: Vec<i64> = inserted.iter().copied().collect();
    let mut ids: Vec<JobId> = Vec::with_capacity(n);
    let mut unresolved = Vec::new();
    let mut existing_of: BTreeMap<usize, JobId> = BTreeMap::new();
    let mut went_in: Vec<usize> = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        if let Some(id) = planned.get(&i).filter(|id| inserted.contains(id)) {
            ids.push(JobId(from_db(*id)));
            went_in.push(i);
            continue;
        }
        // Left out or not inserted: its unique key is held by an unfinished job, or by an
        // earlier row of this batch.
        let earlier = (0..i).find_map(|j| {
            let same = jobs[j].queue == job.queue && jobs[j].unique_key == job.unique_key;
            planned
                .get(&j)
                .filter(|id| same && inserted.contains(id))
                .copied()
        });
        match holder.get(&i).copied().or(earlier) {
            Some(id) => {
                existing_of.insert(i, JobId(from_db(id)));
                ids.push(JobId(from_db(id)));
            }
            None => {
                unresolved.push(i);
                ids.push(JobId(0));
            }
        }
    }
    // Keys taken by a concurrent transaction that committed while the insert ran.
    if !unresolved.is_empty() {
        let queues: Vec<&str> = unresolved.iter().map(|&i| jobs[i].queue.as_str()).collect();
        let keys: Vec<Option<&str>> = unresolved
            .iter()
            .map(|&i| jobs[i].unique_key.as_deref())
            .collect();
        let holders = db_
            .rows(&sql.unique_holders, &[&queues, &keys])
            .await
            .map_err(|e| db(e, schema))?;
        for &i in &unresolved {
            let found = holders.iter().find_map(|row| {
                let q: &str = row.get(0);
                let k: &str = row.get(1);
                (q == jobs[i].queue && Some(k) == jobs[i].unique_key.as_deref())
                    .then(|| JobId(from_db(row.get(2))))
            });
            match found {
                Some(id) => {
                    existing_of.insert(i, id);
                    ids[i] = id;
                }
                None => {
                    undo(db_, sql, &inserted_ids).await?;
                    return Err(BackendError::Unavailable(
                        "a unique key was taken and released while enqueueing; retry".into(),
                    ));
                }
            }
        }
    }
    let duplicate = existing_of
        .keys()
        .copied()
        .find(|&i| jobs[i].on_conflict == OnConflict::Error);
    if let Some(i) = duplicate {
        undo(db_, sql, &inserted_ids).await?;
        return Err(BackendError::Duplicate {
            queue: jobs[i].queue.clone(),
            key: jobs[i].unique_key.clone().unwrap_or_default(),
            existing: existing_of[&i],
        });
    }
    if !mark_first {
        // A dependency deleted since the look-up (a success not kept, a purge) would leave
        // its new dependents blocked for good: the batch is refused as one naming it now is.
        if let Some(gone) = mark_dependencies(db_, sql, &jobs, went_in.into_iter()).await? {
            undo(db_, sql, &inserted_ids).await?;
            return Err(BackendError::UnknownDependency(gone));
        }
    }
    Ok(ids)
}

async fn undo(db_: &dyn Exec, sql: &Sql, inserted: &[i64]) -> Result<(), BackendError> {
    if inserted.is_empty() {
        return Ok(());
    }
    db_.rows(&sql.undo, &[&inserted])
        .await
        .map(|_| ())
        .map_err(|e| db(e, sql.schema.as_str()))
}

impl Core {
    /// Enqueues a batch on a pooled connection: due jobs of the queues that receive ready
    /// jobs take their places in the fair order first; delayed jobs lower the due times.
    pub(crate) async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        validate(&jobs, now)?;
        let mut client = self.client().await?;
        // A job with a dependency may be ready too (its dependency may have succeeded).
        let ready_queues: BTreeSet<&str> = jobs
            .iter()
            .filter(|j| j.schedule.run_at(now) <= now)
            .map(|j| j.queue.as_str())
            .collect();
        let mut delayed: BTreeMap<String, Millis> = BTreeMap::new();
        for job in jobs.iter().filter(|j| j.schedule.run_at(now) > now) {
            let at = job.schedule.run_at(now);
            let slot = delayed.entry(job.queue.clone()).or_insert(at);
            *slot = (*slot).min(at);
        }
        for queue in &ready_queues {
            self.make_due(&*client, queue, now).await?;
        }
        let woken: Vec<String> = ready_queues.iter().map(|q| q.to_string()).collect();
        // A batch that may have to take its rows back (a duplicate under `OnConflict::Error`,
        // a dependency gone meanwhile, a unique key taken and released while it ran, which
        // `OnConflict::Ignore` meets too) runs in a transaction: outside one, its rows would be
        // visible, and claimable, before the undo deleted them.
        let needs_tx = jobs
            .iter()
            .any(|j| j.depends_on.is_some() || j.unique_key.is_some());
        let ids = if needs_tx {
            let tx = client.transaction().await.map_err(|e| self.err(e))?;
            let ids = enqueue_batch(&tx, &self.sql, jobs, now).await?;
            tx.commit().await.map_err(|e| self.err(e))?;
            ids
        } else {
            enqueue_batch(&*client, &self.sql, jobs, now).await?
        };
        for (queue, at) in delayed {
            self.waiting(&queue, at);
        }
        for queue in woken {
            self.signals.wake(&queue);
        }
        Ok(ids)
    }
}
