//! The one-job insert: [`enqueue_batch`](crate::enqueue::enqueue_batch) of a single job
//! without a unique key runs the `ENQUEUE_ONE` statement, whose scalar parameters let a
//! prepared statement keep one plan instead of planning every call.

use fairq_core::job::Millis;
use fairq_worker::{BackendError, NewJob};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

use crate::error::db;
use crate::exec::Exec;
use crate::payload;
use crate::rows::{metadata_to_db, policy_to_db, to_db};
use crate::sql::Sql;

/// The batch's only job, when it has no unique key (a unique key needs the batch statement's
/// conflict handling and its report of the key's holder).
pub(crate) fn lone(jobs: &[NewJob]) -> Option<&NewJob> {
    match jobs {
        [job] if job.unique_key.is_none() => Some(job),
        _ => None,
    }
}

/// Inserts `job` (blocked by its dependency when `blocked`); the rows are those the batch
/// statement returns for a batch of this one job.
pub(crate) async fn insert(
    db_: &dyn Exec,
    sql: &Sql,
    job: &NewJob,
    blocked: bool,
    now: Millis,
) -> Result<Vec<Row>, BackendError> {
    let columns = payload::split(&job.payload);
    let metadata = metadata_to_db(&job.metadata);
    let retry = policy_to_db(job.retry.as_ref())?;
    let depends_on = job.depends_on.map(|d| to_db(d.0));
    let run_at = to_db(job.schedule.run_at(now));
    let now = to_db(now);
    let params: [&(dyn ToSql + Sync); 13] = [
        &job.queue,
        &job.kind,
        &job.key,
        &columns.bytes,
        &metadata,
        &retry,
        &depends_on,
        &blocked,
        &run_at,
        &now,
        &sql.channel,
        &sql.due_channel,
        &columns.json,
    ];
    db_.rows(&sql.enqueue_one, &params)
        .await
        .map_err(|e| db(e, sql.schema.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_single_job_without_a_unique_key_is_lone() {
        let plain = NewJob::new("q", "k", Vec::new());
        assert!(lone(std::slice::from_ref(&plain)).is_some());
        assert!(lone(&[plain.clone(), plain.clone()]).is_none());
        assert!(lone(&[]).is_none());
        assert!(lone(&[plain.unique("u", fairq_worker::OnConflict::Error)]).is_none());
    }
}
