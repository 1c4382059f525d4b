//! Connection and behaviour settings.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fairq_worker::{Clock, Random, SystemClock, SystemRandom};

use crate::client_certificate::ClientCertificate;

/// Settings of a [`RedisBackend`](crate::RedisBackend).
///
/// ```
/// use std::time::Duration;
/// use fairq_redis::RedisOptions;
/// let options = RedisOptions::new()
///     .prefix("billing")
///     .connect_timeout(Duration::from_secs(2));
/// assert_eq!(options.prefix, "billing");
/// ```
#[derive(Clone)]
pub struct RedisOptions {
    /// Key prefix of the deployment (default `fairq`): deployments with different prefixes
    /// share a server without seeing each other's jobs.
    pub prefix: String,
    /// Where "now" comes from (default: the system clock). Every timestamp a script stores
    /// (run times, lease deadlines, finish times) is read here and passed in, never taken
    /// from the Redis server's clock.
    pub clock: Arc<dyn Clock>,
    /// Where retry jitter comes from (default: [`SystemRandom`]): each failed attempt draws
    /// one number for core's verdict.
    pub random: Arc<dyn Random>,
    /// How long each attempt to connect waits (default 5 s). A connect whose first attempt
    /// fails transiently tries again through the connection manager
    /// ([`reconnect_retries`](Self::reconnect_retries) more times, up to a second apart).
    pub connect_timeout: Duration,
    /// How long to wait for a reply before the connection counts as broken (default 10 s).
    /// With [`wait_for_replicas`](Self::wait_for_replicas), a reply may take the replicas'
    /// timeout longer (see [`reply_timeout`](Self::reply_timeout)).
    pub response_timeout: Duration,
    /// Reconnection attempts of the connection manager before an operation fails (default 3).
    pub reconnect_retries: usize,
    /// Whether a request that times out replaces the store's shared connection with a new
    /// one (default `true`). A connection that went silent without being closed (a firewall
    /// or NAT that dropped its state; on a cluster, a connection whose routing stalled after
    /// a failover) otherwise keeps timing out until TCP gives up on it. Calls that timed out
    /// fail as transient either way and are repeated up to [`retries`](Self::retries) times.
    pub renew_on_timeout: bool,
    /// How many times an operation is repeated after its connection broke (default 3).
    /// Every script is safe to repeat (see the crate docs).
    pub retries: u32,
    /// Most delayed jobs one claim promotes into the fair order (default 10 000; 0 counts
    /// as 1, as in the PostgreSQL store's `promote_batch`).
    pub promote_limit: usize,
    /// Jobs per script call for batch enqueues, purges, prunes and revivals (default 500).
    /// The jobs of one queue in an enqueue that holds a unique key under
    /// [`OnConflict::Error`](fairq_worker::OnConflict::Error) or a dependency in the same
    /// queue go in one script call however many they are, so that a refusal leaves none of
    /// them behind (see the crate README, "Enqueueing many jobs").
    pub batch: usize,
    /// How long run times are aggregated in this client before they are added to the queue's
    /// histogram in Redis (default 1 s). [`Backend::stats`](fairq_worker::Backend::stats) on
    /// this client adds its pending ones first; other clients see them at most this late.
    pub timing_flush: Duration,
    /// Wait for this many replicas to confirm each acknowledged write (`WAIT`) before
    /// answering (default `None`: answer once the primary applied it). See
    /// [`ReplicaWait`].
    pub replicas: Option<ReplicaWait>,
    /// Root certificates (PEM) that a `rediss://` server's certificate must chain to
    /// (default `None`: the Mozilla root set). The URL parameter `cacert=PATH` names a file
    /// instead and wins over this field. Giving one with a `redis://` URL is an error.
    pub root_certificate: Option<Vec<u8>>,
    /// The certificate and key shown to a server that asks for one (mutual TLS; default
    /// `None`). The URL parameters `cert=PATH&key=PATH` name files instead and win over this
    /// field. Giving one with a `redis://` URL is an error.
    pub client_certificate: Option<ClientCertificate>,
    /// Whether a succeeded job is kept until a prune deletes it (default `true`) or deleted
    /// when its success is recorded. See [`keep_succeeded`](Self::keep_succeeded).
    pub keep_succeeded: bool,
}

