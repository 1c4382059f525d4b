//! [`Core`]: what every operation of a [`PgBackend`](crate::PgBackend) needs, shared with its
//! background tasks (the listener, the settler).

use std::sync::Arc;

use deadpool_postgres::{Object, Pool};
use fairq_core::job::{Lifecycle, Millis};
use fairq_worker::{BackendError, Clock, JobId, JobInfo, Random};

use crate::error::{db, pool};
use crate::exec::Exec;
use crate::listen::Signals;
use crate::options::PgOptions;
use crate::rows::{self, to_db};
use crate::self_settled::SelfSettled;
use crate::sql::Sql;

/// What every operation needs: the pool, the statements, the clock and random numbers, the
/// wake-up signals and due times.
pub(crate) struct Core {
    pub(crate) pool: Pool,
    pub(crate) sql: Arc<Sql>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) random: Arc<dyn Random>,
    pub(crate) options: PgOptions,
    pub(crate) signals: Arc<Signals>,
    /// Successes committed in their jobs' own transactions, until the worker settles them.
    pub(crate) self_settled: SelfSettled,
}

impl Core {
    pub(crate) fn schema(&self) -> &str {
        self.sql.schema.as_str()
    }

    pub(crate) fn now(&self) -> Millis {
        self.clock.now()
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<Object, BackendError> {
        self.pool.get().await.map_err(|e| pool(e, self.schema()))
    }

    pub(crate) fn err(&self, e: tokio_postgres::Error) -> BackendError {
        db(e, self.schema())
    }

    /// One job with its lifecycle, live or archived.
    pub(crate) async fn get_with(
        &self,
        conn: &dyn Exec,
        id: JobId,
    ) -> Result<Option<(JobInfo, Lifecycle)>, BackendError> {
        let rows = conn
            .rows(&self.sql.get, &[&to_db(id.0)])
            .await
            .map_err(|e| self.err(e))?;
        rows.first().map(rows::info).transpose()
    }

    /// Several jobs with their lifecycles, live or archived (missing ones are left out).
    pub(crate) async fn get_many(
        &self,
        conn: &dyn Exec,
        ids: &[i64],
    ) -> Result<Vec<(JobInfo, Lifecycle)>, BackendError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = conn
            .rows(&self.sql.get_many, &[&ids])
            .await
            .map_err(|e| self.err(e))?;
        rows.iter().map(rows::info).collect()
    }
}
