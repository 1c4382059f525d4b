//! What travels over the store folder's socket: one [`Request`] per call, one [`Response`]
//! per request, each a postcard message behind a 4-byte little-endian length. Requests carry
//! an id so that many calls share one connection and answers may come in any order.

use std::time::Duration;

use fairq_core::job::{LeaseToken, Millis, TransitionError};
use fairq_worker::Retention;
use fairq_worker::{
    BackendError, Claim, Each, Finished, Job, JobId, JobInfo, ListFilter, NewJob, Purge,
    QueueStats, ReviveTarget, Settled, StatusCounts,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The version of this protocol; both ends must speak the same one. Version 2 added
/// `RemoveQueue` and its two errors, version 3 `SetPaused`, `Paused` and the `Names` answer,
/// version 4 a `Prune` by a retention per outcome instead of one age.
pub(crate) const PROTOCOL: u32 = 4;

/// Largest message: an enqueue of the most payload one call may carry, and room to spare.
/// Neither end sends a message larger than this (the other refuses it and drops the
/// connection): the owner cuts claims and lists short to fit (see `server.rs`).
pub(crate) const MAX_MESSAGE: usize = 512 << 20;

/// Room kept in an answer for everything but its jobs or rows: the request id, the result
/// and answer tags, the list lengths (each at most a 10-byte varint).
pub(crate) const ANSWER_OVERHEAD: usize = 64;

/// The bytes `value` takes in a message (postcard, without the length in front).
pub(crate) fn encoded_len<T: Serialize + ?Sized>(value: &T) -> usize {
    // Counting cannot fail for the store's types; an impossible failure counts as too large.
    postcard::serialize_with_flavor::<T, postcard::ser_flavors::Size, usize>(
        value,
        postcard::ser_flavors::Size::default(),
    )
    .unwrap_or(usize::MAX)
}

/// The bytes the settlement answers `answers` take in a message.
pub(crate) fn settled_len(answers: &Each<Settled>) -> usize {
    answers
        .iter()
        .map(|answer| match answer {
            Ok(settled) => encoded_len(&Ok::<&Settled, WireError>(settled)),
            Err(e) => encoded_len(&Err::<&Settled, WireError>(WireError::from(e))),
        })
        .fold(10, usize::saturating_add)
}

/// A call, numbered by the client.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Request {
    pub(crate) id: u64,
    pub(crate) call: Call,
}

/// The answer to request `id`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Response {
    pub(crate) id: u64,
    pub(crate) answer: Result<Answer, WireError>,
}

/// Every call a client can make: the [`Backend`](fairq_worker::Backend) calls and the
/// store's own accessors.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Call {
    Hello {
        protocol: u32,
    },
    Enqueue(Vec<NewJob>),
    Claim {
        queue: String,
        max: u64,
        lease: Duration,
    },
    Settle(Vec<Finished>),
    SettleAndClaim {
        batch: Vec<Finished>,
        queue: String,
        max: u64,
        lease: Duration,
    },
    Release(Vec<Claim>),
    Heartbeat {
        claims: Vec<Claim>,
        lease: Duration,
    },
    Rescue(String),
    HoldRetries {
        queue: String,
        until: Millis,
    },
    WaitForJobs {
        queue: String,
        timeout: Duration,
    },
    Stats,
    List(ListFilter),
    Get(JobId),
    Revive(ReviveTarget),
    Purge(Purge),
    Prune(Retention),
    Counts(String),
    Len,
    WakeAll,
    /// [`Inspect::cancel`](fairq_worker::Inspect::cancel): added last, so older clients
    /// still number the other calls the same.
    Cancel(JobId),
    /// [`Backend::remove_queue`](fairq_worker::Backend::remove_queue) (protocol 2).
    RemoveQueue(String),
    /// [`Inspect::set_paused`](fairq_worker::Inspect::set_paused) (protocol 3).
    SetPaused {
        queue: String,
        paused: bool,
    },
    /// [`Inspect::paused`](fairq_worker::Inspect::paused) (protocol 3).
    Paused,
}

/// The answers, one shape per call.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Answer {
    Hello {
        protocol: u32,
    },
    Ids(Vec<JobId>),
    Jobs(Vec<Job>),
    Settled(Vec<Result<Settled, WireError>>),
    SettledAndClaimed {
        settled: Vec<Result<Settled, WireError>>,
        claimed: Result<Vec<Job>, WireError>,
    },
    Units(Vec<Result<(), WireError>>),
    Deadlines(Vec<Result<Millis, WireError>>),
    Count(u64),
    Stats(Vec<QueueStats>),
    List(Vec<JobInfo>),
    Job(Option<JobInfo>),
    Counts(StatusCounts),
    Done,
    /// Queue names (protocol 3).
    Names(Vec<String>),
}

