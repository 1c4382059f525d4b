//! Settings of a [`PgBackend`](crate::PgBackend).

use std::sync::Arc;
use std::time::Duration;

use fairq_worker::{Clock, Random, SystemClock, SystemRandom};

use crate::schema::DEFAULT_SCHEMA;
use crate::tls::{ClientCert, RootCerts, SslMode};

/// Settings of a [`PgBackend`](crate::PgBackend), built with chained setters.
///
/// ```
/// use std::time::Duration;
/// use fairq_postgres::PgOptions;
/// let options = PgOptions::default()
///     .schema("billing_jobs")
///     .pool_size(8)
///     .migrate(true)
///     .poll_interval(Duration::from_millis(500));
/// assert_eq!(options.schema_name(), "billing_jobs");
/// ```
#[derive(Clone)]
pub struct PgOptions {
    pub(crate) schema: String,
    pub(crate) pool_size: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) wait_timeout: Duration,
    pub(crate) listen: bool,
    pub(crate) poll_interval: Duration,
    pub(crate) migrate: bool,
    pub(crate) keep_succeeded: bool,
    pub(crate) promote_batch: i64,
    pub(crate) rescue_batch: i64,
    pub(crate) complete_batch: usize,
    pub(crate) prune_batch: i64,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) random: Arc<dyn Random>,
    pub(crate) ssl_mode: Option<SslMode>,
    pub(crate) ssl_roots: Option<RootCerts>,
    pub(crate) ssl_client: Option<ClientCert>,
}

impl std::fmt::Debug for PgOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgOptions")
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("wait_timeout", &self.wait_timeout)
            .field("listen", &self.listen)
            .field("poll_interval", &self.poll_interval)
            .field("migrate", &self.migrate)
            .field("keep_succeeded", &self.keep_succeeded)
            .field("promote_batch", &self.promote_batch)
            .field("rescue_batch", &self.rescue_batch)
            .field("complete_batch", &self.complete_batch)
            .field("prune_batch", &self.prune_batch)
            .field("ssl_mode", &self.ssl_mode)
            .field("ssl_roots", &self.ssl_roots)
            .field("ssl_client", &self.ssl_client)
            .finish_non_exhaustive()
    }
}

impl Default for PgOptions {
    /// Schema `fairq`, 16 pooled connections, 5 s connect and 30 s pool timeouts,
    /// LISTEN/NOTIFY on with a 1 s polling fallback, no automatic migration, succeeded jobs
    /// kept in the archive, the system clock and random numbers, `sslmode=prefer` unless the
    /// URL says otherwise.
    fn default() -> Self {
        PgOptions {
            schema: DEFAULT_SCHEMA.to_string(),
            pool_size: 16,
            connect_timeout: Duration::from_secs(5),
            wait_timeout: Duration::from_secs(30),
            listen: true,
            poll_interval: Duration::from_secs(1),
            migrate: false,
            keep_succeeded: true,
            promote_batch: 10_000,
            rescue_batch: 1_000,
            complete_batch: 1_000,
            prune_batch: 10_000,
            clock: Arc::new(SystemClock),
            random: Arc::new(SystemRandom),
            ssl_mode: None,
            ssl_roots: None,
            ssl_client: None,
        }
    }
}

impl PgOptions {
    /// The schema holding the store's tables (default `fairq`).
    ///
    /// ```
    /// assert_eq!(fairq_postgres::PgOptions::default().schema("x").schema_name(), "x");
    /// ```
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The configured schema name.
    ///
    /// ```
    /// assert_eq!(fairq_postgres::PgOptions::default().schema_name(), "fairq");
    /// ```
    pub fn schema_name(&self) -> &str {
        &self.schema
    }

    /// The largest [`pool_size`](Self::pool_size) (1,024, as `fairq::ConnectOptions`): far
    /// more connections than a PostgreSQL server accepts by default (100). The pool reserves
    /// room for every connection up front, so a size such as `usize::MAX` could not be built.
    pub const MAX_POOL_SIZE: usize = 1024;

