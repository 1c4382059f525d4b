//! One way to run a statement on any client: pooled connections cache prepared statements,
//! a caller's own client or transaction prepares them per call.

use futures::future::BoxFuture;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, GenericClient, Row};

/// Runs a statement and collects its rows.
pub(crate) trait Exec: Send + Sync {
    /// Runs `sql` with `params`.
    fn rows<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> BoxFuture<'a, Result<Vec<Row>, Error>>;
}

/// Any `tokio_postgres` client or transaction (the outbox path).
pub(crate) struct Plain<'c, C>(pub(crate) &'c C);

impl<C: GenericClient + Sync> Exec for Plain<'_, C> {
    fn rows<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> BoxFuture<'a, Result<Vec<Row>, Error>> {
        self.0.query(sql, params)
    }
}

impl Exec for deadpool_postgres::ClientWrapper {
    fn rows<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> BoxFuture<'a, Result<Vec<Row>, Error>> {
        Box::pin(async move {
            let statement = self.prepare_cached(sql).await?;
            tokio_postgres::Client::query(self, &statement, params).await
        })
    }
}

impl Exec for deadpool_postgres::Transaction<'_> {
    fn rows<'a>(
        &'a self,
        sql: &'a str,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> BoxFuture<'a, Result<Vec<Row>, Error>> {
        Box::pin(async move {
            let statement = self.prepare_cached(sql).await?;
            tokio_postgres::Transaction::query(self, &statement, params).await
        })
    }
}
