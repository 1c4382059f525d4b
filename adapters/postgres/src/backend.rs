//! [`PgBackend`]: the [`Backend`] on PostgreSQL.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use fairq_core::job::{Lease, Lifecycle, Millis, Outcome, State};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{
    random_u64, Backend, BackendError, Claim, Clock, Failure, Job, JobId, JobInfo, ListFilter,
    NewJob, OnConflict, Purge, QueueStats, RetryTarget,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_postgres::types::ToSql;
use tokio_postgres::GenericClient;

use crate::enqueue::{enqueue_batch, Producer};
use crate::error::{corrupt, db, pool, PgError};
use crate::exec::Exec;
use crate::listen::{self, Signals};
use crate::options::PgOptions;
use crate::rows::{self, deadline, from_db, policy_from_db, reason_name, to_db};
use crate::schema::{self, SchemaName};
use crate::sql::Sql;

/// The message recorded on a job whose lease expired (the same words as every store).
pub(crate) const LEASE_EXPIRED: &str = "lease expired: the worker stopped renewing it";

/// A job store on PostgreSQL. Clones share the pool, the listener and the batcher.
///
/// * **Enqueue** inserts in batches (one `UNNEST` statement per call), and
///   [`producer`](Self::producer) enqueues inside the caller's own transaction.
/// * **Claims** take the first ready jobs in fair order with `FOR UPDATE SKIP LOCKED`,
///   driven by one index (see the [crate docs](crate) for the SQL and why it is fair).
/// * **Completions** that arrive together are written by one statement, moving the jobs to
///   the archive table in the transaction that finishes them.
/// * **Wake-ups** come by LISTEN/NOTIFY on a dedicated connection, with polling as the
///   fallback.
///
/// Time comes from the configured [`Clock`], never from the server.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use fairq_postgres::{PgBackend, PgOptions};
/// use fairq_worker::{Backend, NewJob};
///
/// let store = PgBackend::connect(
///     "postgres://postgres@127.0.0.1:5432/test",
///     PgOptions::default().migrate(true),
/// )
/// .await?;
/// store.enqueue(NewJob::json("mail", "welcome", &"a@example.com")?.key("tenant-1")).await?;
/// for job in store.claim("mail", 10, Duration::from_secs(30)).await? {
///     // ... run it ...
///     store.complete(job.claim).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PgBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBackend")
            .field("schema", &self.schema())
            .field("pool", &self.inner.core.pool.status())
            .finish_non_exhaustive()
    }
}

struct Inner {
    core: Arc<Core>,
    acker: Mutex<Option<mpsc::UnboundedSender<Ack>>>,
    listen_config: Option<tokio_postgres::Config>,
    listener: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let listener = self
            .listener
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = listener.take() {
            task.abort();
        }
    }
}

/// A completion waiting for the batcher.
struct Ack {
    claim: Claim,
    reply: oneshot::Sender<Result<(), BackendError>>,
}

/// What every operation needs: the pool, the statements, the clock.
pub(crate) struct Core {
    pub(crate) pool: Pool,
    pub(crate) sql: Arc<Sql>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) options: PgOptions,
    pub(crate) signals: Arc<Signals>,
}

/// Why a conditional write did not apply.
enum Diagnosis {
    /// A definite error to report.
    Error(BackendError),
    /// The job changed under us in a way that lets the call succeed now: try again.
    Retry,
}

/// The operation whose refusal is being explained.
#[derive(Clone, Copy)]
enum Op {
    Complete,
    Heartbeat(Duration),
    Fail { permanent: bool },
}