/// Replication before acknowledgement: after an enqueue, settlement, hand-back, revival or
/// dependency registration, the store sends `WAIT` and answers only when `replicas` replicas
/// have the change, or fails with [`BackendError::Unavailable`](fairq_worker::BackendError)
/// after `timeout` ([`RedisStoreError::Unconfirmed`](crate::RedisStoreError::Unconfirmed):
/// the change is made on the primary, and may be lost only if it fails before a replica has
/// it; a repeated settlement, hand-back or revival is refused, but a repeated enqueue stores
/// its jobs again). The timeout counts in whole milliseconds,
/// rounded up; `Duration::MAX` waits without a limit (as `WAIT`'s own 0 does, so a zero or
/// sub-millisecond timeout waits 1 ms instead).
///
/// ```
/// use std::time::Duration;
/// use fairq_redis::{RedisOptions, ReplicaWait};
/// let o = RedisOptions::new().wait_for_replicas(1, Duration::from_secs(1));
/// assert_eq!(o.replicas, Some(ReplicaWait { replicas: 1, timeout: Duration::from_secs(1) }));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplicaWait {
    /// Replicas that must confirm.
    pub replicas: u32,
    /// How long to wait for them.
    pub timeout: Duration,
}

impl RedisOptions {
    /// The defaults.
    ///
    /// ```
    /// assert_eq!(fairq_redis::RedisOptions::new().prefix, "fairq");
    /// ```
    pub fn new() -> Self {
        RedisOptions {
            prefix: "fairq".to_string(),
            clock: Arc::new(SystemClock),
            random: Arc::new(SystemRandom),
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(10),
            reconnect_retries: 3,
            renew_on_timeout: true,
            retries: 3,
            promote_limit: 10_000,
            batch: 500,
            timing_flush: Duration::from_secs(1),
            replicas: None,
            root_certificate: None,
            client_certificate: None,
            keep_succeeded: true,
        }
    }

    /// Sets the key prefix.
    ///
    /// ```
    /// assert_eq!(fairq_redis::RedisOptions::new().prefix("x").prefix, "x");
    /// ```
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets the clock.
    ///
    /// ```
    /// use fairq_worker::{Clock, ManualClock};
    /// let options = fairq_redis::RedisOptions::new().clock(ManualClock::new(5));
    /// assert_eq!(options.clock.now(), 5);
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Sets the source of retry jitter.
    ///
    /// ```
    /// use fairq_worker::FixedRandom;
    /// let options = fairq_redis::RedisOptions::new().random(FixedRandom(0));
    /// assert_eq!(options.random.next_u64(), 0);
    /// ```
    pub fn random(mut self, random: impl Random) -> Self {
        self.random = Arc::new(random);
        self
    }

