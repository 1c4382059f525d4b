//! The store handle: its connection, settings, scripts and client-side caches.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::{BackendError, Clock, Random, SystemRandom};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::AsyncConnectionConfig;

use crate::connection::{Connection, Opener};
use crate::error::{self, is_transient, RedisStoreError};
use crate::keys::KeySpace;
use crate::link::{Link, ManagerSource};
use crate::options::RedisOptions;
use crate::registry::Registry;
use crate::scripts::Scripts;
use crate::target::Target;
use crate::timing::Timing;
use crate::tls::TlsSettings;

/// A [`Backend`](fairq_worker::Backend) on Redis.
///
/// Cheap to clone: clones share one connection (multiplexed, reconnecting by itself) and the
/// client-side caches.
///
/// ```no_run
/// # async fn demo() -> Result<(), fairq_worker::BackendError> {
/// use std::time::Duration;
/// use fairq_redis::{RedisBackend, RedisOptions};
/// use fairq_worker::{Backend, NewJob};
///
/// let store = RedisBackend::connect("redis://127.0.0.1:6379/", RedisOptions::new()).await?;
/// let id = store.enqueue(NewJob::new("mail", "welcome", b"{}".to_vec()).key("tenant-1")).await?;
/// let jobs = store.claim("mail", 10, Duration::from_secs(30)).await?;
/// assert_eq!(jobs[0].claim.id, id);
/// store.complete(jobs[0].claim).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisBackend {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) opener: Opener,
    pub(crate) conn: Connection,
    pub(crate) keys: KeySpace,
    pub(crate) options: RedisOptions,
    pub(crate) scripts: Scripts,
    pub(crate) addr: String,
    pub(crate) registry: Registry,
    pub(crate) timing: Timing,
    /// Names this client's enqueue requests (with `requests`), so a repeated call is
    /// recognised. Uniqueness matters here, not testability: it never comes from the injected
    /// [`Random`].
    nonce: u64,
    requests: AtomicU64,
    /// The highest id sequence this client has seen: the floor of its next ids.
    pub(crate) highwater: AtomicU64,
    pub(crate) waiters: Mutex<Vec<Connection>>,
    /// Set once the server refused a blocking wait's timeout in fractions of a second (Redis
    /// before 6.0): waits then send whole seconds (see `wait.rs`).
    pub(crate) whole_second_waits: AtomicBool,
}

/// The last handle going away sends the run times it still holds, when a runtime is there to
/// send them (best effort: a process that exits at once may not get to it).
impl Drop for Inner {
    fn drop(&mut self) {
        let pending = self.timing.drain();
        if pending.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut conn = self.conn.clone();
        let hash = self.scripts.timing.hash().to_string();
        let per_queue = self.scripts.timing.per_queue;
        let bases: Vec<(String, Vec<Vec<u8>>)> = pending
            .into_iter()
            .map(|(queue, args)| (self.keys.queue_base(&queue), args))
            .collect();
        runtime.spawn(async move {
            for (base, args) in bases {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(&hash);
                crate::keys::declare(&mut cmd, &base, per_queue);
                for arg in &args {
                    cmd.arg(arg.as_slice());
                }
                let _: Result<redis::Value, _> = cmd.query_async(&mut conn).await;
            }
        });
    }
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("addr", &self.inner.addr)
            .field("prefix", &self.inner.keys.prefix())
            .finish()
    }
}