impl Answer {
    /// The answer's kind, for error messages: never its contents, which may hold payloads,
    /// metadata or keys.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Answer::Hello { .. } => "Hello",
            Answer::Ids(_) => "Ids",
            Answer::Jobs(_) => "Jobs",
            Answer::Settled(_) => "Settled",
            Answer::SettledAndClaimed { .. } => "SettledAndClaimed",
            Answer::Units(_) => "Units",
            Answer::Deadlines(_) => "Deadlines",
            Answer::Count(_) => "Count",
            Answer::Stats(_) => "Stats",
            Answer::List(_) => "List",
            Answer::Job(_) => "Job",
            Answer::Counts(_) => "Counts",
            Answer::Done => "Done",
            Answer::Names(_) => "Names",
        }
    }

    /// The claims of the jobs this answer hands over (a claim's, or a settlement's claim):
    /// whoever cannot deliver it hands them back, or the jobs would stay running under
    /// leases nobody holds until they expire, and their rescue would count an attempt.
    pub(crate) fn claims(&self) -> Vec<Claim> {
        match self {
            Answer::Jobs(jobs)
            | Answer::SettledAndClaimed {
                claimed: Ok(jobs), ..
            } => jobs.iter().map(|job| job.claim).collect(),
            _ => Vec::new(),
        }
    }
}

/// A [`BackendError`] as it travels: everything a caller matches on (not-found, fencing,
/// duplicates, ...) keeps its variant; a store failure keeps its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum WireError {
    NotFound(JobId),
    Transition {
        id: JobId,
        source: WireTransition,
    },
    Duplicate {
        queue: String,
        key: String,
        existing: JobId,
    },
    UnknownDependency(JobId),
    Invalid(String),
    Full(String),
    Unavailable(String),
    Store(String),
    Unsupported(String),
    QueueNotEmpty {
        queue: String,
        live: u64,
    },
    UnknownQueue(String),
}

/// A [`TransitionError`] as it travels (state names as text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum WireTransition {
    NotClaimable {
        state: String,
    },
    NotDue {
        run_at: Millis,
    },
    NotRunning {
        state: String,
    },
    StaleLease {
        presented: u64,
        current: Option<u64>,
    },
    LeaseNotExpired {
        deadline: Millis,
    },
    NotBlocked {
        state: String,
    },
    NotDead {
        state: String,
    },
    TokensExhausted,
}

/// The `'static` name of a job state read back from the wire ("unknown" for a name this
/// build does not know).
fn state_name(name: &str) -> &'static str {
    const NAMES: [&str; 6] = [
        "blocked",
        "scheduled",
        "running",
        "retrying",
        "succeeded",
        "dead",
    ];
    NAMES.into_iter().find(|n| *n == name).unwrap_or("unknown")
}

impl From<&TransitionError> for WireTransition {
    fn from(e: &TransitionError) -> Self {
        match *e {
            TransitionError::NotClaimable { state } => WireTransition::NotClaimable {
                state: state.into(),
            },
            TransitionError::NotDue { run_at } => WireTransition::NotDue { run_at },
            TransitionError::NotRunning { state } => WireTransition::NotRunning {
                state: state.into(),
            },
            TransitionError::StaleLease { presented, current } => WireTransition::StaleLease {
                presented: presented.0,
                current: current.map(|t| t.0),
            },
            TransitionError::LeaseNotExpired { deadline } => {
                WireTransition::LeaseNotExpired { deadline }
            }
            TransitionError::NotBlocked { state } => WireTransition::NotBlocked {
                state: state.into(),
            },
            TransitionError::NotDead { state } => WireTransition::NotDead {
                state: state.into(),
            },
            TransitionError::TokensExhausted => WireTransition::TokensExhausted,
        }
    }
}

impl From<WireTransition> for TransitionError {
    fn from(e: WireTransition) -> Self {
        match e {
            WireTransition::NotClaimable { state } => TransitionError::NotClaimable {
                state: state_name(&state),
            },
            WireTransition::NotDue { run_at } => TransitionError::NotDue { run_at },
            WireTransition::NotRunning { state } => TransitionError::NotRunning {
                state: state_name(&state),
            },
            WireTransition::StaleLease { presented, current } => TransitionError::StaleLease {
                presented: LeaseToken(presented),
                current: current.map(LeaseToken),
            },
            WireTransition::LeaseNotExpired { deadline } => {
                TransitionError::LeaseNotExpired { deadline }
            }
            WireTransition::NotBlocked { state } => TransitionError::NotBlocked {
                state: state_name(&state),
            },
            WireTransition::NotDead { state } => TransitionError::NotDead {
                state: state_name(&state),
            },
            WireTransition::TokensExhausted => TransitionError::TokensExhausted,
        }
    }
}

