//! The store's shared connection to a Redis Cluster, renewed when it stops answering.
//!
//! The `redis` crate's cluster connection runs a driver task that routes every request and
//! rebuilds its slot map and node connections after errors. After a master failover under
//! load that driver was seen to stop answering altogether: for a minute every request of
//! every caller timed out, to healthy masters too, while the cluster itself had long
//! recovered (the failover test's reports showed no command reaching any node). A new
//! connection from the same client worked at once.
//!
//! So a request that times out here renews the connection: the first caller to see a
//! timeout on the current connection opens a new one (bounded by the connect timeout) and
//! every later request uses it; callers that were waiting on the old one get their own
//! timeouts and repeat as they would after any lost reply. Only timeouts renew: a refused
//! or broken node connection is the driver's to repair, and it does.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisResult, Value};

/// A cluster connection shared by every clone, replaced by a fresh one when a request on it
/// times out.
#[derive(Clone)]
pub(crate) struct ClusterLink {
    shared: Arc<Shared>,
}

struct Shared {
    /// Where new connections come from.
    client: ClusterClient,
    /// How long opening a new connection may take.
    connect_timeout: Duration,
    /// The connection in use and its generation (how many renewals came before it).
    current: Mutex<(u64, ClusterConnection)>,
    /// One renewal at a time.
    renewing: tokio::sync::Mutex<()>,
}

impl ClusterLink {
    /// A link that starts on `conn`, opened from `client`.
    pub(crate) fn new(
        client: ClusterClient,
        conn: ClusterConnection,
        connect_timeout: Duration,
    ) -> Self {
        ClusterLink {
            shared: Arc::new(Shared {
                client,
                connect_timeout,
                current: Mutex::new((0, conn)),
                renewing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// The connection in use, and its generation.
    pub(crate) fn current(&self) -> (u64, ClusterConnection) {
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
        if matches!(result, Err(err) if err.is_timeout()) {
            self.renew(generation).await;
        }
    }

    /// Replaces connection `generation` with a new one, unless another caller did already.
    /// When no new connection can be opened in time, the old one stays (its driver may yet
    /// recover, and the next timeout tries again).
    async fn renew(&self, generation: u64) {
        let _one = self.shared.renewing.lock().await;
        if self.current().0 != generation {
            return;
        }
        let opened = tokio::time::timeout(
            self.shared.connect_timeout.max(Duration::from_secs(1)),
            self.shared.client.get_async_connection(),
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
                    "a request to the Redis Cluster timed out: the cluster connection was renewed"
                );
            }
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "renewing the Redis Cluster connection failed");
            }
            Err(_) => {
                tracing::warn!("renewing the Redis Cluster connection timed out");
            }
        }
    }
}