impl RedisBackend {
    /// Connects to the server or cluster `url` names, checks that it answers and loads the
    /// scripts. The URL forms are those of [`Target::parse`]:
    /// `redis://[:password@]host[:port][/db]` (or `rediss://` for TLS) for one server;
    /// `redis+cluster://host1:port1,host2:port2/` or `redis://host:port/?cluster=true` for a
    /// Redis Cluster, discovered from the nodes given (see the crate README, "Redis Cluster").
    ///
    /// Over TLS the server's certificate must chain to the Mozilla roots, or to
    /// [`RedisOptions::root_certificate`], or to the PEM file the URL parameter
    /// `cacert=PATH` names; `rediss://...#insecure` skips the check.
    ///
    /// A malformed URL is [`BackendError::Invalid`]; a server that cannot be reached is
    /// [`BackendError::Unavailable`] naming the address; a refused certificate is
    /// [`BackendError::Store`] holding [`RedisStoreError::Tls`].
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use fairq_redis::{RedisBackend, RedisOptions};
    /// let err = RedisBackend::connect("not a url", RedisOptions::new()).await.unwrap_err();
    /// assert!(err.to_string().contains("invalid Redis URL"));
    /// # });
    /// ```
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, BackendError> {
        let keys = KeySpace::new(options.prefix.clone())?;
        let (url, tls) = TlsSettings::take(url, &options)?;
        let (opener, conn, addr, first) = match Target::parse(&url)? {
            Target::Single(url) => {
                let client = tls.client(&url)?;
                let addr = client.get_connection_info().addr.to_string();
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(options.connect_timeout)
                    .set_response_timeout(options.reply_timeout())
                    .set_number_of_retries(options.reconnect_retries)
                    .set_max_delay(1_000);
                // One connection first, without the manager's reconnection attempts: a refused
                // certificate or password fails at once instead of after every retry. It
                // becomes the first connection for blocking waits.
                let first = client
                    .get_multiplexed_async_connection_with_config(
                        &AsyncConnectionConfig::new()
                            .set_connection_timeout(options.connect_timeout),
                    )
                    .await;
                let first = match first {
                    Ok(conn) => Some(Connection::plain(conn)),
                    Err(source) if !is_transient(&source) => {
                        return Err(connect_error(&addr, source));
                    }
                    Err(_) => None,
                };
                let mut manager =
                    ConnectionManager::new_with_config(client.clone(), config.clone())
                        .await
                        .map_err(|source| connect_error(&addr, source))?;
                // A node of a cluster named by a plain URL: the cluster is discovered from it.
                let info: String = redis::cmd("INFO")
                    .arg("cluster")
                    .query_async(&mut manager)
                    .await
                    .map_err(|source| connect_error(&addr, source))?;
                if info.lines().any(|l| l.trim() == "cluster_enabled:1") {
                    let (opener, conn, addr) = open_cluster(vec![url], &tls, &options).await?;
                    (opener, conn, addr, None)
                } else {
                    let source = ManagerSource {
                        client: client.clone(),
                        config,
                    };
                    let link = Link::new(
                        source,
                        manager,
                        options.connect_timeout,
                        options.renew_on_timeout,
                    );
                    (
                        Opener::Single(client),
                        Connection::single(link),
                        addr,
                        first,
                    )
                }
            }
            Target::Cluster(nodes) => {
                let (opener, conn, addr) = open_cluster(nodes, &tls, &options).await?;
                (opener, conn, addr, None)
            }
        };
        let backend = RedisBackend {
            inner: Arc::new(Inner {
                opener,
                conn,
                keys,
                options,
                scripts: Scripts::new(),
                addr,
                registry: Registry::default(),
                timing: Timing::default(),
                nonce: SystemRandom.next_u64(),
                requests: AtomicU64::new(0),
                highwater: AtomicU64::new(0),
                waiters: Mutex::new(first.into_iter().collect()),
                whole_second_waits: AtomicBool::new(false),
            }),
        };
        backend.load_scripts().await?;
        backend.warn_about_persistence().await;
        Ok(backend)
    }

    /// True when the store runs on a Redis Cluster.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), fairq_worker::BackendError> {
    /// use fairq_redis::{RedisBackend, RedisOptions};
    /// let store = RedisBackend::connect("redis+cluster://127.0.0.1:7001/", RedisOptions::new()).await?;
    /// assert!(store.is_cluster());
    /// # Ok(()) }
    /// ```
    pub fn is_cluster(&self) -> bool {
        self.inner.conn.is_cluster()
    }

    /// The key layout in use.
    ///
    /// ```
    /// let keys = fairq_redis::KeySpace::new("fairq").unwrap();
    /// assert_eq!(keys.queue_base("q"), "fairq:{q}:");
    /// ```
    pub fn keys(&self) -> &KeySpace {
        &self.inner.keys
    }

