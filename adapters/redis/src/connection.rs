//! The connection a store talks through.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// The store's connection: multiplexed (every request of every clone shares it) and
/// reconnecting by itself. It implements the `redis` crate's
/// [`ConnectionLike`](redis::aio::ConnectionLike), so any command can be sent on it.
///
/// ```no_run
/// # async fn demo(store: fairq_redis::RedisBackend) -> redis::RedisResult<()> {
/// let pong: String = redis::cmd("PING").query_async(&mut store.connection()).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Connection {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Single(ConnectionManager),
}

impl Connection {
    pub(crate) fn single(manager: ConnectionManager) -> Self {
        Connection {
            kind: Kind::Single(manager),
        }
    }

    /// Deletes every key matching `pattern`; returns how many.
    pub(crate) async fn delete_matching(&self, pattern: &str) -> RedisResult<u64> {
        match &self.kind {
            Kind::Single(manager) => delete_matching(&mut manager.clone(), pattern).await,
        }
    }
}

async fn delete_matching<C: ConnectionLike>(conn: &mut C, pattern: &str) -> RedisResult<u64> {
    let mut cursor: u64 = 0;
    let mut deleted = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1_000)
            .query_async(conn)
            .await?;
        for key in &batch {
            // One key per command: in a cluster every key may live elsewhere.
            let n: u64 = redis::cmd("UNLINK").arg(key).query_async(conn).await?;
            deleted += n;
        }
        if next == 0 {
            return Ok(deleted);
        }
        cursor = next;
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match &mut self.kind {
            Kind::Single(manager) => manager.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.kind {
            Kind::Single(manager) => manager.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.kind {
            Kind::Single(manager) => manager.get_db(),
        }
    }
}
