//! Conversions between stored job hashes / script replies and the worker's job types.

use std::collections::{BTreeMap, HashMap};

use fairq_core::job::{clamp_after, DeadReason, Lease, LeaseToken, Millis, State, TransitionError};
use fairq_core::retry::RetryPolicy;
use fairq_worker::{BackendError, Claim, Job, JobId, JobInfo};
use redis::Value;

use crate::error::corrupt;
use crate::keys::decode_fkey;

/// The bytes of a bulk or simple string reply.
pub(crate) fn bytes(value: &Value) -> Option<&[u8]> {
    match value {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        Value::Okay => Some(b"OK"),
        _ => None,
    }
}

/// A string reply.
pub(crate) fn text(value: &Value) -> Option<String> {
    match value {
        Value::Int(n) => Some(n.to_string()),
        other => bytes(other).map(|b| String::from_utf8_lossy(b).into_owned()),
    }
}

/// An integer reply (an integer or a decimal string).
pub(crate) fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Int(n) => u64::try_from(*n).ok(),
        other => text(other)?.parse().ok(),
    }
}

/// The elements of an array reply.
pub(crate) fn array(value: &Value) -> &[Value] {
    match value {
        Value::Array(items) => items,
        _ => &[],
    }
}

/// A script's status reply `{code, details...}` as strings.
pub(crate) fn status(name: &str, value: &Value) -> Result<Vec<String>, BackendError> {
    let items = array(value);
    if items.is_empty() {
        return Err(corrupt(
            format!("reply of {name}"),
            format!("expected a status array, got {value:?}"),
        ));
    }
    Ok(items.iter().map(|v| text(v).unwrap_or_default()).collect())
}

/// Turns a fencing refusal (`stale`, `notrunning`, `notfound`) into the lifecycle's error.
pub(crate) fn refusal(id: JobId, token: LeaseToken, reply: &[String]) -> BackendError {
    match reply.first().map(String::as_str) {
        Some("stale") => BackendError::Transition {
            id,
            source: TransitionError::StaleLease {
                presented: token,
                current: reply.get(1).and_then(|s| s.parse().ok()).map(LeaseToken),
            },
        },
        Some("notrunning") => BackendError::Transition {
            id,
            source: TransitionError::NotRunning {
                state: state_name(reply.get(1).map(String::as_str).unwrap_or("")),
            },
        },
        Some("notfound") => BackendError::NotFound(id),
        _ => corrupt(format!("job {id}"), format!("unexpected reply {reply:?}")),
    }
}

/// How a dead job's reason is stored.
pub(crate) fn reason_name(reason: DeadReason) -> &'static str {
    match reason {
        DeadReason::RetriesExhausted => "retries_exhausted",
        DeadReason::LeaseExpired => "lease_expired",
        DeadReason::Discarded => "discarded",
    }
}

/// A stored reason (an unknown one reads as retries exhausted).
pub(crate) fn dead_reason(raw: &str) -> DeadReason {
    match raw {
        "lease_expired" => DeadReason::LeaseExpired,
        "discarded" => DeadReason::Discarded,
        _ => DeadReason::RetriesExhausted,
    }
}

/// The id and token of a claim reply row, when at least those parse.
pub(crate) fn claim_of(row: &Value) -> Option<Claim> {
    let f = array(row);
    Some(Claim {
        id: JobId(number(f.first()?)?),
        token: LeaseToken(number(f.get(5)?)?),
    })
}

/// The static name of a stored state.
pub(crate) fn state_name(raw: &str) -> &'static str {
    match raw {
        "blocked" => "blocked",
        "scheduled" => "scheduled",
        "running" => "running",
        "retrying" => "retrying",
        "succeeded" => "succeeded",
        "dead" => "dead",
        _ => "unknown",
    }
}

/// Parses a retry policy as stored (JSON).
pub(crate) fn policy(id: JobId, raw: &[u8]) -> Result<RetryPolicy, BackendError> {
    serde_json::from_slice(raw).map_err(|e| corrupt(format!("job {id}"), format!("retry: {e}")))
}

fn metadata(id: JobId, raw: &[u8]) -> Result<BTreeMap<String, String>, BackendError> {
    serde_json::from_slice(raw).map_err(|e| corrupt(format!("job {id}"), format!("meta: {e}")))
}

fn parse_u64(id: JobId, field: &str, raw: Option<&[u8]>) -> Result<u64, BackendError> {
    let raw = raw.ok_or_else(|| corrupt(format!("job {id}"), format!("missing {field}")))?;
    std::str::from_utf8(raw)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| corrupt(format!("job {id}"), format!("{field} is not a number")))
}

fn utf8(id: JobId, field: &str, raw: &[u8]) -> Result<String, BackendError> {
    String::from_utf8(raw.to_vec())
        .map_err(|_| corrupt(format!("job {id}"), format!("{field} is not UTF-8")))
}

