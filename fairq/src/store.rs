//! [`Store`]: one type for whichever store a URL names, and [`connect`] to open it.

use std::fmt;
use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::metrics::EnqueueTally;
use fairq_worker::{
    Backend, BackendError, Claim, Each, Finished, Job, JobId, JobInfo, ListFilter, LiveCounts,
    MemoryBackend, NewJob, Purge, QueueStats, ReviveTarget, Settled, SettledAndClaimed,
};

use crate::error::ConnectError;
use crate::url::StoreUrl;

/// Settings that apply when a store is opened by URL. Each applies to the stores it names
/// and is ignored by the others.
///
/// ```
/// use std::time::Duration;
/// let options = fairq::ConnectOptions::default()
///     .pool_size(8)
///     .connect_timeout(Duration::from_secs(2))
///     .create(false);
/// assert_eq!((options.pool_size, options.migrate, options.create), (8, true, false));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectOptions {
    /// PostgreSQL: connections in the pool (default 16), at least 1 and at most
    /// [`MAX_POOL_SIZE`](Self::MAX_POOL_SIZE) (a size out of that range is taken as the
    /// nearest bound).
    pub pool_size: usize,
    /// PostgreSQL and Redis: how long each attempt to connect waits for the server
    /// (default 5 s). A Redis store tries again after a failed first attempt (its
    /// connection manager's reconnections, up to a second apart), so a server that accepts
    /// connections and never answers (a `redis://` URL aimed at a TLS port) fails the
    /// connect after several times this: about 30 s at the default.
    pub connect_timeout: Duration,
    /// PostgreSQL: create or upgrade the schema on connect (default on). Off, a missing
    /// schema is an error that says to migrate.
    pub migrate: bool,
    /// File: create the folder and a new store in it when there is none (default on). Off,
    /// a folder without a store is [`ConnectError::NoStore`], so a mistyped path is an
    /// error instead of a new, empty store.
    pub create: bool,
    /// File: open the store for looking only ([`FileBackend::open_read_only`](crate::file::FileBackend::open_read_only)):
    /// nothing in the folder is created or changed, so a store on a full disk or a
    /// read-only mount can be inspected, and every change is refused (default off). The
    /// server stores ignore it.
    pub read_only: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            migrate: true,
            create: true,
            read_only: false,
        }
    }
}

impl ConnectOptions {
    /// The largest [`pool_size`](Self::pool_size): far more connections than a PostgreSQL
    /// server accepts by default (100), and a pool whose bookkeeping stays small (the pool
    /// reserves room for every connection up front, so `usize::MAX` could not be built).
    pub const MAX_POOL_SIZE: usize = 1024;

    /// Sets [`pool_size`](Self::pool_size): at least 1 and at most
    /// [`MAX_POOL_SIZE`](Self::MAX_POOL_SIZE).
    ///
    /// ```
    /// use fairq::ConnectOptions;
    /// assert_eq!(ConnectOptions::default().pool_size(0).pool_size, 1);
    /// assert_eq!(
    ///     ConnectOptions::default().pool_size(usize::MAX).pool_size,
    ///     ConnectOptions::MAX_POOL_SIZE
    /// );
    /// ```
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.clamp(1, Self::MAX_POOL_SIZE);
        self
    }

    /// Sets [`connect_timeout`](Self::connect_timeout).
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = fairq::ConnectOptions::default().connect_timeout(Duration::from_secs(1));
    /// assert_eq!(o.connect_timeout, Duration::from_secs(1));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets [`migrate`](Self::migrate).
    ///
    /// ```
    /// assert!(!fairq::ConnectOptions::default().migrate(false).migrate);
    /// ```
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }

    /// Sets [`create`](Self::create).
    ///
    /// ```
    /// assert!(!fairq::ConnectOptions::default().create(false).create);
    /// ```
    pub fn create(mut self, create: bool) -> Self {
        self.create = create;
        self
    }

    /// Sets [`read_only`](Self::read_only).
    ///
    /// ```
    /// assert!(fairq::ConnectOptions::default().read_only(true).read_only);
    /// ```
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }
}

/// Opens the store `url` names with the default [`ConnectOptions`].
///
/// The URL is `file:PATH`, `postgres://...` (or `postgresql://`, `?schema=NAME`),
/// `redis://...` (or `rediss://`, `?prefix=NAME`) or `memory:` (see [`StoreUrl`]). The
/// returned [`Store`] implements [`Backend`], so the same application code runs on any of
/// them, and configuration alone picks one.
///
/// ```
/// use fairq::{Backend, NewJob};
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let url = format!("file:{}", dir.path().join("jobs").display());
/// let store = fairq::connect(&url).await?;
/// let id = store.enqueue(NewJob::json("mail", "welcome", &"ada@example.com")?).await?;
/// assert!(store.get(id).await?.is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub async fn connect(url: &str) -> Result<Store, ConnectError> {
    connect_with(url, &ConnectOptions::default()).await
}