impl PgBackend {
    /// Connects to `url` (`postgres://user@host:port/db` or `host=... dbname=...`), builds a
    /// pool and starts the listener. With [`PgOptions::migrate`] on, the schema is created
    /// or upgraded; otherwise a missing schema is an error that says to migrate.
    ///
    /// Errors: [`PgError::BadUrl`], [`PgError::Unavailable`] (server down or refusing),
    /// [`PgError::SchemaMissing`], [`PgError::SchemaTooNew`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), fairq_postgres::PgError> {
    /// let store = fairq_postgres::PgBackend::connect(
    ///     "postgres://postgres@127.0.0.1/test",
    ///     fairq_postgres::PgOptions::default().migrate(true),
    /// ).await?;
    /// # let _ = store; Ok(()) }
    /// ```
    pub async fn connect(url: &str, options: PgOptions) -> Result<PgBackend, PgError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(PgError::BadUrl)?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("fairq");
        }
        let manager = Manager::from_config(
            config.clone(),
            tokio_postgres::NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.wait_timeout))
            .create_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| PgError::Pool(e.to_string()))?;
        let migrate = options.migrate;
        let backend = PgBackend::build(pool, Some(config), options)?;
        let schema = backend.inner.core.sql.schema.clone();
        let mut client = backend
            .inner
            .core
            .pool
            .get()
            .await
            .map_err(|e| PgError::from_pool(e, schema.as_str()))?;
        if migrate {
            schema::migrate(&mut client, &schema).await?;
        } else {
            check_version(&client, &schema).await?;
        }
        drop(client);
        backend.start_listener();
        Ok(backend)
    }

    /// A store on the caller's own pool. Nothing is checked until the first call; without a
    /// connection config for the listener, idle workers poll (see
    /// [`from_pool_with_listener`](Self::from_pool_with_listener)).
    ///
    /// ```
    /// use deadpool_postgres::{Manager, Pool};
    /// let config: tokio_postgres::Config = "host=127.0.0.1 user=postgres dbname=test".parse().unwrap();
    /// let pool = Pool::builder(Manager::new(config, tokio_postgres::NoTls)).build().unwrap();
    /// let store = fairq_postgres::PgBackend::from_pool(pool, Default::default()).unwrap();
    /// assert_eq!(store.schema(), "fairq");
    /// ```
    pub fn from_pool(pool: Pool, options: PgOptions) -> Result<PgBackend, PgError> {
        PgBackend::build(pool, None, options)
    }

    /// A store on the caller's own pool, with `config` used for the LISTEN connection.
    ///
    /// ```
    /// use deadpool_postgres::{Manager, Pool};
    /// let config: tokio_postgres::Config = "host=127.0.0.1 user=postgres dbname=test".parse().unwrap();
    /// let pool = Pool::builder(Manager::new(config.clone(), tokio_postgres::NoTls)).build().unwrap();
    /// let store = fairq_postgres::PgBackend::from_pool_with_listener(pool, config, Default::default());
    /// assert!(store.is_ok());
    /// ```
    pub fn from_pool_with_listener(
        pool: Pool,
        config: tokio_postgres::Config,
        options: PgOptions,
    ) -> Result<PgBackend, PgError> {
        PgBackend::build(pool, Some(config), options)
    }

    fn build(
        pool: Pool,
        listen_config: Option<tokio_postgres::Config>,
        options: PgOptions,
    ) -> Result<PgBackend, PgError> {
        let schema = SchemaName::new(&options.schema)?;
        let core = Core {
            pool,
            sql: Arc::new(Sql::new(schema)),
            clock: options.clock.clone(),
            options,
            signals: Arc::new(Signals::default()),
        };
        Ok(PgBackend {
            inner: Arc::new(Inner {
                core: Arc::new(core),
                acker: Mutex::new(None),
                listen_config,
                listener: Mutex::new(None),
            }),
        })
    }

    /// Creates or upgrades the schema (idempotent; safe to run from many processes at once).
    /// Returns how many migrations were applied.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_postgres::PgBackend) -> Result<(), fairq_postgres::PgError> {
    /// let applied = store.migrate().await?;
    /// assert_eq!(store.migrate().await?, 0); // already current
    /// # let _ = applied; Ok(()) }
    /// ```
    pub async fn migrate(&self) -> Result<usize, PgError> {
        let schema = &self.inner.core.sql.schema;
        let mut client = self
            .inner
            .core
            .pool
            .get()
            .await
            .map_err(|e| PgError::from_pool(e, schema.as_str()))?;
        schema::migrate(&mut client, schema).await
    }

    /// The schema holding the store's tables.
    ///
    /// ```
    /// # let config: tokio_postgres::Config = "host=localhost".parse().unwrap();
    /// # let pool = deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(config, tokio_postgres::NoTls)).build().unwrap();
    /// let store = fairq_postgres::PgBackend::from_pool(pool, fairq_postgres::PgOptions::default().schema("jobs")).unwrap();
    /// assert_eq!(store.schema(), "jobs");
    /// ```
    pub fn schema(&self) -> &str {
        self.inner.core.sql.schema.as_str()
    }

    /// The connection pool (for the application's own queries, or to start a transaction
    /// that enqueues through [`producer`](Self::producer)).
    ///
    /// ```
    /// # let config: tokio_postgres::Config = "host=localhost".parse().unwrap();
    /// # let pool = deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(config, tokio_postgres::NoTls)).max_size(3).build().unwrap();
    /// let store = fairq_postgres::PgBackend::from_pool(pool, Default::default()).unwrap();
    /// assert_eq!(store.pool().status().max_size, 3);
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.inner.core.pool
    }

    /// The store's current time.
    ///
    /// ```
    /// # let config: tokio_postgres::Config = "host=localhost".parse().unwrap();
    /// # let pool = deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(config, tokio_postgres::NoTls)).build().unwrap();
    /// let options = fairq_postgres::PgOptions::default().clock(fairq_worker::ManualClock::new(9));
    /// assert_eq!(fairq_postgres::PgBackend::from_pool(pool, options).unwrap().now(), 9);
    /// ```
    pub fn now(&self) -> Millis {
        self.inner.core.clock.now()
    }

    /// A [`Producer`] for this store's schema and clock, to enqueue inside your own
    /// transactions.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_postgres::PgBackend) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut client = store.pool().get().await?;
    /// let tx = client.transaction().await?;
    /// store.producer().enqueue(&*tx, fairq_worker::NewJob::new("q", "kind", vec![])).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub fn producer(&self) -> Producer {
        Producer::from_parts(self.inner.core.sql.clone(), self.inner.core.clock.clone())
    }

    /// Enqueues one job on `client` (joining its transaction); shorthand for
    /// `self.producer().enqueue(client, job)`.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_postgres::PgBackend, tx: tokio_postgres::Transaction<'_>) -> Result<(), Box<dyn std::error::Error>> {
    /// store.enqueue_in(&tx, fairq_worker::NewJob::new("q", "kind", vec![])).await?;
    /// tx.commit().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_in<C: GenericClient + Sync>(
        &self,
        client: &C,
        job: NewJob,
    ) -> Result<JobId, BackendError> {
        self.producer().enqueue(client, job).await
    }

    /// Enqueues many jobs on `client` (joining its transaction).
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_postgres::PgBackend, tx: tokio_postgres::Transaction<'_>) -> Result<(), Box<dyn std::error::Error>> {
    /// let jobs = vec![fairq_worker::NewJob::new("q", "kind", vec![]); 3];
    /// assert_eq!(store.enqueue_many_in(&tx, jobs).await?.len(), 3);
    /// # Ok(()) }
    /// ```
    pub async fn enqueue_many_in<C: GenericClient + Sync>(
        &self,
        client: &C,
        jobs: Vec<NewJob>,
    ) -> Result<Vec<JobId>, BackendError> {
        self.producer().enqueue_many(client, jobs).await
    }

    /// Wakes every task waiting in [`Backend::wait_for_jobs`] on this store, so it looks
    /// again (after advancing a manual clock, for example).
    ///
    /// ```
    /// # let config: tokio_postgres::Config = "host=localhost".parse().unwrap();
    /// # let pool = deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(config, tokio_postgres::NoTls)).build().unwrap();
    /// fairq_postgres::PgBackend::from_pool(pool, Default::default()).unwrap().wake_all();
    /// ```
    pub fn wake_all(&self) {
        self.inner.core.signals.wake_all();
    }

    /// True while the LISTEN connection is up and notifications arrive.
    ///
    /// ```
    /// # let config: tokio_postgres::Config = "host=localhost".parse().unwrap();
    /// # let pool = deadpool_postgres::Pool::builder(deadpool_postgres::Manager::new(config, tokio_postgres::NoTls)).build().unwrap();
    /// let store = fairq_postgres::PgBackend::from_pool(pool, Default::default()).unwrap();
    /// assert!(!store.is_listening()); // no listener without a connection config
    /// ```
    pub fn is_listening(&self) -> bool {
        self.inner.core.signals.listening()
    }

    /// The query plan of a claim of up to `limit` jobs from `queue`, as `EXPLAIN (ANALYZE,
    /// BUFFERS)` prints it. The claim runs in a transaction that is rolled back, so nothing
    /// changes.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_postgres::PgBackend) -> Result<(), fairq_worker::BackendError> {
    /// println!("{}", store.explain_claim("mail", 10).await?);
    /// # Ok(()) }
    /// ```
    pub async fn explain_claim(&self, queue: &str, limit: usize) -> Result<String, BackendError> {
        let core = &self.inner.core;
        let schema = core.sql.schema.as_str();
        let mut client = core.client().await?;
        let tx = client.transaction().await.map_err(|e| db(e, schema))?;
        let now = core.now();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let text = format!(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {}",
            core.sql.claim_text()
        );
        let params: [&(dyn ToSql + Sync); 4] = [
            &queue,
            &limit,
            &to_db(now),
            &deadline(now, Duration::from_secs(30)),
        ];
        let rows = tx.query(&text, &params).await.map_err(|e| db(e, schema))?;
        tx.rollback().await.map_err(|e| db(e, schema))?;
        Ok(rows
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// Starts the LISTEN connection if it is not running (or died with its runtime).
    fn start_listener(&self) {
        let core = &self.inner.core;
        if !core.options.listen {
            return;
        }
        let Some(config) = self.inner.listen_config.clone() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut listener = self
            .inner
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if listener.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let task = runtime.spawn(listen::run(
            config,
            core.sql.channel.clone(),
            Arc::downgrade(&core.signals),
        ));
        *listener = Some(task);
    }

    /// Hands a completion to the batcher, starting it if needed.
    async fn complete_batched(&self, claim: Claim) -> Result<(), BackendError> {
        let (reply, answer) = oneshot::channel();
        let mut ack = Ack { claim, reply };
        for _ in 0..2 {
            let sender = {
                let mut slot = self
                    .inner
                    .acker
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                match slot.as_ref() {
                    Some(sender) if !sender.is_closed() => sender.clone(),
                    _ => {
                        let (tx, rx) = mpsc::unbounded_channel();
                        tokio::spawn(run_acker(self.inner.core.clone(), rx));
                        *slot = Some(tx.clone());
                        tx
                    }
                }
            };
            match sender.send(ack) {
                Ok(()) => {
                    return match answer.await {
                        Ok(result) => result,
                        // The batcher died with its runtime: complete directly.
                        Err(_) => self.inner.core.complete_one(claim).await,
                    };
                }
                Err(mpsc::error::SendError(back)) => ack = back,
            }
        }
        self.inner.core.complete_one(claim).await
    }
}

async fn check_version(
    client: &tokio_postgres::Client,
    schema: &SchemaName,
) -> Result<(), PgError> {
    match schema::version(client, schema).await? {
        0 => Err(PgError::SchemaMissing {
            schema: schema.as_str().to_string(),
        }),
        v if v > schema::SCHEMA_VERSION => Err(PgError::SchemaTooNew {
            schema: schema.as_str().to_string(),
            found: v,
            supported: schema::SCHEMA_VERSION,
        }),
        _ => Ok(()),
    }
}

/// Most completion batches written at once (on separate connections, so the server can
/// flush their commits together).
const ACK_FLIGHTS: usize = 4;

/// Writes completions that arrive together with one statement; while a batch is being
/// written, the next one starts on another connection (up to [`ACK_FLIGHTS`]).
async fn run_acker(core: Arc<Core>, mut rx: mpsc::UnboundedReceiver<Ack>) {
    let max = core.options.complete_batch;
    let flights = Arc::new(tokio::sync::Semaphore::new(ACK_FLIGHTS));
    while let Some(first) = rx.recv().await {
        let Ok(flight) = flights.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < max {
            match rx.try_recv() {
                Ok(ack) => batch.push(ack),
                Err(_) => break,
            }
        }
        let core = core.clone();
        tokio::spawn(async move {
            let claims: Vec<Claim> = batch.iter().map(|a| a.claim).collect();
            let results = core.complete_batch(&claims).await;
            for (ack, result) in batch.into_iter().zip(results) {
                let _ = ack.reply.send(result);
            }
            drop(flight);
        });
    }
}

impl Core {
    fn schema(&self) -> &str {
        self.sql.schema.as_str()
    }

    pub(crate) fn now(&self) -> Millis {
        self.clock.now()
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<Object, BackendError> {
        self.pool.get().await.map_err(|e| pool(e, self.schema()))
    }

    pub(crate) fn err(&self, e: tokio_postgres::Error) -> BackendError {
        db(e, self.schema())
    }

    /// Gives due jobs of `queue` their place in the fair order; wakes waiters when any.
    pub(crate) async fn promote(
        &self,
        conn: &dyn Exec,
        queue: &str,
        now: Millis,
    ) -> Result<u64, BackendError> {
        let lock = self.sql.promote_lock(queue);
        let params: [&(dyn ToSql + Sync); 5] = [
            &queue,
            &to_db(now),
            &self.options.promote_batch,
            &lock,
            &self.sql.channel,
        ];
        let rows = conn
            .rows(&self.sql.promote, &params)
            .await
            .map_err(|e| self.err(e))?;
        let promoted: i64 = rows.first().map(|r| r.get(0)).unwrap_or(0);
        if promoted > 0 {
            self.signals.wake(queue);
        }
        Ok(from_db(promoted))
    }

    /// Explains why a conditional write on `claim` did not apply.
    async fn diagnose(
        &self,
        conn: &dyn Exec,
        claim: Claim,
        op: Op,
        now: Millis,
    ) -> Result<Diagnosis, BackendError> {
        let Some((_, mut life)) = self.get_with(conn, claim.id).await? else {
            return Ok(Diagnosis::Error(BackendError::NotFound(claim.id)));
        };
        let result = match op {
            Op::Complete => life.complete(claim.token, now),
            Op::Heartbeat(lease) => life.heartbeat(claim.token, now, lease).map(drop),
            Op::Fail { permanent: true } => life.discard(claim.token, now),
            Op::Fail { permanent: false } => life
                .fail(claim.token, now, &RetryPolicy::new(0), 0)
                .map(drop),
        };
        Ok(match result {
            Err(source) => Diagnosis::Error(BackendError::Transition {
                id: claim.id,
                source,
            }),
            Ok(()) => Diagnosis::Retry,
        })
    }

    /// One job with its lifecycle, live or archived.
    pub(crate) async fn get_with(
        &self,
        conn: &dyn Exec,
        id: JobId,
    ) -> Result<Option<(JobInfo, Lifecycle)>, BackendError> {
        let rows = conn
            .rows(&self.sql.get, &[&to_db(id.0)])
            .await
            .map_err(|e| self.err(e))?;
        rows.first().map(rows::info).transpose()
    }

    /// Completes a batch, answering each claim; a failed statement is retried once on a
    /// fresh connection (the first may have committed, which the answer then reflects).
    async fn complete_batch(&self, claims: &[Claim]) -> Vec<Result<(), BackendError>> {
        match self.complete_batch_once(claims, false).await {
            Ok(results) => results,
            Err(first) if first.is_transient() => {
                match self.complete_batch_once(claims, true).await {
                    Ok(results) => results,
                    Err(e) => claims.iter().map(|_| Err(share(&e))).collect(),
                }
            }
            Err(e) => claims.iter().map(|_| Err(share(&e))).collect(),
        }
    }

    async fn complete_one(&self, claim: Claim) -> Result<(), BackendError> {
        self.complete_batch(&[claim])
            .await
            .pop()
            .unwrap_or_else(|| Err(corrupt("no answer for a completion")))
    }

    async fn complete_batch_once(
        &self,
        claims: &[Claim],
        after_lost_reply: bool,
    ) -> Result<Vec<Result<(), BackendError>>, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let now = self.now();
        let ids: Vec<i64> = claims.iter().map(|c| to_db(c.id.0)).collect();
        let tokens: Vec<i64> = claims.iter().map(|c| to_db(c.token.0)).collect();
        let rows = conn
            .rows(&self.sql.complete, &[&ids, &tokens, &to_db(now)])
            .await
            .map_err(|e| self.err(e))?;
        let mut done = BTreeSet::new();
        let mut parents = Vec::new();
        for row in &rows {
            let id: i64 = row.get(0);
            done.insert(id);
            if row.get::<_, bool>(1) {
                parents.push(id);
            }
        }
        if !parents.is_empty() {
            self.release(conn, &parents, now).await?;
        }
        let mut answered = BTreeSet::new();
        let mut results = Vec::with_capacity(claims.len());
        for claim in claims {
            let id = to_db(claim.id.0);
            if done.contains(&id) && answered.insert(id) {
                results.push(Ok(()));
                continue;
            }
            results.push(self.explain_complete(conn, *claim, after_lost_reply).await);
        }
        Ok(results)
    }

    /// The answer for a claim the batch did not complete.
    async fn explain_complete(
        &self,
        conn: &dyn Exec,
        claim: Claim,
        after_lost_reply: bool,
    ) -> Result<(), BackendError> {
        for _ in 0..3 {
            let now = self.now();
            if after_lost_reply {
                // Our first statement may have committed before its reply was lost.
                if let Some((_, life)) = self.get_with(conn, claim.id).await? {
                    if matches!(life.state(), State::Succeeded { .. })
                        && life.last_token() == claim.token.0
                    {
                        return Ok(());
                    }
                }
            }
            match self.diagnose(conn, claim, Op::Complete, now).await? {
                Diagnosis::Error(e) => return Err(e),
                Diagnosis::Retry => {
                    let rows = conn
                        .rows(
                            &self.sql.complete,
                            &[
                                &vec![to_db(claim.id.0)],
                                &vec![to_db(claim.token.0)],
                                &to_db(now),
                            ],
                        )
                        .await
                        .map_err(|e| self.err(e))?;
                    if let Some(row) = rows.first() {
                        if row.get::<_, bool>(1) {
                            self.release(conn, &[row.get(0)], now).await?;
                        }
                        return Ok(());
                    }
                }
            }
        }
        Err(BackendError::Unavailable(
            "the job kept changing while completing it; retry".into(),
        ))
    }

    /// Releases the jobs blocked on `parents` and gives them a place in the fair order.
    async fn release(
        &self,
        conn: &dyn Exec,
        parents: &[i64],
        now: Millis,
    ) -> Result<(), BackendError> {
        // Jobs whose time came before this release go first, as in the reference store: give
        // them their rounds before the released dependents join.
        let waiting = conn
            .rows(&self.sql.release_queues, &[&parents])
            .await
            .map_err(|e| self.err(e))?;
        for row in &waiting {
            let queue: String = row.get(0);
            self.promote(conn, &queue, now).await?;
        }
        let rows = conn
            .rows(&self.sql.release, &[&parents, &to_db(now)])
            .await
            .map_err(|e| self.err(e))?;
        let queues: BTreeSet<String> = rows.iter().map(|r| r.get(0)).collect();
        for queue in queues {
            self.promote(conn, &queue, now).await?;
        }
        Ok(())
    }

    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let client = self.client().await?;
        let now = self.now();
        let limit = i64::try_from(max).unwrap_or(i64::MAX);
        let lock = self.sql.promote_lock(queue);
        let promote_params: [&(dyn ToSql + Sync); 5] = [
            &queue,
            &to_db(now),
            &self.options.promote_batch,
            &lock,
            &self.sql.channel,
        ];
        let deadline = deadline(now, lease);
        let claim_params: [&(dyn ToSql + Sync); 4] = [&queue, &limit, &to_db(now), &deadline];
        // Pipelined on one connection: both statements are prepared first, so the promotion
        // is sent (and commits) before the claim runs.
        let promote = client
            .prepare_cached(&self.sql.promote)
            .await
            .map_err(|e| self.err(e))?;
        let claim = client
            .prepare_cached(&self.sql.claim)
            .await
            .map_err(|e| self.err(e))?;
        let (promoted, claimed) = tokio::join!(
            tokio_postgres::Client::query(&client, &promote, &promote_params),
            tokio_postgres::Client::query(&client, &claim, &claim_params)
        );
        let promoted = promoted.map_err(|e| self.err(e))?;
        let claimed = claimed.map_err(|e| self.err(e))?;
        let jobs = claimed
            .iter()
            .map(|row| rows::job(row, queue))
            .collect::<Result<Vec<_>, _>>()?;
        if promoted.first().is_some_and(|r| r.get::<_, i64>(0) > 0) && jobs.len() == max {
            // More became ready than this claim took: let other idle workers know.
            self.signals.wake(queue);
        }
        Ok(jobs)
    }

    async fn fail(&self, claim: Claim, failure: Failure) -> Result<Outcome, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        for _ in 0..3 {
            let now = self.now();
            let rows = conn
                .rows(&self.sql.running, &[&to_db(claim.id.0)])
                .await
                .map_err(|e| self.err(e))?;
            let op = Op::Fail {
                permanent: failure.permanent,
            };
            let Some(row) = rows.first() else {
                match self.diagnose(conn, claim, op, now).await? {
                    Diagnosis::Error(e) => return Err(e),
                    Diagnosis::Retry => continue,
                }
            };
            let queue: String = row.get(0);
            let state: String = row.get(1);
            if state != "running" {
                match self.diagnose(conn, claim, op, now).await? {
                    Diagnosis::Error(e) => return Err(e),
                    Diagnosis::Retry => continue,
                }
            }
            let attempts: i64 = row.get(2);
            let token: i64 = row.get(3);
            let lease_deadline: Option<i64> = row.get(4);
            let claimed_at: Option<i64> = row.get(5);
            let policy = policy_from_db(row.get(6))?;
            let attempt = u32::try_from(attempts.max(0)).unwrap_or(u32::MAX);
            let mut life = Lifecycle::restore(
                State::Running {
                    lease: Lease {
                        token: fairq_core::job::LeaseToken(from_db(token)),
                        deadline: from_db(lease_deadline.unwrap_or(0)),
                        attempt,
                    },
                },
                attempt,
                from_db(token),
            );
            let (outcome, reason) = if failure.permanent {
                life.discard(claim.token, now)
                    .map_err(|source| BackendError::Transition {
                        id: claim.id,
                        source,
                    })?;
                (Outcome::Dead, fairq_core::job::DeadReason::Discarded)
            } else {
                let outcome =
                    life.fail(claim.token, now, &policy, random_u64())
                        .map_err(|source| BackendError::Transition {
                            id: claim.id,
                            source,
                        })?;
                (outcome, fairq_core::job::DeadReason::RetriesExhausted)
            };
            let elapsed = to_db(now.saturating_sub(from_db(claimed_at.unwrap_or(0))));
            let applied = match outcome {
                Outcome::Retry { run_at } => {
                    if run_at <= now {
                        // Jobs whose time came before this failure go first, as in the
                        // reference store: give them their rounds before this job joins.
                        self.promote(conn, &queue, now).await?;
                    }
                    let n = self
                        .retry_many(
                            conn,
                            &[(claim, run_at)],
                            Some(elapsed),
                            &failure.message,
                            now,
                        )
                        .await?;
                    if n > 0 && run_at <= now {
                        self.promote(conn, &queue, now).await?;
                    }
                    n
                }
                Outcome::Dead => {
                    self.bury_many(
                        conn,
                        &[(claim, reason)],
                        Some(elapsed),
                        &failure.message,
                        now,
                    )
                    .await?
                }
            };
            if applied > 0 {
                return Ok(outcome);
            }
        }
        Err(BackendError::Unavailable(
            "the job kept changing while recording its failure; retry".into(),
        ))
    }

    async fn retry_many(
        &self,
        conn: &dyn Exec,
        jobs: &[(Claim, Millis)],
        elapsed: Option<i64>,
        message: &str,
        now: Millis,
    ) -> Result<u64, BackendError> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let ids: Vec<i64> = jobs.iter().map(|(c, _)| to_db(c.id.0)).collect();
        let tokens: Vec<i64> = jobs.iter().map(|(c, _)| to_db(c.token.0)).collect();
        let run_at: Vec<i64> = jobs.iter().map(|(_, at)| to_db(*at)).collect();
        let elapsed: Vec<Option<i64>> = jobs.iter().map(|_| elapsed).collect();
        let messages: Vec<&str> = jobs.iter().map(|_| message).collect();
        let rows = conn
            .rows(
                &self.sql.retry_many,
                &[&ids, &tokens, &run_at, &elapsed, &messages, &to_db(now)],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(rows.len() as u64)
    }

    async fn bury_many(
        &self,
        conn: &dyn Exec,
        jobs: &[(Claim, fairq_core::job::DeadReason)],
        elapsed: Option<i64>,
        message: &str,
        now: Millis,
    ) -> Result<u64, BackendError> {
        if jobs.is_empty() {
            return Ok(0);
        }
        let ids: Vec<i64> = jobs.iter().map(|(c, _)| to_db(c.id.0)).collect();
        let tokens: Vec<i64> = jobs.iter().map(|(c, _)| to_db(c.token.0)).collect();
        let reasons: Vec<&str> = jobs.iter().map(|(_, r)| reason_name(*r)).collect();
        let elapsed: Vec<Option<i64>> = jobs.iter().map(|_| elapsed).collect();
        let messages: Vec<&str> = jobs.iter().map(|_| message).collect();
        let rows = conn
            .rows(
                &self.sql.bury_many,
                &[&ids, &tokens, &reasons, &elapsed, &messages, &to_db(now)],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(rows.len() as u64)
    }

    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        for _ in 0..3 {
            let now = self.now();
            let rows = conn
                .rows(
                    &self.sql.heartbeat,
                    &[
                        &to_db(claim.id.0),
                        &to_db(claim.token.0),
                        &deadline(now, lease),
                    ],
                )
                .await
                .map_err(|e| self.err(e))?;
            if let Some(row) = rows.first() {
                return Ok(from_db(row.get::<_, Option<i64>>(0).unwrap_or(0)));
            }
            match self
                .diagnose(conn, claim, Op::Heartbeat(lease), now)
                .await?
            {
                Diagnosis::Error(e) => return Err(e),
                Diagnosis::Retry => continue,
            }
        }
        Err(BackendError::Unavailable(
            "the job kept changing while extending its lease; retry".into(),
        ))
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let now = self.now();
        let mut rescued = 0;
        let mut due_now = false;
        loop {
            let rows = conn
                .rows(
                    &self.sql.expired,
                    &[&queue, &to_db(now), &self.options.rescue_batch],
                )
                .await
                .map_err(|e| self.err(e))?;
            let mut retries = Vec::new();
            let mut deaths = Vec::new();
            for row in &rows {
                let id = JobId(from_db(row.get(0)));
                let attempts: i64 = row.get(1);
                let token = from_db(row.get(2));
                let lease_deadline: Option<i64> = row.get(3);
                let policy = policy_from_db(row.get(4))?;
                let attempt = u32::try_from(attempts.max(0)).unwrap_or(u32::MAX);
                let lease_token = fairq_core::job::LeaseToken(token);
                let mut life = Lifecycle::restore(
                    State::Running {
                        lease: Lease {
                            token: lease_token,
                            deadline: from_db(lease_deadline.unwrap_or(0)),
                            attempt,
                        },
                    },
                    attempt,
                    token,
                );
                let claim = Claim {
                    id,
                    token: lease_token,
                };
                match life.rescue(now, &policy, random_u64()) {
                    Ok(Outcome::Retry { run_at }) => {
                        due_now |= run_at <= now;
                        retries.push((claim, run_at));
                    }
                    Ok(Outcome::Dead) => {
                        deaths.push((claim, fairq_core::job::DeadReason::LeaseExpired))
                    }
                    Err(_) => {}
                }
            }
            if retries.iter().any(|(_, run_at)| *run_at <= now) {
                // Jobs whose time came before this rescue go first (reference order).
                self.promote(conn, queue, now).await?;
            }
            rescued += self
                .retry_many(conn, &retries, None, LEASE_EXPIRED, now)
                .await?;
            rescued += self
                .bury_many(conn, &deaths, None, LEASE_EXPIRED, now)
                .await?;
            if (rows.len() as i64) < self.options.rescue_batch {
                break;
            }
        }
        conn.rows(&self.sql.trim_rounds, &[&queue])
            .await
            .map_err(|e| self.err(e))?;
        let released = conn
            .rows(&self.sql.release_stragglers, &[&queue, &to_db(now)])
            .await
            .map_err(|e| self.err(e))?;
        if due_now || !released.is_empty() {
            self.promote(conn, queue, now).await?;
        }
        Ok(rescued)
    }

    /// `Ok(None)`: a job is ready now; `Ok(Some(at))`: the next one is due at `at`;
    /// `Ok(Some(u64::MAX))`: nothing is waiting.
    async fn next_due(&self, queue: &str) -> Result<Option<Millis>, BackendError> {
        let client = self.client().await?;
        let conn: &dyn Exec = &*client;
        let rows = conn
            .rows(&self.sql.due, &[&queue])
            .await
            .map_err(|e| self.err(e))?;
        let Some(row) = rows.first() else {
            return Ok(Some(u64::MAX));
        };
        if row.get::<_, bool>(0) {
            return Ok(None);
        }
        Ok(Some(row.get::<_, Option<i64>>(1).map_or(u64::MAX, from_db)))
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        for job in &jobs {
            crate::enqueue::validate(job)?;
        }
        let now = self.now();
        let mut client = self.client().await?;
        // Jobs that came due earlier take their place in the fair order before these.
        let ready_queues: BTreeSet<String> = jobs
            .iter()
            // A job with a dependency may be ready too (its dependency may have succeeded).
            .filter(|j| j.schedule.run_at(now) <= now)
            .map(|j| j.queue.clone())
            .collect();
        let woken = ready_queues.clone();
        let needs_tx = jobs.iter().any(|j| {
            j.depends_on.is_some() || (j.unique_key.is_some() && j.on_conflict == OnConflict::Error)
        });
        for queue in &ready_queues {
            self.promote(&*client, queue, now).await?;
        }
        let ids = if needs_tx {
            let tx = client.transaction().await.map_err(|e| self.err(e))?;
            let ids = enqueue_batch(&tx, &self.sql, jobs, now).await?;
            tx.commit().await.map_err(|e| self.err(e))?;
            ids
        } else {
            enqueue_batch(&*client, &self.sql, jobs, now).await?
        };
        for queue in woken {
            self.signals.wake(&queue);
        }
        Ok(ids)
    }
}