    /// Waits for `replicas` replicas to confirm every acknowledged write (see
    /// [`ReplicaWait`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = fairq_redis::RedisOptions::new().wait_for_replicas(1, Duration::from_millis(500));
    /// assert_eq!(o.replicas.unwrap().replicas, 1);
    /// ```
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replicas = Some(ReplicaWait { replicas, timeout });
        self
    }

    /// Trusts only the root certificates in `pem` (one or more PEM certificates) for
    /// `rediss://` connections: a private certificate authority, say.
    ///
    /// ```
    /// let pem = b"-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n".to_vec();
    /// let o = fairq_redis::RedisOptions::new().root_certificate(pem.clone());
    /// assert_eq!(o.root_certificate, Some(pem));
    /// ```
    pub fn root_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificate = Some(pem.into());
        self
    }

    /// Shows `certificate` to `rediss://` servers that ask for a client certificate
    /// (`--tls-auth-clients yes`).
    ///
    /// ```
    /// use fairq_redis::{ClientCertificate, RedisOptions};
    /// # let (cert_pem, key_pem) = (Vec::<u8>::new(), Vec::<u8>::new());
    /// let o = RedisOptions::new().client_certificate(ClientCertificate::new(cert_pem, key_pem));
    /// assert!(o.client_certificate.is_some());
    /// ```
    pub fn client_certificate(mut self, certificate: ClientCertificate) -> Self {
        self.client_certificate = Some(certificate);
        self
    }

    /// Whether a succeeded job is kept (the default): left in Redis, where `get`, `list` and
    /// the dashboard find it, until [`prune`](fairq_worker::Backend::prune) deletes it; or
    /// deleted when its success is recorded, as BullMQ's `removeOnComplete: true` and
    /// graphile-worker do. Not keeping them, memory holds only the jobs still to run (and the
    /// dead ones) instead of every success since the last prune, and each success costs a
    /// `DEL` instead of writing the job's new state and indexing it by finish time.
    ///
    /// Statistics count deleted successes all the same (`stats`: `retries.ok`, retries,
    /// failures, run times); `counts.succeeded` counts the succeeded jobs that are kept, as
    /// it counts no pruned one. Failed jobs that die are always kept, and so is a succeeded
    /// job that has dependents (they are released as usual). A job enqueued with
    /// `depends_on` naming a succeeded job that was not kept is refused with
    /// [`UnknownDependency`](fairq_worker::BackendError::UnknownDependency), as one naming a
    /// pruned job is; this includes a dependent enqueued at the moment its dependency's
    /// success is recorded, so enqueue a job's dependents before it can finish (in its own
    /// enqueue batch, say). When the reply to a settlement is lost and the repeated
    /// settlement finds a succeeded job gone, it answers that the job succeeded (that
    /// attempt's run time is then not recorded: its claim time went with the job).
    ///
    /// Every process sharing a prefix may choose for itself (the choice travels with each
    /// settlement, nothing of it is stored in Redis); what one deletes, no other process
    /// finds. In a URL given to `fairq::connect` or the `fairq` command:
    /// `redis://host:6379/?keep_succeeded=false`.
    ///
    /// ```
    /// use fairq_redis::RedisOptions;
    /// assert!(RedisOptions::new().keep_succeeded);
    /// let options = RedisOptions::new().prefix("mail").keep_succeeded(false);
    /// assert!(!options.keep_succeeded);
    /// ```
    pub fn keep_succeeded(mut self, keep: bool) -> Self {
        self.keep_succeeded = keep;
        self
    }

    /// Sets the connect timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = fairq_redis::RedisOptions::new().connect_timeout(Duration::from_millis(50));
    /// assert_eq!(o.connect_timeout, Duration::from_millis(50));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the response timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = fairq_redis::RedisOptions::new().response_timeout(Duration::from_secs(1));
    /// assert_eq!(o.response_timeout, Duration::from_secs(1));
    /// ```
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }
}

impl RedisOptions {
    /// How long a connection waits for a reply: the response timeout, plus the replicas'
    /// timeout when writes wait for replicas. A write that waits is answered only when its
    /// `WAIT` returns, up to that timeout later; a shorter reply timeout would report every
    /// write the replicas did not confirm in time as a lost connection (and repeat it)
    /// instead of as [`RedisStoreError::Unconfirmed`](crate::RedisStoreError::Unconfirmed).
    ///
    /// ```
    /// use std::time::Duration;
    /// let o = fairq_redis::RedisOptions::new().response_timeout(Duration::from_secs(2));
    /// assert_eq!(o.reply_timeout(), Duration::from_secs(2));
    /// let o = o.wait_for_replicas(1, Duration::from_secs(3));
    /// assert_eq!(o.reply_timeout(), Duration::from_secs(5));
    /// ```
    pub fn reply_timeout(&self) -> Duration {
        let waits = self.replicas.map_or(Duration::ZERO, |wait| wait.timeout);
        self.response_timeout.saturating_add(waits)
    }
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisOptions")
            .field("prefix", &self.prefix)
            .field("now", &self.clock.now())
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("reconnect_retries", &self.reconnect_retries)
            .field("renew_on_timeout", &self.renew_on_timeout)
            .field("retries", &self.retries)
            .field("promote_limit", &self.promote_limit)
            .field("batch", &self.batch)
            .field("timing_flush", &self.timing_flush)
            .field("replicas", &self.replicas)
            .field(
                "root_certificate",
                &self.root_certificate.as_ref().map(Vec::len),
            )
            .field("client_certificate", &self.client_certificate)
            .field("keep_succeeded", &self.keep_succeeded)
            .finish()
    }
}