/// A job as `claim.lua` returns it:
/// `{id, kind, fkey, payload, attempt, token, deadline, enq, due, retry, meta}`.
pub(crate) fn claimed(queue: &str, row: &Value) -> Result<Job, BackendError> {
    let f = array(row);
    if f.len() != 11 {
        return Err(corrupt(
            "claim reply",
            format!("expected 11 fields, got {row:?}"),
        ));
    }
    let field = |i: usize| bytes(&f[i]);
    let id = JobId(number(&f[0]).ok_or_else(|| corrupt("claim reply", "bad id"))?);
    let get = |i: usize, name: &str| parse_u64(id, name, field(i));
    let raw = |i: usize, name: &str| {
        field(i).ok_or_else(|| corrupt(format!("job {id}"), format!("missing {name}")))
    };
    Ok(Job {
        claim: Claim {
            id,
            token: LeaseToken(get(5, "token")?),
        },
        queue: queue.to_string(),
        kind: utf8(id, "kind", raw(1, "kind")?)?,
        key: decode_fkey(&utf8(id, "fkey", raw(2, "fkey")?)?),
        payload: raw(3, "payload")?.to_vec(),
        attempt: u32::try_from(get(4, "attempt")?).unwrap_or(u32::MAX),
        lease_deadline: get(6, "deadline")?,
        enqueued_at: get(7, "enq")?,
        run_at: get(8, "due")?,
        retry: policy(id, raw(9, "retry")?)?,
        metadata: metadata(id, raw(10, "meta")?)?,
    })
}

/// A job hash as `HGETALL` returns it.
pub(crate) fn info(
    queue: &str,
    id: JobId,
    hash: &HashMap<String, Vec<u8>>,
) -> Result<JobInfo, BackendError> {
    let field = |name: &str| hash.get(name).map(Vec::as_slice);
    let num = |name: &str| parse_u64(id, name, field(name));
    let string = |name: &str| field(name).map(|raw| utf8(id, name, raw)).transpose();
    let state_raw = string("state")?.ok_or_else(|| corrupt(format!("job {id}"), "no state"))?;
    let attempts = u32::try_from(num("attempts")?).unwrap_or(u32::MAX);
    let state = match state_raw.as_str() {
        "blocked" => State::Blocked,
        "scheduled" => State::Scheduled {
            run_at: num("run_at")?,
        },
        "retrying" => State::Retrying {
            run_at: num("run_at")?,
        },
        "running" => State::Running {
            lease: Lease {
                token: LeaseToken(num("token")?),
                deadline: num("deadline")?,
                attempt: attempts,
            },
        },
        "succeeded" => State::Succeeded { at: num("at")? },
        "dead" => State::Dead {
            at: num("at")?,
            reason: dead_reason(string("reason")?.as_deref().unwrap_or("")),
        },
        other => {
            return Err(corrupt(
                format!("job {id}"),
                format!("unknown state {other:?}"),
            ))
        }
    };
    Ok(JobInfo {
        id,
        queue: queue.to_string(),
        kind: string("kind")?.unwrap_or_default(),
        key: string("fkey")?.as_deref().and_then(decode_fkey),
        state,
        attempts,
        enqueued_at: num("enq")?,
        last_error: string("last_error")?,
        unique_key: string("uniq")?.map(|u| u.strip_prefix('+').unwrap_or(&u).to_string()),
        depends_on: field("dep").map(|_| num("dep").map(JobId)).transpose()?,
        payload: field("payload").unwrap_or_default().to_vec(),
        metadata: field("meta")
            .map(|m| metadata(id, m))
            .transpose()?
            .unwrap_or_default(),
        run_at: field("due").map(|_| num("due")).transpose()?.unwrap_or(0),
        started_at: field("claimed_at").map(|_| num("claimed_at")).transpose()?,
    })
}

/// Milliseconds as a script argument.
pub(crate) fn ms(value: Millis) -> String {
    value.to_string()
}

/// A lease as a script argument: its length in milliseconds from `now`, cut so that the
/// deadline the script computes (`now + lease`) stays within
/// [`MAX_MILLIS`](fairq_core::job::MAX_MILLIS) like every time
/// a store records. A longer one (`Duration::MAX`) reached the script as a number past what
/// a Lua number holds exactly, and the job's stored deadline no longer read back as one:
/// the claim discarded the job as damaged.
pub(crate) fn lease_ms(now: Millis, lease: std::time::Duration) -> String {
    (clamp_after(now, lease).saturating_sub(now)).to_string()
}

/// The largest count a script gets: 2^53 - 1, the last integer a Lua number (a double)
/// holds exactly. Larger counts (`usize::MAX` for "all there are") reached Redis as numbers
/// its commands refuse (`ZPOPMIN` answered "value is out of range").
pub(crate) const MAX_COUNT: usize = (1 << 53) - 1;

/// A count (of jobs to claim or promote) as a script argument, capped at [`MAX_COUNT`].
pub(crate) fn count(n: usize) -> String {
    n.min(MAX_COUNT).to_string()
}