    /// The clock the store reads.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_redis::RedisBackend) {
    /// let now = store.clock().now();
    /// # }
    /// ```
    pub fn clock(&self) -> &dyn Clock {
        &*self.inner.options.clock
    }

    /// A handle on the store's connection, for running other commands on it (for example
    /// `CLIENT ID`). It reconnects by itself like the store does.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_redis::RedisBackend) -> redis::RedisResult<()> {
    /// let id: i64 = redis::cmd("CLIENT").arg("ID").query_async(&mut store.connection()).await?;
    /// # Ok(()) }
    /// ```
    pub fn connection(&self) -> Connection {
        self.inner.conn.clone()
    }

    /// How many times the store's shared connection (to one server or to a Redis Cluster)
    /// was replaced by a new one because a request on it timed out (see
    /// [`RedisOptions::renew_on_timeout`]). A number that keeps growing means the server, or
    /// the way to it, keeps failing to answer in time.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_redis::RedisBackend) {
    /// if store.connection_renewals() > 0 {
    ///     eprintln!("the connection was renewed {} times", store.connection_renewals());
    /// }
    /// # }
    /// ```
    pub fn connection_renewals(&self) -> u64 {
        self.inner.conn.renewals()
    }

    /// Loads every script into the server's script cache (done by [`connect`](Self::connect);
    /// calls reload them by themselves after a `NOSCRIPT` reply).
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_redis::RedisBackend) -> Result<(), fairq_worker::BackendError> {
    /// store.load_scripts().await?;
    /// # Ok(()) }
    /// ```
    pub async fn load_scripts(&self) -> Result<(), BackendError> {
        if self.is_cluster() {
            // Each master is sent each script (a pipeline would go to one node). A master
            // that does not answer now gets them on its first call (see `call.rs`).
            for named in self.inner.scripts.all() {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD").arg(named.source.as_str());
                self.inner
                    .conn
                    .to_every_master(&load)
                    .await
                    .map_err(|e| error::command("loading scripts", e))?;
            }
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for named in self.inner.scripts.all() {
            pipe.cmd("SCRIPT")
                .arg("LOAD")
                .arg(named.source.as_str())
                .ignore();
        }
        self.pipe_query::<()>("loading scripts", &pipe).await
    }

    /// Deletes every key of this deployment (all queues, jobs and counters, the registry):
    /// the keys of its queues, found by [`KeySpace::pattern`] (on a cluster, on every
    /// master), and its deployment-wide keys by name ([`KeySpace::deployment_keys`]). The
    /// keys of a deployment whose prefix starts with this one's (`app:staging` next to
    /// `app`) are left alone. Returns how many keys were deleted. Meant for tests and for
    /// tearing a deployment down.
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_redis::RedisBackend) -> Result<(), fairq_worker::BackendError> {
    /// let deleted = store.destroy().await?;
    /// # Ok(()) }
    /// ```
    pub async fn destroy(&self) -> Result<u64, BackendError> {
        let deleted = self
            .inner
            .conn
            .delete_matching(&self.inner.keys.pattern())
            .await
            .map_err(|e| error::command("deleting keys", e))?;
        // One command per key: on a cluster they live in different slots.
        let mut deleted = deleted;
        for key in self.inner.keys.deployment_keys() {
            let n: u64 = self
                .cmd_query("deleting keys", redis::cmd("UNLINK").arg(key))
                .await?;
            deleted += n;
        }
        self.inner.registry.clear();
        self.inner.timing.clear();
        Ok(deleted)
    }

    pub(crate) fn now(&self) -> Millis {
        self.inner.options.clock.now()
    }

    pub(crate) fn random(&self) -> u64 {
        self.inner.options.random.next_u64()
    }

    /// A fresh name for one enqueue request of this client.
    pub(crate) fn request_id(&self) -> String {
        let n = self.inner.requests.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}-{n}", self.inner.nonce)
    }

    /// How long a script keeps a reply under its request id, in milliseconds, as a script
    /// argument (see [`request_keep_ms`](crate::call::request_keep_ms)).
    pub(crate) fn request_keep_arg(&self) -> Vec<u8> {
        crate::call::request_keep_ms(&self.inner.options)
            .to_string()
            .into_bytes()
    }

    /// A connection for blocking commands (each waiter needs its own: a blocked connection
    /// cannot serve other requests).
    pub(crate) async fn waiter_connection(&self) -> Result<Connection, BackendError> {
        if let Some(conn) = self.inner.waiters.lock().ok().and_then(|mut w| w.pop()) {
            return Ok(conn);
        }
        self.inner
            .opener
            .open(self.inner.options.connect_timeout)
            .await
            .map_err(|source| connect_error(&self.inner.addr, source))
    }

    /// Returns a healthy blocking connection to the pool.
    pub(crate) fn return_waiter(&self, conn: Connection) {
        if let Ok(mut waiters) = self.inner.waiters.lock() {
            if waiters.len() < 64 {
                waiters.push(conn);
            }
        }
    }
}