/// Opens the store `url` names, with `options`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let missing = format!("file:{}", dir.path().join("typo").display());
/// let options = fairq::ConnectOptions::default().create(false);
/// let err = fairq::connect_with(&missing, &options).await.unwrap_err();
/// assert!(matches!(err, fairq::ConnectError::NoStore { .. }));
/// assert!(!dir.path().join("typo").exists());
/// # });
/// ```
pub async fn connect_with(url: &str, options: &ConnectOptions) -> Result<Store, ConnectError> {
    Store::open(&url.parse()?, options).await
}

/// A store of any kind, chosen at run time; implements [`Backend`] by handing each call to
/// the store inside. Clones share the store.
///
/// With the `metrics` feature, the jobs it accepts are counted in
/// `fairq_jobs_enqueued_total{queue, kind}` (see [`metrics`](crate::metrics)), so an
/// application that opens its store with [`connect`] needs no [`Metered`](crate::Metered)
/// wrapper (one around a `Store` would count every job twice). It counts as `Metered` does:
/// every job of a call the store answered with `Ok`, including a unique key under
/// `OnConflict::Ignore` answered with the existing job's id (nothing enqueued), and nothing
/// of a call answered with an error.
///
/// Match on it to reach a store's own API (a PostgreSQL producer inside your transaction,
/// say); the variants present depend on the crate's features.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use fairq::{Backend, NewJob, Store};
/// let store = fairq::connect("memory:").await.unwrap();
/// assert!(matches!(store, Store::Memory(_)));
/// assert_eq!(store.kind(), "memory");
/// store.enqueue(NewJob::new("q", "k", b"1".to_vec())).await.unwrap();
/// assert_eq!(store.stats().await.unwrap()[0].counts.scheduled, 1);
/// # });
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum Store {
    /// The file store in a folder.
    #[cfg(feature = "file")]
    File(fairq_file::FileBackend),
    /// In this process.
    Memory(MemoryBackend),
    /// PostgreSQL.
    #[cfg(feature = "postgres")]
    Postgres(fairq_postgres::PgBackend),
    /// Redis.
    #[cfg(feature = "redis")]
    Redis(fairq_redis::RedisBackend),
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            #[cfg(feature = "file")]
            Store::File(s) => f.debug_tuple("File").field(s).finish(),
            Store::Memory(_) => f.write_str("Memory"),
            #[cfg(feature = "postgres")]
            Store::Postgres(s) => f.debug_tuple("Postgres").field(s).finish(),
            #[cfg(feature = "redis")]
            Store::Redis(s) => f.debug_tuple("Redis").field(s).finish(),
        }
    }
}

impl Store {
    /// Opens (or connects to) the store `url` names.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq::{ConnectOptions, Store, StoreUrl};
    /// let store = Store::open(&StoreUrl::Memory, &ConnectOptions::default()).await.unwrap();
    /// assert!(store.is_ephemeral());
    /// # });
    /// ```
    pub async fn open(url: &StoreUrl, options: &ConnectOptions) -> Result<Store, ConnectError> {
        // Without any server store compiled in, only the file store reads the options.
        let _ = options;
        let opened: Result<Store, BackendError> = match url {
            StoreUrl::Memory => Ok(Store::Memory(MemoryBackend::new())),
            StoreUrl::File {
                path,
                keep_succeeded,
            } => {
                #[cfg(feature = "file")]
                {
                    if !options.create || options.read_only {
                        crate::file::check_store(path)?;
                    }
                    let mut file_options = fairq_file::FileOptions::default();
                    if let Some(keep) = keep_succeeded {
                        file_options = file_options.keep_succeeded(*keep);
                    }
                    let opened = if options.read_only {
                        crate::file::open_read_only(path, file_options).await
                    } else {
                        crate::file::open(path, file_options).await
                    };
                    opened.map(Store::File).map_err(|e| match e {
                        ConnectError::Open { source, .. } => source,
                        other => other.into(),
                    })
                }
                #[cfg(not(feature = "file"))]
                {
                    let _ = (path, keep_succeeded);
                    return Err(not_compiled(url, "file"));
                }
            }
            StoreUrl::Postgres {
                url: conn,
                schema,
                keep_succeeded,
            } => {
                #[cfg(feature = "postgres")]
                {
                    let mut pg = fairq_postgres::PgOptions::default()
                        .migrate(options.migrate)
                        // The field is public: clamp it here too.
                        .pool_size(options.pool_size.clamp(1, ConnectOptions::MAX_POOL_SIZE))
                        .connect_timeout(options.connect_timeout);
                    if let Some(schema) = schema {
                        pg = pg.schema(schema.clone());
                    }
                    if let Some(keep) = keep_succeeded {
                        pg = pg.keep_succeeded(*keep);
                    }
                    fairq_postgres::PgBackend::connect(conn, pg)
                        .await
                        .map(Store::Postgres)
                        .map_err(BackendError::from)
                }
                #[cfg(not(feature = "postgres"))]
                {
                    let _ = (conn, schema, keep_succeeded);
                    return Err(not_compiled(url, "postgres"));
                }
            }
            StoreUrl::Redis {
                url: conn,
                prefix,
                keep_succeeded,
            } => {
                #[cfg(feature = "redis")]
                {
                    let mut redis =
                        fairq_redis::RedisOptions::new().connect_timeout(options.connect_timeout);
                    if let Some(prefix) = prefix {
                        redis = redis.prefix(prefix.clone());
                    }
                    if let Some(keep) = keep_succeeded {
                        redis = redis.keep_succeeded(*keep);
                    }
                    fairq_redis::RedisBackend::connect(conn, redis)
                        .await
                        .map(Store::Redis)
                }
                #[cfg(not(feature = "redis"))]
                {
                    let _ = (conn, prefix, keep_succeeded);
                    return Err(not_compiled(url, "redis"));
                }
            }
        };
        let given = match url {
            StoreUrl::Postgres { url, .. } | StoreUrl::Redis { url, .. } => url.as_str(),
            StoreUrl::File { .. } | StoreUrl::Memory => "",
        };
        opened.map_err(|source| ConnectError::open(url.to_string(), given, source))
    }

