//! The connection a store talks through: to one server, or to a Redis Cluster.

use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

use crate::link::{Link, ManagerSource};
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisFuture, RedisResult, Value};

/// The store's connection: multiplexed (every request of every clone shares it) and
/// reconnecting by itself. On a cluster it routes each command to the node holding its key's
/// slot and follows the cluster's topology (redirections, failovers). It implements the
/// `redis` crate's [`ConnectionLike`], so any command can be sent
/// on it.
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
    /// The store's shared connection to one server: a connection manager (it reconnects
    /// after a broken connection), renewed when it stops answering (see [`Link`]).
    Single(Link<ManagerSource>),
    /// A connection of its own to one server (blocking waits).
    Plain(MultiplexedConnection),
    /// A cluster connection: one multiplexed connection per node, renewed when it stops
    /// answering (see [`Link`]).
    Cluster(Link<ClusterClient>),
}

/// Makes new connections to what the URL named (for blocking waits, which need connections of
/// their own).
#[derive(Clone)]
pub(crate) enum Opener {
    Single(Client),
    Cluster(ClusterClient),
}

impl Opener {
    /// A fresh connection of its own.
    pub(crate) async fn open(&self, connect_timeout: Duration) -> RedisResult<Connection> {
        let kind = match self {
            Opener::Single(client) => {
                let config = AsyncConnectionConfig::new().set_connection_timeout(connect_timeout);
                Kind::Plain(
                    client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await?,
                )
            }
            // Blocking waits bound their own time: their client sets no reply timeout, so
            // nothing times out that a renewal could mend.
            Opener::Cluster(client) => Kind::Cluster(Link::new(
                client.clone(),
                client.get_async_connection().await?,
                connect_timeout,
                false,
            )),
        };
        Ok(Connection { kind })
    }
}

impl Connection {
    pub(crate) fn single(link: Link<ManagerSource>) -> Self {
        Connection {
            kind: Kind::Single(link),
        }
    }

    pub(crate) fn plain(conn: MultiplexedConnection) -> Self {
        Connection {
            kind: Kind::Plain(conn),
        }
    }

    pub(crate) fn cluster(link: Link<ClusterClient>) -> Self {
        Connection {
            kind: Kind::Cluster(link),
        }
    }

    /// How many times the shared connection was renewed after a timeout (0 for a
    /// connection of its own).
    pub(crate) fn renewals(&self) -> u64 {
        match &self.kind {
            Kind::Single(link) => link.renewals(),
            Kind::Cluster(link) => link.renewals(),
            Kind::Plain(_) => 0,
        }
    }

    /// True when this is a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.kind, Kind::Cluster(_))
    }

    /// Sends `cmd` to the server, or to every master of a cluster. On a cluster, a master
    /// that fails is skipped (its error is returned only when every master failed): commands
    /// sent this way (loading scripts) are conveniences that calls redo by themselves.
    pub(crate) async fn to_every_master(&self, cmd: &Cmd) -> RedisResult<()> {
        match &self.kind {
            Kind::Cluster(link) => {
                let mut conn = link.current().1;
                let mut last = None;
                let mut any = false;
                for (host, port) in nodes(&mut conn, false).await? {
                    match conn.route_command(cmd, by_address(host, port)).await {
                        Ok(_) => any = true,
                        Err(err) => last = Some(err),
                    }
                }
                match last {
                    Some(err) if !any => Err(err),
                    _ => Ok(()),
                }
            }
            _ => {
                let mut conn = self.clone();
                cmd.query_async::<Value>(&mut conn).await.map(drop)
            }
        }
    }

    /// Deletes every key matching `pattern`; returns how many. On a cluster, every master is
    /// scanned.
    pub(crate) async fn delete_matching(&self, pattern: &str) -> RedisResult<u64> {
        match &self.kind {
            Kind::Cluster(link) => {
                let mut conn = link.current().1;
                let mut deleted = 0;
                for (host, port) in nodes(&mut conn, false).await? {
                    let route = by_address(host, port);
                    let mut cursor: u64 = 0;
                    loop {
                        let mut scan = redis::cmd("SCAN");
                        scan.arg(cursor)
                            .arg("MATCH")
                            .arg(pattern)
                            .arg("COUNT")
                            .arg(1_000);
                        let (next, batch): (u64, Vec<String>) = redis::from_owned_redis_value(
                            conn.route_command(&scan, route.clone()).await?,
                        )?;
                        for key in &batch {
                            let n: u64 =
                                redis::cmd("UNLINK").arg(key).query_async(&mut conn).await?;
                            deleted += n;
                        }
                        if next == 0 {
                            break;
                        }
                        cursor = next;
                    }
                }
                Ok(deleted)
            }
            _ => delete_matching(&mut self.clone(), pattern).await,
        }
    }
}

