//! The store's shared connection, renewed when it stops answering.
//!
//! A request that times out says little about the connection it was sent on, and the `redis`
//! crate's connections do not replace themselves after one:
//! - its cluster connection runs a driver task that routes every request and rebuilds its
//!   slot map and node connections after errors. After a master failover under load that
//!   driver was seen to stop answering altogether: for a minute every request of every
//!   caller timed out, to healthy masters too, while the cluster itself had long recovered
//!   (the failover test's reports showed no command reaching any node);
//! - its connection manager to one server reconnects after a refused, reset or closed
//!   connection, but not after a timeout. A connection that went silent without being
//!   closed (a firewall or NAT that dropped its state, a server host that froze and came
//!   back behind a new address) would keep every request timing out until TCP gives up on
//!   it, which takes hours with the kernel's defaults.
//!
//! In both cases a new connection from the same client worked at once. So a request that
//! times out here renews the connection: the first caller to see a timeout on the current
//! connection opens a new one (bounded by the connect timeout) and every later request uses
//! it; callers that were waiting on the old one get their own timeouts and repeat as they
//! would after any lost reply. Only timeouts renew: a refused or broken connection is the
//! crate's to repair, and it does.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd, Pipeline, RedisResult, Value};

/// Where a link's connections come from.
pub(crate) trait Source: Send + Sync + 'static {
    /// The connection it opens.
    type Conn: ConnectionLike + Clone + Send + Sync + 'static;

    /// What the log calls the connection.
    const WHAT: &'static str;

    /// Opens a new connection.
    fn open(&self) -> impl Future<Output = RedisResult<Self::Conn>> + Send;
}

impl Source for ClusterClient {
    type Conn = ClusterConnection;
    const WHAT: &'static str = "Redis Cluster connection";

    fn open(&self) -> impl Future<Output = RedisResult<ClusterConnection>> + Send {
        self.get_async_connection()
    }
}

/// A server's client with the settings of the store's connection manager.
pub(crate) struct ManagerSource {
    pub(crate) client: Client,
    pub(crate) config: ConnectionManagerConfig,
}

impl Source for ManagerSource {
    type Conn = ConnectionManager;
    const WHAT: &'static str = "Redis connection";

    fn open(&self) -> impl Future<Output = RedisResult<ConnectionManager>> + Send {
        ConnectionManager::new_with_config(self.client.clone(), self.config.clone())
    }
}

/// A connection shared by every clone, replaced by a fresh one when a request on it times
/// out.
pub(crate) struct Link<S: Source> {
    shared: Arc<Shared<S>>,
}

impl<S: Source> Clone for Link<S> {
    fn clone(&self) -> Self {
        Link {
            shared: Arc::clone(&self.shared),
        }
    }
}

struct Shared<S: Source> {
    /// Where new connections come from.
    source: S,
    /// How long opening a new connection may take.
    connect_timeout: Duration,
    /// Whether a timeout renews the connection (tests turn it off to see the difference).
    renew: bool,
    /// The connection in use and its generation (how many renewals came before it).
    current: Mutex<(u64, S::Conn)>,
    /// One renewal at a time.
    renewing: tokio::sync::Mutex<()>,
}

impl<S: Source> Link<S> {
    /// A link that starts on `conn`, opened from `source`.
    pub(crate) fn new(source: S, conn: S::Conn, connect_timeout: Duration, renew: bool) -> Self {
        Link {
            shared: Arc::new(Shared {
                source,
                connect_timeout,
                renew,
                current: Mutex::new((0, conn)),
                renewing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// The connection in use, and its generation.
    pub(crate) fn current(&self) -> (u64, S::Conn) {
        let guard = self
            .shared
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        (guard.0, guard.1.clone())
    }

    /// How many times the connection was renewed.
    pub(crate) fn renewals(&self) -> u64 {
        self.current().0
    }

    /// Sends one command.
    pub(crate) async fn command(&self, cmd: &Cmd) -> RedisResult<Value> {
        let (generation, mut conn) = self.current();
        let result = conn.req_packed_command(cmd).await;
        self.after(generation, &result).await;
        result
    }

    /// Sends part of a pipeline.
    pub(crate) async fn pipeline(
        &self,
        pipeline: &Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let (generation, mut conn) = self.current();
        let result = conn.req_packed_commands(pipeline, offset, count).await;
        self.after(generation, &result).await;
        result
    }

    /// Renews the connection when `result`, from generation `generation`, is a timeout.
    async fn after<T>(&self, generation: u64, result: &RedisResult<T>) {
        if self.shared.renew && matches!(result, Err(err) if err.is_timeout()) {
            self.renew(generation).await;
        }
    }

    /// Replaces connection `generation` with a new one, unless another caller did already.
    /// When no new connection can be opened in time, the old one stays (it may yet recover,
    /// and the next timeout tries again).
    async fn renew(&self, generation: u64) {
        let _one = self.shared.renewing.lock().await;
        if self.current().0 != generation {
            return;
        }
        let opened = tokio::time::timeout(
            self.shared.connect_timeout.max(Duration::from_secs(1)),
            self.shared.source.open(),
        )
        .await;
        match opened {
            Ok(Ok(conn)) => {
                let mut guard = self
                    .shared
                    .current
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                *guard = (generation + 1, conn);
                tracing::warn!(
                    renewals = generation + 1,
                    "a request timed out: the {} was renewed",
                    S::WHAT
                );
            }
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "renewing the {} failed", S::WHAT);
            }
            Err(_) => {
                tracing::warn!("renewing the {} timed out", S::WHAT);
            }
        }
    }
}
