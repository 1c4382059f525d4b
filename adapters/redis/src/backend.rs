//! The store handle: its connection, settings, scripts and client-side caches.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fairq_core::job::Millis;
use fairq_worker::{BackendError, Clock, Random, SystemRandom};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client};

use crate::connection::Connection;
use crate::error::{self, is_transient, RedisStoreError};
use crate::keys::KeySpace;
use crate::options::RedisOptions;
use crate::registry::Registry;
use crate::scripts::Scripts;
use crate::timing::Timing;

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
    pub(crate) client: Client,
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
    pub(crate) waiters: Mutex<Vec<MultiplexedConnection>>,
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
        let bases: Vec<(String, Vec<Vec<u8>>)> = pending
            .into_iter()
            .map(|(queue, args)| (self.keys.queue_base(&queue), args))
            .collect();
        runtime.spawn(async move {
            for (base, args) in bases {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(&hash).arg(1).arg(base);
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
    /// Connects to the server at `url` (`redis://[:password@]host[:port][/db]`, or
    /// `rediss://` for TLS), checks that it answers and loads the scripts.
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
        let client = crate::tls::client(url, &options)?;
        let addr = client.get_connection_info().addr.to_string();
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(options.connect_timeout)
            .set_response_timeout(options.response_timeout)
            .set_number_of_retries(options.reconnect_retries)
            .set_max_delay(1_000);
        // One connection first, without the manager's reconnection attempts: a refused
        // certificate or password fails at once instead of after every retry. It becomes
        // the first connection for blocking waits.
        let first = client
            .get_multiplexed_async_connection_with_config(
                &AsyncConnectionConfig::new().set_connection_timeout(options.connect_timeout),
            )
            .await;
        let first = match first {
            Ok(conn) => Some(conn),
            Err(source) if !is_transient(&source) => return Err(connect_error(&addr, source)),
            Err(_) => None,
        };
        let manager = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(|source| connect_error(&addr, source))?;
        let backend = RedisBackend {
            inner: Arc::new(Inner {
                client,
                conn: Connection::single(manager),
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
            }),
        };
        backend.load_scripts().await?;
        Ok(backend)
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

    /// Loads every script into the server's script cache (done by [`connect`](Self::connect);
    /// calls reload them by themselves after a `NOSCRIPT` reply).
    ///
    /// ```no_run
    /// # async fn demo(store: fairq_redis::RedisBackend) -> Result<(), fairq_worker::BackendError> {
    /// store.load_scripts().await?;
    /// # Ok(()) }
    /// ```
    pub async fn load_scripts(&self) -> Result<(), BackendError> {
        let mut pipe = redis::pipe();
        for named in self.inner.scripts.all() {
            pipe.cmd("SCRIPT")
                .arg("LOAD")
                .arg(named.source.as_str())
                .ignore();
        }
        self.pipe_query::<()>("loading scripts", &pipe).await
    }

    /// Deletes every key of this deployment's prefix (all queues, jobs and counters).
    /// Returns how many keys were deleted. Meant for tests and for tearing a deployment down.
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

    /// A connection for blocking commands (each waiter needs its own: a blocked connection
    /// cannot serve other requests).
    pub(crate) async fn waiter_connection(&self) -> Result<MultiplexedConnection, BackendError> {
        if let Some(conn) = self.inner.waiters.lock().ok().and_then(|mut w| w.pop()) {
            return Ok(conn);
        }
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(self.inner.options.connect_timeout);
        self.inner
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|source| connect_error(&self.inner.addr, source))
    }

    /// Returns a healthy blocking connection to the pool.
    pub(crate) fn return_waiter(&self, conn: MultiplexedConnection) {
        if let Ok(mut waiters) = self.inner.waiters.lock() {
            if waiters.len() < 64 {
                waiters.push(conn);
            }
        }
    }
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