impl From<&BackendError> for WireError {
    fn from(e: &BackendError) -> Self {
        match e {
            BackendError::NotFound(id) => WireError::NotFound(*id),
            BackendError::Transition { id, source } => WireError::Transition {
                id: *id,
                source: source.into(),
            },
            BackendError::Duplicate {
                queue,
                key,
                existing,
            } => WireError::Duplicate {
                queue: queue.clone(),
                key: key.clone(),
                existing: *existing,
            },
            BackendError::UnknownDependency(id) => WireError::UnknownDependency(*id),
            BackendError::Invalid(m) => WireError::Invalid(m.clone()),
            BackendError::Full(m) => WireError::Full(m.clone()),
            BackendError::Unavailable(e) => WireError::Unavailable(e.to_string()),
            BackendError::Store(e) => WireError::Store(e.to_string()),
            BackendError::Unsupported(what) => WireError::Unsupported((*what).to_string()),
            BackendError::QueueNotEmpty { queue, live } => WireError::QueueNotEmpty {
                queue: queue.clone(),
                live: *live,
            },
            BackendError::UnknownQueue(queue) => WireError::UnknownQueue(queue.clone()),
        }
    }
}

impl From<BackendError> for WireError {
    fn from(e: BackendError) -> Self {
        WireError::from(&e)
    }
}

impl From<WireError> for BackendError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::NotFound(id) => BackendError::NotFound(id),
            WireError::Transition { id, source } => BackendError::Transition {
                id,
                source: source.into(),
            },
            WireError::Duplicate {
                queue,
                key,
                existing,
            } => BackendError::Duplicate {
                queue,
                key,
                existing,
            },
            WireError::UnknownDependency(id) => BackendError::UnknownDependency(id),
            WireError::Invalid(m) => BackendError::Invalid(m),
            WireError::Full(m) => BackendError::Full(m),
            WireError::Unavailable(m) => BackendError::Unavailable(m.into()),
            WireError::Store(m) => BackendError::Store(m.into()),
            // The owner runs the same store: it supports every call a client can make.
            WireError::Unsupported(m) => BackendError::Store(m.into()),
            WireError::QueueNotEmpty { queue, live } => BackendError::QueueNotEmpty { queue, live },
            WireError::UnknownQueue(queue) => BackendError::UnknownQueue(queue),
        }
    }
}

/// Each answer of a batch call, ready to send.
pub(crate) fn each_to_wire<T>(answers: Each<T>) -> Vec<Result<T, WireError>> {
    answers
        .into_iter()
        .map(|a| a.map_err(WireError::from))
        .collect()
}

/// Each answer of a batch call, as received.
pub(crate) fn each_from_wire<T>(answers: Vec<Result<T, WireError>>) -> Each<T> {
    answers
        .into_iter()
        .map(|a| a.map_err(BackendError::from))
        .collect()
}

/// Why a message could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The other end closed the connection between messages.
    Closed,
    Io(std::io::Error),
    /// The bytes are not a message of this protocol.
    Invalid(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Closed => f.write_str("the connection was closed"),
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Invalid(reason) => write!(f, "not a store message: {reason}"),
        }
    }
}

/// Encodes `message` with its length in front.
pub(crate) fn encode<T: Serialize>(message: &T) -> Result<Vec<u8>, postcard::Error> {
    let bytes = postcard::to_extend(message, vec![0u8; 4])?;
    let len = u32::try_from(bytes.len() - 4).map_err(|_| postcard::Error::SerializeBufferFull)?;
    let mut bytes = bytes;
    bytes[..4].copy_from_slice(&len.to_le_bytes());
    Ok(bytes)
}

