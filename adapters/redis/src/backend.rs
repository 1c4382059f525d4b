//! The connection, the command helpers and the plumbing shared by the store operations.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::{BackendError, Clock, JobId};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, Cmd, ErrorKind, FromRedisValue, Pipeline, Value};

use crate::error::{self, is_transient, RedisStoreError};
use crate::keys::KeySpace;
use crate::options::RedisOptions;
use crate::scripts::{Named, Scripts};

/// Most claims remembered (job → queue) so that completing a claimed job needs no lookup.
const CLAIM_CACHE: usize = 100_000;

/// A [`Backend`](fairq_worker::Backend) on Redis.
///
/// Cheap to clone: clones share one connection (multiplexed, reconnecting by itself).
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
    pub(crate) conn: ConnectionManager,
    pub(crate) keys: KeySpace,
    pub(crate) options: RedisOptions,
    pub(crate) scripts: Scripts,
    pub(crate) addr: String,
    ids: tokio::sync::Mutex<IdBlock>,
    claims: Mutex<HashMap<JobId, Arc<str>>>,
    pub(crate) waiters: Mutex<Vec<MultiplexedConnection>>,
}

#[derive(Default)]
struct IdBlock {
    next: u64,
    end: u64,
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
    /// `rediss://` when the `redis` crate is built with TLS), checks that it answers and loads
    /// the scripts.
    ///
    /// A malformed URL is [`BackendError::Invalid`]; a server that cannot be reached is
    /// [`BackendError::Unavailable`] naming the address.
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
        let client = Client::open(url)
            .map_err(|e| BackendError::Invalid(format!("invalid Redis URL: {e}")))?;
        let addr = client.get_connection_info().addr.to_string();
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(options.connect_timeout)
            .set_response_timeout(options.response_timeout)
            .set_number_of_retries(options.reconnect_retries)
            .set_max_delay(1_000);
        let conn = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(|source| connect_error(&addr, source))?;
        let backend = RedisBackend {
            inner: Arc::new(Inner {
                client,
                conn,
                keys,
                options,
                scripts: Scripts::new(),
                addr,
                ids: tokio::sync::Mutex::new(IdBlock::default()),
                claims: Mutex::new(HashMap::new()),
                waiters: Mutex::new(Vec::new()),
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
    pub fn connection(&self) -> ConnectionManager {
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
                .arg(named.script_source())
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
        let mut conn = self.inner.conn.clone();
        let pattern = self.inner.keys.pattern();
        let mut cursor: u64 = 0;
        let mut deleted = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1_000)
                .query_async(&mut conn)
                .await
                .map_err(|e| error::command("SCAN", e))?;
            if !batch.is_empty() {
                let n: u64 = redis::cmd("UNLINK")
                    .arg(&batch)
                    .query_async(&mut conn)
                    .await
                    .map_err(|e| error::command("UNLINK", e))?;
                deleted += n;
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        self.inner.claims_clear();
        Ok(deleted)
    }

    pub(crate) fn now(&self) -> Millis {
        self.inner.options.clock.now()
    }

    /// Runs a script on `base`'s queue, repeating it (with `retry_flag`'s argument set to `1`)
    /// when the connection broke before the reply arrived.
    pub(crate) async fn eval(
        &self,
        named: &Named,
        base: &str,
        mut args: Vec<Vec<u8>>,
        retry_flag: Option<usize>,
    ) -> Result<Value, BackendError> {
        let mut conn = self.inner.conn.clone();
        let mut attempt = 0;
        loop {
            let mut call = named.script.prepare_invoke();
            call.key(base);
            for arg in &args {
                call.arg(arg.as_slice());
            }
            match call.invoke_async::<Value>(&mut conn).await {
                Ok(value) => return Ok(value),
                Err(err) if is_transient(&err) && attempt < self.inner.options.retries => {
                    attempt += 1;
                    tracing::debug!(script = named.name, attempt, error = %err, "retrying");
                    if let Some(index) = retry_flag {
                        args[index] = b"1".to_vec();
                    }
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(err) => return Err(error::script(named.name, err)),
            }
        }
    }

    /// Runs one command, repeating it after a broken connection.
    pub(crate) async fn cmd_query<T: FromRedisValue>(
        &self,
        op: &'static str,
        cmd: &Cmd,
    ) -> Result<T, BackendError> {
        let mut conn = self.inner.conn.clone();
        let mut attempt = 0;
        loop {
            match cmd.query_async::<T>(&mut conn).await {
                Ok(value) => return Ok(value),
                Err(err) if is_transient(&err) && attempt < self.inner.options.retries => {
                    attempt += 1;
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(err) => return Err(error::command(op, err)),
            }
        }
    }

    /// Runs a pipeline, repeating it after a broken connection or a `NOSCRIPT` reply (after
    /// loading the scripts). Only pipelines that are safe to repeat go through here.
    pub(crate) async fn pipe_query<T: FromRedisValue>(
        &self,
        op: &'static str,
        pipe: &Pipeline,
    ) -> Result<T, BackendError> {
        let mut conn = self.inner.conn.clone();
        let mut attempt = 0;
        loop {
            match pipe.query_async::<T>(&mut conn).await {
                Ok(value) => return Ok(value),
                Err(err) if err.kind() == ErrorKind::NoScriptError && attempt < 2 => {
                    attempt += 1;
                    Box::pin(self.load_scripts()).await?;
                }
                Err(err) if is_transient(&err) && attempt < self.inner.options.retries => {
                    attempt += 1;
                    tokio::time::sleep(backoff(attempt)).await;
                }
                Err(err) if err.kind() == ErrorKind::NoScriptError => {
                    return Err(error::command(op, err))
                }
                Err(err) => {
                    // A script error inside a pipeline carries the script's message.
                    return Err(if err.to_string().contains("user_script") {
                        error::script(op, err)
                    } else {
                        error::command(op, err)
                    });
                }
            }
        }
    }

    /// Hands out `n` fresh job ids from the shared counter, reserving blocks at a time.
    pub(crate) async fn reserve_ids(&self, n: usize) -> Result<Vec<u64>, BackendError> {
        let n = n as u64;
        let mut block = self.inner.ids.lock().await;
        if block.end - block.next >= n {
            let first = block.next;
            block.next += n;
            return Ok((first..first + n).collect());
        }
        let take = n.max(self.inner.options.id_block.max(1));
        let last: u64 = self
            .cmd_query(
                "reserving job ids",
                redis::cmd("INCRBY").arg(self.inner.keys.ids()).arg(take),
            )
            .await?;
        let first = last + 1 - take;
        if take > n {
            block.next = first + n;
            block.end = last + 1;
        }
        Ok((first..first + n).collect())
    }

    /// The queue of job `id`: from the claim cache, else from the id index.
    pub(crate) async fn queue_of(&self, id: JobId) -> Result<Option<Arc<str>>, BackendError> {
        if let Some(queue) = self.inner.claimed_queue(id) {
            return Ok(Some(queue));
        }
        let queue: Option<String> = self
            .cmd_query(
                "looking up a job",
                redis::cmd("HGET").arg(self.inner.keys.index()).arg(id.0),
            )
            .await?;
        Ok(queue.map(Arc::from))
    }

    /// Remembers the queue of a claimed job.
    pub(crate) fn remember_claim(&self, id: JobId, queue: &Arc<str>) {
        if let Ok(mut claims) = self.inner.claims.lock() {
            if claims.len() >= CLAIM_CACHE {
                claims.clear();
            }
            claims.insert(id, queue.clone());
        }
    }

    /// Forgets a claim that finished.
    pub(crate) fn forget_claim(&self, id: JobId) {
        if let Ok(mut claims) = self.inner.claims.lock() {
            claims.remove(&id);
        }
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

impl Inner {
    fn claimed_queue(&self, id: JobId) -> Option<Arc<str>> {
        self.claims.lock().ok()?.get(&id).cloned()
    }

    fn claims_clear(&self) {
        if let Ok(mut claims) = self.claims.lock() {
            claims.clear();
        }
    }
}

impl Named {
    fn script_source(&self) -> &str {
        &self.source
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis((20u64 << attempt.min(5)).min(500))
}

fn connect_error(addr: &str, source: redis::RedisError) -> BackendError {
    let err = RedisStoreError::Connect {
        addr: addr.to_string(),
        source,
    };
    if let RedisStoreError::Connect { source, .. } = &err {
        if !is_transient(source) {
            return BackendError::Store(Box::new(err));
        }
    }
    BackendError::Unavailable(Box::new(err))
}