    /// Most pooled connections (default 16; at least 1 and at most
    /// [`MAX_POOL_SIZE`](Self::MAX_POOL_SIZE): a size out of that range is taken as the
    /// nearest bound).
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().pool_size(4);
    /// # let _ = o;
    /// // Taken as `PgOptions::MAX_POOL_SIZE`.
    /// let o = fairq_postgres::PgOptions::default().pool_size(usize::MAX);
    /// assert!(format!("{o:?}").contains("pool_size: 1024"));
    /// ```
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.clamp(1, Self::MAX_POOL_SIZE);
        self
    }

    /// How long to wait for a new connection (default 5 s).
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().connect_timeout(std::time::Duration::from_secs(1));
    /// # let _ = o;
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long a call waits for a free pooled connection (default 30 s).
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().wait_timeout(std::time::Duration::from_secs(2));
    /// # let _ = o;
    /// ```
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = timeout;
        self
    }

    /// Whether idle workers are woken by LISTEN/NOTIFY (default on). Off, they poll every
    /// [`poll_interval`](Self::poll_interval).
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().listen(false);
    /// # let _ = o;
    /// ```
    pub fn listen(mut self, listen: bool) -> Self {
        self.listen = listen;
        self
    }

    /// The longest an idle worker sleeps while notifications are unavailable (default 1 s).
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().poll_interval(std::time::Duration::from_millis(200));
    /// # let _ = o;
    /// ```
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Whether [`PgBackend::connect`](crate::PgBackend::connect) creates or upgrades the
    /// schema (default off: a missing schema is an error that says to migrate).
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().migrate(true);
    /// # let _ = o;
    /// ```
    pub fn migrate(mut self, migrate: bool) -> Self {
        self.migrate = migrate;
        self
    }

    /// Whether a succeeded job is kept: moved to the archive (the default), where `get`,
    /// `list` and the dashboard find it until `prune` deletes it, or deleted when its
    /// success is recorded, as graphile-worker does and BullMQ's `removeOnComplete`. Not
    /// keeping them saves a row write per job: about a fifth more jobs per second on a
    /// drain that PostgreSQL's CPU limits (see the crate's README).
    ///
    /// Statistics count deleted successes all the same (`stats`: succeeded, retries,
    /// failures, run times). Failed jobs that die are always archived, and so is a
    /// succeeded job that has dependents. A job enqueued with `depends_on` naming a
    /// succeeded job that was not kept is refused with
    /// [`UnknownDependency`](fairq_worker::BackendError::UnknownDependency), as one naming a
    /// pruned job is; this includes a dependent enqueued at the moment its dependency's
    /// success is recorded, so enqueue a job's dependents before it can finish (in its own
    /// enqueue batch, say). When the reply to a settlement is lost and the retried settlement
    /// finds a succeeded job gone, it answers that the job succeeded.
    ///
    /// Every process sharing a schema may choose for itself; what one deletes, no other
    /// process finds.
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default();
    /// assert!(o.keeps_succeeded());
    /// assert!(!o.keep_succeeded(false).keeps_succeeded());
    /// ```
    pub fn keep_succeeded(mut self, keep: bool) -> Self {
        self.keep_succeeded = keep;
        self
    }

    /// Whether succeeded jobs are kept (see [`keep_succeeded`](Self::keep_succeeded)).
    ///
    /// ```
    /// assert!(fairq_postgres::PgOptions::default().keeps_succeeded());
    /// ```
    pub fn keeps_succeeded(&self) -> bool {
        self.keep_succeeded
    }

    /// The store's clock (default: the system clock). Tests pass a
    /// [`ManualClock`](fairq_worker::ManualClock).
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().clock(fairq_worker::ManualClock::new(0));
    /// # let _ = o;
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The store's clock, shared.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let clock: Arc<dyn fairq_worker::Clock> = Arc::new(fairq_worker::SystemClock);
    /// let o = fairq_postgres::PgOptions::default().shared_clock(clock);
    /// # let _ = o;
    /// ```
    pub fn shared_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The store's random numbers, for retry jitter (default: [`SystemRandom`]). Tests pass a
    /// [`FixedRandom`](fairq_worker::FixedRandom) to fix the jitter.
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().random(fairq_worker::FixedRandom(0));
    /// # let _ = o;
    /// ```
    pub fn random(mut self, random: impl Random) -> Self {
        self.random = Arc::new(random);
        self
    }

    /// The store's random numbers, shared.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let random: Arc<dyn fairq_worker::Random> = Arc::new(fairq_worker::SystemRandom);
    /// let o = fairq_postgres::PgOptions::default().shared_random(random);
    /// # let _ = o;
    /// ```
    pub fn shared_random(mut self, random: Arc<dyn Random>) -> Self {
        self.random = random;
        self
    }

    /// Most delayed or retried jobs given a place in the fair order per claim (default
    /// 10,000; at least 1).
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().promote_batch(500);
    /// # let _ = o;
    /// ```
    pub fn promote_batch(mut self, n: usize) -> Self {
        self.promote_batch = i64::try_from(n.max(1)).unwrap_or(i64::MAX);
        self
    }

    /// Most finished attempts written by one settlement statement (default 1,000; at least 1).
    /// Settlements that arrive together are written together.
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().complete_batch(100);
    /// # let _ = o;
    /// ```
    pub fn complete_batch(mut self, n: usize) -> Self {
        self.complete_batch = n.max(1);
        self
    }

    /// Most finished jobs one prune statement deletes (default 10,000; at least 1). A prune
    /// of more runs statement after statement, each its own short transaction, so pruning a
    /// large backlog of finished jobs (switching a worker's
    /// [`prune_finished`](fairq_worker::WorkerBuilder::prune_finished) on for a store that
    /// kept months of them, say) never holds one long transaction open.
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().prune_batch(1_000);
    /// # let _ = o;
    /// ```
    pub fn prune_batch(mut self, n: usize) -> Self {
        self.prune_batch = i64::try_from(n.max(1)).unwrap_or(i64::MAX);
        self
    }

    /// The TLS mode when the connection string has no `sslmode` (default
    /// [`SslMode::Prefer`], as libpq). An `sslmode` in the URL wins. See the
    /// [crate docs](crate#tls) for what each mode checks.
    ///
    /// ```
    /// use fairq_postgres::{PgOptions, SslMode};
    /// let o = PgOptions::default().ssl_mode(SslMode::VerifyFull);
    /// # let _ = o;
    /// ```
    pub fn ssl_mode(mut self, mode: SslMode) -> Self {
        self.ssl_mode = Some(mode);
        self
    }

    /// Trusts the root certificates in the PEM file at `path` when the connection string has
    /// no `sslrootcert` (which wins). With a root given, `prefer` and `require` check the
    /// server's chain too, as libpq does.
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().ssl_root_cert("/etc/ssl/db-ca.pem");
    /// # let _ = o;
    /// ```
    pub fn ssl_root_cert(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.ssl_roots = Some(RootCerts::PemFile(path.into()));
        self
    }

    /// Trusts the root certificates in `pem` (PEM text, one or more certificates), for a
    /// certificate that comes from a secret store rather than a file. Like
    /// [`ssl_root_cert`](Self::ssl_root_cert), a `sslrootcert` in the URL wins.
    ///
    /// ```
    /// let pem = b"-----BEGIN CERTIFICATE-----\n...".to_vec();
    /// let o = fairq_postgres::PgOptions::default().ssl_root_cert_pem(pem);
    /// # let _ = o;
    /// ```
    pub fn ssl_root_cert_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ssl_roots = Some(RootCerts::Pem(pem.into()));
        self
    }

    /// Trusts the operating system's root certificates (as `sslrootcert=system`), when the
    /// URL names no other.
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default().ssl_system_roots();
    /// # let _ = o;
    /// ```
    pub fn ssl_system_roots(mut self) -> Self {
        self.ssl_roots = Some(RootCerts::System);
        self
    }

    /// Shows the client certificate in the PEM file `cert` (with any intermediates) and its
    /// private key in `key` to a server that asks for one (`cert` authentication in
    /// `pg_hba.conf`, or `clientcert=verify-ca`), when the connection string has no
    /// `sslcert`/`sslkey` (which win). Every connection of the store shows it, the LISTEN
    /// one too.
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default()
    ///     .ssl_client_cert("/etc/ssl/app.crt", "/etc/ssl/app.key");
    /// # let _ = o;
    /// ```
    pub fn ssl_client_cert(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.ssl_client = Some(ClientCert::PemFiles {
            cert: cert.into(),
            key: key.into(),
        });
        self
    }

    /// Like [`ssl_client_cert`](Self::ssl_client_cert), with the certificate and key as PEM
    /// text (from a secret store, say). The key never appears in messages or `Debug`.
    ///
    /// ```
    /// let o = fairq_postgres::PgOptions::default()
    ///     .ssl_client_cert_pem(b"-----BEGIN CERTIFICATE-----...".to_vec(), b"secret".to_vec());
    /// assert!(!format!("{o:?}").contains("secret"));
    /// ```
    pub fn ssl_client_cert_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.ssl_client = Some(ClientCert::Pem {
            cert: cert.into(),
            key: key.into(),
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_size_out_of_range_is_taken_as_the_nearest_bound() {
        assert_eq!(PgOptions::default().pool_size(0).pool_size, 1);
        assert_eq!(PgOptions::default().pool_size(8).pool_size, 8);
        for size in [PgOptions::MAX_POOL_SIZE + 1, usize::MAX] {
            assert_eq!(
                PgOptions::default().pool_size(size).pool_size,
                PgOptions::MAX_POOL_SIZE
            );
        }
    }
}