/// A copy of an error for every claim of a failed batch.
fn share(err: &BackendError) -> BackendError {
    match err {
        BackendError::Unavailable(e) => BackendError::Unavailable(e.to_string().into()),
        other => BackendError::Store(other.to_string().into()),
    }
}

impl Backend for PgBackend {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        self.inner
            .core
            .enqueue_many(vec![job])
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| corrupt("the insert returned no id"))
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        self.inner.core.enqueue_many(jobs).await
    }

    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        match self.inner.core.claim(queue, max, lease).await {
            // A pooled connection that died since its last use: one more try on a fresh one
            // (a claim whose reply was lost is recovered by lease expiry).
            Err(e) if e.is_transient() => self.inner.core.claim(queue, max, lease).await,
            other => other,
        }
    }

    async fn complete(&self, claim: Claim) -> Result<(), BackendError> {
        self.complete_batched(claim).await
    }

    async fn fail(&self, claim: Claim, failure: Failure) -> Result<Outcome, BackendError> {
        self.inner.core.fail(claim, failure).await
    }

    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        match self.inner.core.heartbeat(claim, lease).await {
            Err(e) if e.is_transient() => self.inner.core.heartbeat(claim, lease).await,
            other => other,
        }
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        self.inner.core.rescue(queue).await
    }

    async fn wait_for_jobs(&self, queue: &str, timeout: Duration) {
        self.start_listener();
        let core = &self.inner.core;
        let notify = core.signals.of(queue);
        let notified = notify.notified();
        tokio::pin!(notified);
        // Register before looking, so a wake-up in between is not missed.
        notified.as_mut().enable();
        let mut wait = timeout;
        if !core.signals.listening() {
            wait = wait.min(core.options.poll_interval);
        }
        match core.next_due(queue).await {
            Ok(None) => return,
            Ok(Some(at)) => {
                let now = core.now();
                if at <= now {
                    return;
                }
                if at != u64::MAX {
                    wait = wait.min(Duration::from_millis(at - now));
                }
            }
            Err(_) => wait = wait.min(core.options.poll_interval),
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        self.inner.core.stats().await
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        self.inner.core.list(filter).await
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        let client = self.inner.core.client().await?;
        Ok(self
            .inner
            .core
            .get_with(&*client, id)
            .await?
            .map(|(info, _)| info))
    }

    async fn retry(&self, target: RetryTarget) -> Result<u64, BackendError> {
        self.inner.core.retry(target).await
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        self.inner.core.purge(purge).await
    }

    async fn prune(&self, older_than: Duration) -> Result<u64, BackendError> {
        self.inner.core.prune(older_than).await
    }
}