/// A route to the node at `host:port`.
fn by_address(host: String, port: u16) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port })
}

/// The cluster's masters (and with `replicas`, their replicas too), from `CLUSTER SLOTS`.
async fn nodes(conn: &mut ClusterConnection, replicas: bool) -> RedisResult<Vec<(String, u16)>> {
    let reply = conn
        .route_command(
            redis::cmd("CLUSTER").arg("SLOTS"),
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
        )
        .await?;
    Ok(slot_nodes(&reply, replicas))
}

/// The nodes of a `CLUSTER SLOTS` reply: each range is `[start, end, master, replica...]`,
/// each node `[host, port, id, ...]`. Deduplicated, masters first.
pub(crate) fn slot_nodes(reply: &Value, replicas: bool) -> Vec<(String, u16)> {
    let mut masters = Vec::new();
    let mut others = Vec::new();
    let Value::Array(ranges) = reply else {
        return masters;
    };
    for range in ranges {
        let Value::Array(fields) = range else {
            continue;
        };
        for (i, node) in fields.iter().enumerate().skip(2) {
            let Value::Array(parts) = node else {
                continue;
            };
            let host = parts
                .first()
                .and_then(|v| redis::from_redis_value::<String>(v).ok());
            let port = parts
                .get(1)
                .and_then(|v| redis::from_redis_value::<u16>(v).ok());
            if let (Some(host), Some(port)) = (host, port) {
                let list = if i == 2 { &mut masters } else { &mut others };
                if !list.contains(&(host.clone(), port)) {
                    list.push((host, port));
                }
            }
        }
    }
    if replicas {
        masters.extend(others);
    }
    masters
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
            Kind::Single(link) => Box::pin(link.command(cmd)),
            Kind::Plain(conn) => conn.req_packed_command(cmd),
            Kind::Cluster(link) => Box::pin(link.command(cmd)),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match &mut self.kind {
            Kind::Single(link) => Box::pin(link.pipeline(pipeline, offset, count)),
            Kind::Plain(conn) => conn.req_packed_commands(pipeline, offset, count),
            Kind::Cluster(link) => Box::pin(link.pipeline(pipeline, offset, count)),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.kind {
            Kind::Single(link) => link.current().1.get_db(),
            Kind::Plain(conn) => conn.get_db(),
            Kind::Cluster(link) => link.current().1.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(host: &str, port: i64) -> Value {
        Value::Array(vec![
            Value::BulkString(host.as_bytes().to_vec()),
            Value::Int(port),
            Value::BulkString(b"id".to_vec()),
        ])
    }

    #[test]
    fn slot_nodes_lists_masters_first_once_each() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("h", 1),
                node("h", 4),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(10922),
                node("h", 2),
                node("h", 5),
            ]),
            Value::Array(vec![Value::Int(10923), Value::Int(16000), node("h", 3)]),
            Value::Array(vec![Value::Int(16001), Value::Int(16383), node("h", 3)]),
            Value::Nil,
        ]);
        let h = |p| ("h".to_string(), p);
        assert_eq!(slot_nodes(&reply, false), vec![h(1), h(2), h(3)]);
        assert_eq!(slot_nodes(&reply, true), vec![h(1), h(2), h(3), h(4), h(5)]);
        assert!(slot_nodes(&Value::Nil, true).is_empty());
    }
}
