//! [`PgBackend`]: the connection pool, the listener, and what every operation shares.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use fairq_core::job::Millis;
use fairq_worker::{BackendError, JobId, NewJob};
use tokio::task::JoinHandle;
use tokio_postgres::types::ToSql;
use tokio_postgres::GenericClient;

use crate::core::Core;
use crate::enqueue::Producer;
use crate::error::{db, PgError};
use crate::listen::{self, Channels, Signals};
use crate::options::PgOptions;
use crate::probe;
use crate::rows::{deadline, to_db};
use crate::schema::{self, SchemaName};
use crate::self_settled::SelfSettled;
use crate::settler::Settler;
use crate::sql::Sql;
use crate::tls::{self, Tls};
use crate::wait::Idle;

/// A job store on PostgreSQL. Clones share the pool, the listener and the batcher.
///
/// * **Enqueue** inserts in batches (one `UNNEST` statement per call), and
///   [`producer`](Self::producer) enqueues inside the caller's own transaction.
/// * **Claims** take the first ready jobs in fair order with `FOR UPDATE SKIP LOCKED`,
///   driven by one index (see the [crate docs](crate) for the SQL and why it is fair).
/// * **Settlement** of many finished attempts (successes and failures mixed) is one statement
///   that fences each entry on its own lease token, moves finished jobs to the archive and
///   sends failed ones to retry by core's verdict; [`Backend::settle_and_claim`](fairq_worker::Backend::settle_and_claim) also claims
///   the next jobs in the same transaction.
/// * **Wake-ups** come by LISTEN/NOTIFY on a dedicated connection, with polling as the
///   fallback.
///
/// Time comes from the configured [`Clock`](fairq_worker::Clock), never from the server.
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
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBackend")
            .field("schema", &self.schema())
            .field("pool", &self.inner.core.pool.status())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    pub(crate) core: Arc<Core>,
    pub(crate) settler: Settler,
    /// Whether a queue's ready jobs were claimable when last looked for (see `wait`).
    pub(crate) idle: Idle,
    listen_config: Option<(tokio_postgres::Config, Tls)>,
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

impl PgBackend {
    /// Connects to `url` (`postgres://user@host:port/db` or `host=... dbname=...`), builds a
    /// pool and starts the listener. With [`PgOptions::migrate`] on, the schema is created
    /// or upgraded; otherwise a missing schema is an error that says to migrate.
    ///
    /// TLS follows libpq's `sslmode`, `sslrootcert`, `sslcert` and `sslkey` parameters in
    /// `url`, or [`PgOptions::ssl_mode`], [`PgOptions::ssl_root_cert`] and
    /// [`PgOptions::ssl_client_cert`] when the URL has none (see the [crate docs](crate#tls));
    /// the LISTEN connection uses the same settings.
    ///
    /// Errors: [`PgError::BadUrl`], [`PgError::Unavailable`] (server down or refusing),
    /// [`PgError::SchemaMissing`], [`PgError::SchemaTooNew`], [`PgError::Tls`] (settings),
    /// [`PgError::TlsUnsupported`], [`PgError::TlsHandshake`] (certificate refused),
    /// [`PgError::Auth`] (login refused, for example without a client certificate the
    /// server requires),
    /// [`PgError::NotPostgres`] (the address is another service's, such as Redis').
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
        let (conn, url_tls) = tls::split(url)?;
        let mut config: tokio_postgres::Config = conn.parse().map_err(PgError::BadUrl)?;
        let mode = url_tls.mode.or(options.ssl_mode).unwrap_or_default();
        let client = url_tls
            .client_cert()?
            .or_else(|| options.ssl_client.clone());
        let roots = url_tls.roots.or_else(|| options.ssl_roots.clone());
        let tls = Tls::new(mode, roots.as_ref(), client.as_ref())?;
        tls.apply(&mut config);
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("fairq");
        }
        let manager = Manager::from_config(
            config.clone(),
            tls.connector.clone(),
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
        let connect_timeout = options.connect_timeout;
        let probe_config = config.clone();
        let backend = PgBackend::build(pool, Some((config, tls)), options)?;
        let config = probe_config;
        let schema = backend.inner.core.sql.schema.clone();
        // A first connection that is slow may be to a service that is not PostgreSQL and
        // will never answer: ask the address (see `probe`) while the attempt goes on.
        let pool = backend.inner.core.pool.clone();
        let first = pool.get();
        let probe = async {
            tokio::time::sleep(probe::PROBE_AFTER).await;
            probe::not_postgres(&config, connect_timeout).await
        };
        tokio::pin!(first, probe);
        let mut client = tokio::select! {
            got = &mut first => got.map_err(|e| PgError::from_pool(e, schema.as_str()))?,
            Some(wrong) = &mut probe => return Err(wrong),
        };
        if migrate {
            schema::migrate(&mut client, &schema).await?;
        } else {
            check_version(&client, &schema).await?;
        }
        drop(client);
        backend.start_listener();
        backend.warn_about_vacuum().await;
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
        let mut config = config;
        let mode = options.ssl_mode.unwrap_or_else(|| Tls::mode_of(&config));
        let tls = Tls::new(
            mode,
            options.ssl_roots.as_ref(),
            options.ssl_client.as_ref(),
        )?;
        tls.apply(&mut config);
        PgBackend::build(pool, Some((config, tls)), options)
    }

    fn build(
        pool: Pool,
        listen_config: Option<(tokio_postgres::Config, Tls)>,
        options: PgOptions,
    ) -> Result<PgBackend, PgError> {
        let schema = SchemaName::new(&options.schema)?;
        let core = Core {
            pool,
            sql: Arc::new(Sql::new(schema, options.keep_succeeded)),
            clock: options.clock.clone(),
            random: options.random.clone(),
            options,
            signals: Arc::new(Signals::default()),
            self_settled: SelfSettled::default(),
        };
        Ok(PgBackend {
            inner: Arc::new(Inner {
                core: Arc::new(core),
                settler: Settler::default(),
                idle: Idle::default(),
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

    /// Wakes every task waiting in [`Backend::wait_for_jobs`](fairq_worker::Backend::wait_for_jobs) on this store, so it looks
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
            "EXPLAIN (ANALYZE, BUFFERS, WAL, COSTS OFF) {}",
            core.sql.claim
        );
        let params: [&(dyn ToSql + Sync); 4] = [
            &queue,
            &limit,
            &to_db(now),
            &deadline(now, Duration::from_secs(30)),
        ];
        tx.batch_execute(crate::sql::CLAIM_PLAN)
            .await
            .map_err(|e| db(e, schema))?;
        let rows = tx.query(&text, &params).await.map_err(|e| db(e, schema))?;
        tx.rollback().await.map_err(|e| db(e, schema))?;
        Ok(rows
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// Starts the LISTEN connection if it is not running (or died with its runtime).
    pub(crate) fn start_listener(&self) {
        let core = &self.inner.core;
        if !core.options.listen {
            return;
        }
        let Some((config, tls)) = self.inner.listen_config.clone() else {
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
        let channels = Channels {
            ready: core.sql.channel.clone(),
            due: core.sql.due_channel.clone(),
        };
        let task = runtime.spawn(listen::run(
            config,
            tls.connector,
            channels,
            Arc::downgrade(&core.signals),
        ));
        *listener = Some(task);
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
        v if v < schema::SCHEMA_VERSION => Err(PgError::SchemaTooOld {
            schema: schema.as_str().to_string(),
            found: v,
            supported: schema::SCHEMA_VERSION,
        }),
        _ => Ok(()),
    }
}