/// Reads one message of at most `limit` bytes ([`MAX_MESSAGE`] but in tests).
pub(crate) async fn read<T: for<'de> Deserialize<'de>>(
    from: &mut (impl AsyncRead + Unpin),
    limit: usize,
) -> Result<T, ReadError> {
    let mut len = [0u8; 4];
    match from.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(ReadError::Closed),
        Err(e) => return Err(ReadError::Io(e)),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > limit {
        return Err(ReadError::Invalid(format!(
            "a message of {len} bytes (at most {limit})"
        )));
    }
    // Grown as bytes arrive, so a bogus length cannot make us allocate it up front.
    let mut buf = Vec::with_capacity(len.min(1 << 20));
    let read = (&mut *from)
        .take(len as u64)
        .read_to_end(&mut buf)
        .await
        .map_err(ReadError::Io)?;
    if read < len {
        return Err(ReadError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    postcard::from_bytes(&buf).map_err(|e| ReadError::Invalid(e.to_string()))
}

/// Writes one encoded message.
pub(crate) async fn write(to: &mut (impl AsyncWrite + Unpin), bytes: &[u8]) -> std::io::Result<()> {
    to.write_all(bytes).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn transition() -> impl Strategy<Value = TransitionError> {
        let state = prop::sample::select(vec![
            "blocked",
            "scheduled",
            "running",
            "retrying",
            "succeeded",
            "dead",
        ]);
        prop_oneof![
            state
                .clone()
                .prop_map(|state| TransitionError::NotClaimable { state }),
            any::<u64>().prop_map(|run_at| TransitionError::NotDue { run_at }),
            state
                .clone()
                .prop_map(|state| TransitionError::NotRunning { state }),
            (any::<u64>(), any::<Option<u64>>()).prop_map(|(p, c)| TransitionError::StaleLease {
                presented: LeaseToken(p),
                current: c.map(LeaseToken),
            }),
            any::<u64>().prop_map(|deadline| TransitionError::LeaseNotExpired { deadline }),
            state
                .clone()
                .prop_map(|state| TransitionError::NotBlocked { state }),
            state.prop_map(|state| TransitionError::NotDead { state }),
        ]
    }

    proptest! {
        /// Every state-machine refusal comes back as the same error, so callers (the worker's
        /// stale-lease check) see no difference between a local store and a remote one.
        #[test]
        fn transition_errors_cross_the_wire_unchanged(e in transition(), id in any::<u64>()) {
            let sent = BackendError::Transition { id: JobId(id), source: e };
            let bytes = postcard::to_allocvec(&WireError::from(&sent)).unwrap();
            let back = BackendError::from(postcard::from_bytes::<WireError>(&bytes).unwrap());
            prop_assert_eq!(back.to_string(), sent.to_string());
            prop_assert_eq!(back.is_stale_lease(), sent.is_stale_lease());
            match back {
                BackendError::Transition { source, .. } => prop_assert_eq!(source, e),
                other => prop_assert!(false, "came back as {other:?}"),
            }
        }
    }

    #[test]
    fn other_errors_keep_their_kind_and_message() {
        let cases = vec![
            BackendError::NotFound(JobId(3)),
            BackendError::Duplicate {
                queue: "q".into(),
                key: "k".into(),
                existing: JobId(1),
            },
            BackendError::UnknownDependency(JobId(8)),
            BackendError::Invalid("bad".into()),
            BackendError::Full("disk".into()),
            BackendError::Unavailable("gone".into()),
            BackendError::Store("broken".into()),
            BackendError::QueueNotEmpty {
                queue: "q".into(),
                live: 4,
            },
            BackendError::UnknownQueue("typo".into()),
        ];
        for sent in cases {
            let back = BackendError::from(WireError::from(&sent));
            assert_eq!(std::mem::discriminant(&back), std::mem::discriminant(&sent));
            assert_eq!(back.to_string(), sent.to_string());
            assert_eq!(back.is_transient(), sent.is_transient());
        }
    }

    #[test]
    fn messages_round_trip_and_bad_lengths_are_refused() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let request = Request {
                id: 7,
                call: Call::Enqueue(vec![NewJob::new("q", "k", b"payload".to_vec())]),
            };
            let bytes = encode(&request).unwrap();
            let back: Request = read(&mut bytes.as_slice(), MAX_MESSAGE).await.unwrap();
            assert_eq!(back.id, 7);
            assert!(matches!(back.call, Call::Enqueue(jobs) if jobs[0].payload == b"payload"));

            let mut huge = (MAX_MESSAGE as u32 + 1).to_le_bytes().to_vec();
            huge.extend_from_slice(&[0; 16]);
            let err = read::<Request>(&mut huge.as_slice(), MAX_MESSAGE)
                .await
                .unwrap_err();
            assert!(matches!(err, ReadError::Invalid(_)), "{err}");

            let mut cut = bytes.clone();
            cut.truncate(bytes.len() - 2);
            assert!(matches!(
                read::<Request>(&mut cut.as_slice(), MAX_MESSAGE).await,
                Err(ReadError::Io(_))
            ));
            assert!(matches!(
                read::<Request>(&mut &b""[..], MAX_MESSAGE).await,
                Err(ReadError::Closed)
            ));
            let mut garbage = 3u32.to_le_bytes().to_vec();
            garbage.extend_from_slice(&[0xff, 0xff, 0xff]);
            assert!(matches!(
                read::<Request>(&mut garbage.as_slice(), MAX_MESSAGE).await,
                Err(ReadError::Invalid(_))
            ));
        });
    }
}
