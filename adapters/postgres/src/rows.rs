//! Conversions between rows and the job model.

use std::collections::BTreeMap;
use std::time::Duration;

use fairq_core::job::{DeadReason, Lease, LeaseToken, Lifecycle, Millis, State};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{BackendError, Claim, Job, JobId, JobInfo};
use serde_json::Value;
use tokio_postgres::types::Json;
use tokio_postgres::Row;

use crate::error::corrupt;
use crate::payload;

/// Milliseconds as stored (bigint), saturating.
pub(crate) fn to_db(ms: Millis) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Stored milliseconds back (negative values read as 0).
pub(crate) fn from_db(ms: i64) -> Millis {
    u64::try_from(ms).unwrap_or(0)
}

/// `now + lease`, as stored: never past [`MAX_MILLIS`](fairq_core::job::MAX_MILLIS), like
/// every time a store records, while `now` is in range; never before `now` (a clock already
/// past `MAX_MILLIS` gets `now + lease`, saturating, as `clamp_after` rules).
pub(crate) fn deadline(now: Millis, lease: Duration) -> i64 {
    to_db(fairq_core::job::clamp_after(now, lease))
}

/// A stored counter as `u32`, saturating.
fn count32(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

/// A retry policy as stored (`None` for the default policy).
pub(crate) fn policy_to_db(policy: Option<&RetryPolicy>) -> Result<Option<Value>, BackendError> {
    policy
        .map(|p| {
            serde_json::to_value(p).map_err(|e| BackendError::Invalid(format!("retry policy: {e}")))
        })
        .transpose()
}

/// A stored retry policy (`NULL` is the default policy).
pub(crate) fn policy_from_db(value: Option<Value>) -> Result<RetryPolicy, BackendError> {
    match value {
        None => Ok(RetryPolicy::default()),
        Some(v) => serde_json::from_value(v).map_err(|e| corrupt(format!("retry policy: {e}"))),
    }
}

/// Metadata as stored.
pub(crate) fn metadata_to_db(metadata: &BTreeMap<String, String>) -> Value {
    Value::Object(
        metadata
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

/// Stored metadata back.
pub(crate) fn metadata_from_db(value: Value) -> Result<BTreeMap<String, String>, BackendError> {
    serde_json::from_value(value).map_err(|e| corrupt(format!("metadata: {e}")))
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    index: usize,
) -> Result<T, BackendError> {
    row.try_get(index)
        .map_err(|e| corrupt(format!("column {index}: {e}")))
}

/// A `jsonb` column decoded straight from the bytes the server sent (no `Value` in between:
/// a claim decodes the retry policy and metadata of every job it takes).
fn json<'a, T: tokio_postgres::types::FromSql<'a>>(
    row: &'a Row,
    index: usize,
    what: &str,
) -> Result<T, BackendError> {
    row.try_get(index)
        .map_err(|e| corrupt(format!("{what}: {e}")))
}

/// A claimed job (columns of the claim statement).
pub(crate) fn job(row: &Row, queue: &str) -> Result<Job, BackendError> {
    Ok(Job {
        claim: Claim {
            id: JobId(from_db(get(row, 0)?)),
            token: LeaseToken(from_db(get(row, 1)?)),
        },
        attempt: count32(get(row, 2)?),
        lease_deadline: from_db(get::<Option<i64>>(row, 3)?.unwrap_or(0)),
        queue: queue.to_string(),
        kind: get(row, 4)?,
        key: get(row, 5)?,
        payload: payload::join(get(row, 6)?, get(row, 11)?)?,
        enqueued_at: from_db(get(row, 7)?),
        run_at: from_db(get(row, 8)?),
        retry: json::<Option<Json<RetryPolicy>>>(row, 9, "retry policy")?
            .map_or_else(RetryPolicy::default, |Json(policy)| policy),
        metadata: json::<Json<BTreeMap<String, String>>>(row, 10, "metadata")?.0,
    })
}

/// A job as operators see it, and its lifecycle (the info columns).
pub(crate) fn info(row: &Row) -> Result<(JobInfo, Lifecycle), BackendError> {
    let life = lifecycle(row, 4)?;
    let state = *life.state();
    let attempts = life.attempts();
    let run_at = from_db(get(row, 5)?);
    let info = JobInfo {
        id: JobId(from_db(get(row, 0)?)),
        queue: get(row, 1)?,
        kind: get(row, 2)?,
        key: get(row, 3)?,
        state,
        attempts,
        enqueued_at: from_db(get(row, 11)?),
        last_error: get(row, 12)?,
        unique_key: get(row, 13)?,
        depends_on: get::<Option<i64>>(row, 14)?.map(|d| JobId(from_db(d))),
        payload: payload::join(get(row, 15)?, get(row, 19)?)?,
        metadata: metadata_from_db(get(row, 16)?)?,
        run_at: get::<Option<i64>>(row, 17)?.map_or(run_at, from_db),
        started_at: get::<Option<i64>>(row, 18)?.map(from_db),
    };
    Ok((info, life))
}

/// A job's lifecycle from seven columns starting at `at`: state, run_at, attempts, token,
/// lease deadline, finish time, dead reason (the order of the info columns).
pub(crate) fn lifecycle(row: &Row, at: usize) -> Result<Lifecycle, BackendError> {
    let state_name: String = get(row, at)?;
    let run_at = from_db(get(row, at + 1)?);
    let attempts = count32(get(row, at + 2)?);
    let token = from_db(get(row, at + 3)?);
    let lease_deadline: Option<i64> = get(row, at + 4)?;
    let finished_at: Option<i64> = get(row, at + 5)?;
    let dead_reason: Option<String> = get(row, at + 6)?;
    let state = match state_name.as_str() {
        "blocked" => State::Blocked,
        "scheduled" => State::Scheduled { run_at },
        "retrying" => State::Retrying { run_at },
        "running" => State::Running {
            lease: Lease {
                token: LeaseToken(token),
                deadline: from_db(lease_deadline.unwrap_or(0)),
                attempt: attempts,
            },
        },
        "succeeded" => State::Succeeded {
            at: from_db(finished_at.unwrap_or(0)),
        },
        "dead" => State::Dead {
            at: from_db(finished_at.unwrap_or(0)),
            reason: match dead_reason.as_deref() {
                Some("lease_expired") => DeadReason::LeaseExpired,
                Some("discarded") => DeadReason::Discarded,
                _ => DeadReason::RetriesExhausted,
            },
        },
        other => return Err(corrupt(format!("unknown job state {other:?}"))),
    };
    Ok(Lifecycle::restore(state, attempts, token))
}

/// The stored name of a dead reason.
pub(crate) fn reason_name(reason: DeadReason) -> &'static str {
    match reason {
        DeadReason::RetriesExhausted => "retries_exhausted",
        DeadReason::LeaseExpired => "lease_expired",
        DeadReason::Discarded => "discarded",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_saturate_instead_of_wrapping() {
        assert_eq!(to_db(u64::MAX), i64::MAX);
        assert_eq!(from_db(-5), 0);
        assert_eq!(from_db(to_db(123)), 123);
        // Deadlines stop at the latest time a store records, whatever the lease, and never
        // come before the clock's time, even a clock past that latest time.
        let latest = to_db(fairq_core::job::MAX_MILLIS);
        assert_eq!(deadline(1_000, Duration::MAX), latest);
        assert_eq!(
            deadline(fairq_core::job::MAX_MILLIS - 1_000, Duration::from_secs(5)),
            latest
        );
        assert_eq!(deadline(u64::MAX - 1, Duration::from_secs(5)), i64::MAX);
        assert_eq!(deadline(1_000, Duration::from_secs(5)), 6_000);
    }

    #[test]
    fn policies_and_metadata_round_trip() {
        let policy = RetryPolicy::new(3).with_delays([Duration::from_secs(2)]);
        let stored = policy_to_db(Some(&policy)).unwrap();
        assert_eq!(policy_from_db(stored).unwrap(), policy);
        assert_eq!(policy_from_db(None).unwrap(), RetryPolicy::default());
        let mut meta = BTreeMap::new();
        meta.insert("trace".to_string(), "abc".to_string());
        assert_eq!(metadata_from_db(metadata_to_db(&meta)).unwrap(), meta);
        assert!(metadata_from_db(Value::from(3)).is_err());
    }
}