/// Connects to the cluster that `nodes` belong to.
async fn open_cluster(
    nodes: Vec<String>,
    tls: &TlsSettings,
    options: &RedisOptions,
) -> Result<(Opener, Connection, String), BackendError> {
    let mut addrs = Vec::with_capacity(nodes.len());
    for node in &nodes {
        let info = redis::IntoConnectionInfo::into_connection_info(node.as_str())
            .map_err(|e| BackendError::Invalid(format!("invalid Redis URL: {e}")))?;
        addrs.push(info.addr.to_string());
    }
    let addr = format!("cluster {}", addrs.join(","));
    // The cluster client repeats nothing itself (`retries(0)`): a call repeated after a lost
    // reply must say so to its script (see `call.rs`), so repeats are this crate's.
    // Redirections and lost nodes still make it update its slot map.
    let builder = |response_timeout: Option<Duration>| {
        let mut b = ClusterClientBuilder::new(nodes.clone())
            .connection_timeout(options.connect_timeout)
            .retries(0);
        if let Some(timeout) = response_timeout {
            b = b.response_timeout(timeout);
        }
        tls.cluster(&nodes, b)?
            .build()
            .map_err(|e| BackendError::Invalid(format!("invalid Redis URL: {e}")))
    };
    let client = builder(Some(options.reply_timeout()))?;
    // Blocking waits bound their own time: their connections have no reply timeout.
    let waiters = builder(None)?;
    match client.get_async_connection().await {
        Ok(conn) => {
            let link = Link::new(
                client,
                conn,
                options.connect_timeout,
                options.renew_on_timeout,
            );
            Ok((Opener::Cluster(waiters), Connection::cluster(link), addr))
        }
        Err(source) => Err(match refused_node(&nodes, tls, options).await {
            Some(refused) => refused,
            None => connect_error(&addr, source),
        }),
    }
}

/// Why the first node that refuses a connection of its own refuses it, when that is
/// something no retry cures (a certificate, most often). The cluster client reports failed
/// initial connections as text only, so the reason is asked of the nodes one by one, after
/// the cluster connection failed (never on the way to a working one).
async fn refused_node(
    nodes: &[String],
    tls: &TlsSettings,
    options: &RedisOptions,
) -> Option<BackendError> {
    let config = AsyncConnectionConfig::new().set_connection_timeout(options.connect_timeout);
    for node in nodes {
        let Ok(client) = tls.client(node) else {
            continue;
        };
        let addr = client.get_connection_info().addr.to_string();
        match client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Err(source) if !is_transient(&source) => return Some(connect_error(&addr, source)),
            _ => {}
        }
    }
    None
}

pub(crate) fn connect_error(addr: &str, source: redis::RedisError) -> BackendError {
    if crate::tls::tls_failure(&source).is_some() {
        return BackendError::Store(Box::new(RedisStoreError::Tls {
            addr: addr.to_string(),
            source,
        }));
    }
    let transient = is_transient(&source);
    let err = RedisStoreError::Connect {
        addr: addr.to_string(),
        source,
    };
    if transient {
        BackendError::Unavailable(Box::new(err))
    } else {
        BackendError::Store(Box::new(err))
    }
}