    /// Which store this is: `file`, `memory`, `postgres` or `redis`.
    ///
    /// ```
    /// let store = fairq::Store::Memory(fairq::MemoryBackend::new());
    /// assert_eq!(store.kind(), "memory");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            #[cfg(feature = "file")]
            Store::File(_) => "file",
            Store::Memory(_) => "memory",
            #[cfg(feature = "postgres")]
            Store::Postgres(_) => "postgres",
            #[cfg(feature = "redis")]
            Store::Redis(_) => "redis",
        }
    }

    /// True for a store that lives only as long as this process.
    ///
    /// ```
    /// assert!(fairq::Store::Memory(fairq::MemoryBackend::new()).is_ephemeral());
    /// ```
    pub fn is_ephemeral(&self) -> bool {
        matches!(self, Store::Memory(_))
    }
}

#[allow(dead_code)]
fn not_compiled(url: &StoreUrl, feature: &'static str) -> ConnectError {
    ConnectError::NotCompiled {
        url: url.to_string(),
        feature,
    }
}

/// Calls the same method on whichever store is inside.
macro_rules! each {
    ($self:expr, $store:ident => $call:expr) => {
        match $self {
            #[cfg(feature = "file")]
            Store::File($store) => $call.await,
            Store::Memory($store) => $call.await,
            #[cfg(feature = "postgres")]
            Store::Postgres($store) => $call.await,
            #[cfg(feature = "redis")]
            Store::Redis($store) => $call.await,
        }
    };
}

impl Backend for Store {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        let tally = EnqueueTally::of(std::slice::from_ref(&job));
        let id = each!(self, s => s.enqueue(job))?;
        tally.record();
        Ok(id)
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        let tally = EnqueueTally::of(&jobs);
        let ids = each!(self, s => s.enqueue_many(jobs))?;
        tally.record();
        Ok(ids)
    }

    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        each!(self, s => s.claim(queue, max, lease))
    }

    async fn settle(&self, batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        each!(self, s => s.settle(batch))
    }

    async fn release(&self, claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        each!(self, s => s.release(claims))
    }

    async fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> Result<Each<Millis>, BackendError> {
        each!(self, s => s.heartbeat_many(claims, lease))
    }

    async fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<SettledAndClaimed, BackendError> {
        each!(self, s => s.settle_and_claim(batch, queue, max, lease))
    }

    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        each!(self, s => s.heartbeat(claim, lease))
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        each!(self, s => s.rescue(queue))
    }

    async fn hold_retries(&self, queue: &str, until: Millis) -> Result<u64, BackendError> {
        each!(self, s => s.hold_retries(queue, until))
    }

    async fn warm_up(&self, calls: usize) -> Result<(), BackendError> {
        each!(self, s => s.warm_up(calls))
    }

    async fn wait_for_jobs(&self, queue: &str, timeout: Duration) {
        each!(self, s => s.wait_for_jobs(queue, timeout))
    }

    fn claims_cost_mostly_fixed(&self) -> bool {
        match self {
            #[cfg(feature = "file")]
            Store::File(s) => s.claims_cost_mostly_fixed(),
            Store::Memory(s) => s.claims_cost_mostly_fixed(),
            #[cfg(feature = "postgres")]
            Store::Postgres(s) => s.claims_cost_mostly_fixed(),
            #[cfg(feature = "redis")]
            Store::Redis(s) => s.claims_cost_mostly_fixed(),
        }
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        each!(self, s => s.stats())
    }

    async fn live_counts(&self, queue: &str) -> Result<LiveCounts, BackendError> {
        each!(self, s => s.live_counts(queue))
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        each!(self, s => s.list(filter))
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        each!(self, s => s.get(id))
    }

    async fn revive(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        each!(self, s => s.revive(target))
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        each!(self, s => s.purge(purge))
    }

    async fn prune(&self, retention: fairq_worker::Retention) -> Result<u64, BackendError> {
        each!(self, s => s.prune(retention))
    }

    async fn remove_queue(&self, queue: &str) -> Result<u64, BackendError> {
        each!(self, s => s.remove_queue(queue))
    }
}
