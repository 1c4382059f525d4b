//! The job model shared by every store: what is enqueued, what a worker claims, what an
//! operator lists.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fairq_core::job::{LeaseToken, MAX_MILLIS, Millis, State, check_time};
use fairq_core::retry::RetryPolicy;
use serde::{Deserialize, Serialize};

use crate::codec::{Codec, CodecError, JsonCodec};

/// A job's identity within its store, assigned at enqueue.
///
/// ```
/// assert_eq!(fairq_worker::JobId(7).to_string(), "7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What to do when a job's unique key is already taken by a job that has not finished.
///
/// ```
/// use fairq_worker::{NewJob, OnConflict};
/// let job = NewJob::new("mail", "welcome", b"{}".to_vec()).unique("user-42", OnConflict::Ignore);
/// assert_eq!(job.on_conflict, OnConflict::Ignore);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OnConflict {
    /// Fail the enqueue with [`BackendError::Duplicate`](crate::BackendError::Duplicate).
    #[default]
    Error,
    /// Enqueue nothing and return the existing job's id.
    Ignore,
}

/// The longest queue name or job kind, in bytes: every store refuses a longer one
/// ([`NewJob::check`]). Names are identifiers, and PostgreSQL puts queue names in its
/// wake-up notices (8,000 bytes at most) and its indexes.
///
/// ```
/// assert_eq!(fairq_worker::MAX_NAME_LEN, 255);
/// ```
pub const MAX_NAME_LEN: usize = 255;

/// The longest fairness key or unique key, in bytes: every store refuses a longer one
/// ([`NewJob::check`]). PostgreSQL indexes them with the queue name, and an index entry
/// holds at most about 2,700 bytes.
///
/// ```
/// assert_eq!(fairq_worker::MAX_KEY_LEN, 1_024);
/// ```
pub const MAX_KEY_LEN: usize = 1_024;

/// The most bytes of payload and metadata (names and values) one enqueue call may carry,
/// over all of its jobs: 256 MiB. Every store refuses a larger call whole with
/// [`BackendError::Invalid`](crate::BackendError::Invalid) before sending or storing anything
/// ([`check_call_size`]), below what the narrowest of them takes in one request (Redis's
/// 512 MB argument, the file store's 512 MiB message to its owning process).
///
/// ```
/// assert_eq!(fairq_worker::MAX_CALL_BYTES, 256 << 20);
/// ```
pub const MAX_CALL_BYTES: usize = 256 << 20;

/// Refuses a batch of jobs whose payloads and metadata together exceed [`MAX_CALL_BYTES`],
/// with the same message in every store.
///
/// ```
/// use fairq_worker::{check_call_size, NewJob, MAX_CALL_BYTES};
/// let half = || NewJob::new("q", "k", vec![0; MAX_CALL_BYTES / 2]);
/// assert!(check_call_size(&[half(), half()]).is_ok());
/// let err = check_call_size(&[half(), half(), NewJob::new("q", "k", vec![0])]).unwrap_err();
/// assert!(err.to_string().contains("at most 268435456"));
/// ```
pub fn check_call_size(jobs: &[NewJob]) -> Result<(), crate::BackendError> {
    let bytes = jobs
        .iter()
        .fold(0usize, |sum, job| sum.saturating_add(job.carried_bytes()));
    if bytes > MAX_CALL_BYTES {
        return Err(crate::BackendError::Invalid(format!(
            "{bytes} bytes of payload and metadata in one call: at most {MAX_CALL_BYTES} \
             are allowed"
        )));
    }
    Ok(())
}

/// Checks a queue name the way every store does before it stores one (an enqueue, a pause)
/// or looks one up (a claim, a filter): not empty, at most [`MAX_NAME_LEN`] bytes, no NUL
/// character. The error is [`BackendError::Invalid`](crate::BackendError::Invalid), the same
/// from every store.
///
/// ```
/// use fairq_worker::check_queue_name;
/// assert!(check_queue_name("emails").is_ok());
/// assert!(check_queue_name("").is_err());
/// assert!(check_queue_name("a\0b").is_err());
/// assert!(check_queue_name(&"q".repeat(256)).unwrap_err().to_string().contains("at most 255"));
/// ```
pub fn check_queue_name(queue: &str) -> Result<(), crate::BackendError> {
    use crate::BackendError::Invalid;
    match queue_name_problem(queue) {
        None => Ok(()),
        Some(_) if queue.len() > MAX_NAME_LEN => Err(Invalid(format!(
            "the queue name is {} bytes long: at most {MAX_NAME_LEN} are allowed",
            queue.len()
        ))),
        Some(problem) => Err(Invalid(problem.into())),
    }
}

/// Refuses a time to hold retries until ([`Backend::hold_retries`](crate::Backend::hold_retries))
/// that is past the end of the year 9999 ([`MAX_MILLIS`]), the last time a store records.
///
/// ```
/// use fairq_core::job::MAX_MILLIS;
/// use fairq_worker::check_hold_until;
/// assert!(check_hold_until(MAX_MILLIS).is_ok());
/// assert!(check_hold_until(MAX_MILLIS + 1).is_err());
/// ```
pub fn check_hold_until(until: Millis) -> Result<(), crate::BackendError> {
    check_time(until)
        .map(drop)
        .map_err(|e| crate::BackendError::Invalid(format!("hold retries until: {e}")))
}

/// Why `queue` cannot name a queue, if it cannot (what [`check_queue_name`] refuses).
pub(crate) fn queue_name_problem(queue: &str) -> Option<&'static str> {
    if queue.is_empty() {
        Some("the queue name is empty")
    } else if queue.len() > MAX_NAME_LEN {
        Some("the queue name is longer than 255 bytes")
    } else if queue.bytes().any(|b| b == 0) {
        Some("the queue name holds a NUL character")
    } else {
        None
    }
}

/// A job to enqueue.
///
/// ```
/// use std::time::Duration;
/// use fairq_worker::NewJob;
///
/// let job = NewJob::json("email", "welcome", &serde_json::json!({"to": "a@example.com"}))
///     .unwrap()
///     .key("tenant-1")
///     .delay(Duration::from_secs(30))
///     .meta("trace_id", "abc123");
/// assert_eq!(job.key.as_deref(), Some("tenant-1"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewJob {
    /// Which workers take it.
    pub queue: String,
    /// Which handler runs it.
    pub kind: String,
    /// The fairness key (tenant); `None` shares one key with every other keyless job.
    pub key: Option<String>,
    /// The encoded payload.
    pub payload: Vec<u8>,
    /// When it may first run: absolute time, or a delay from enqueue.
    pub schedule: Schedule,
    /// Its retry policy; `None` uses the store's default ([`RetryPolicy::default`]).
    pub retry: Option<RetryPolicy>,
    /// A key unique among the queue's unfinished jobs.
    pub unique_key: Option<String>,
    /// What a taken unique key means.
    pub on_conflict: OnConflict,
    /// A job that must succeed before this one runs.
    pub depends_on: Option<JobId>,
    /// Context captured at enqueue (a trace id, the enqueuing user, ...), handed to the handler.
    pub metadata: BTreeMap<String, String>,
}

/// When a new job may first run.
///
/// ```
/// use fairq_worker::Schedule;
/// assert_eq!(Schedule::Now.run_at(100), 100);
/// assert_eq!(Schedule::After(std::time::Duration::from_millis(5)).run_at(100), 105);
/// assert_eq!(Schedule::At(7).run_at(100), 7);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Schedule {
    /// As soon as possible.
    #[default]
    Now,
    /// After a delay from enqueue.
    After(Duration),
    /// At an absolute time (ms since the Unix epoch).
    At(Millis),
}

/// Converts a wall-clock time to milliseconds since the Unix epoch (0 for times before it,
/// [`u64::MAX`] beyond what `u64` holds; stores refuse anything past
/// [`MAX_MILLIS`]).
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// assert_eq!(fairq_worker::unix_millis(UNIX_EPOCH + Duration::from_secs(2)), 2_000);
/// ```
pub fn unix_millis(at: SystemTime) -> Millis {
    at.duration_since(UNIX_EPOCH)
        .map(fairq_core::job::millis)
        .unwrap_or(0)
}

impl Schedule {
    /// The absolute time, given the enqueue time.
    ///
    /// ```
    /// assert_eq!(fairq_worker::Schedule::Now.run_at(3), 3);
    /// ```
    pub fn run_at(&self, now: Millis) -> Millis {
        match *self {
            Schedule::Now => now,
            Schedule::After(delay) => now.saturating_add(fairq_core::job::millis(delay)),
            Schedule::At(at) => at,
        }
    }
}

impl NewJob {
    /// A job with raw payload bytes.
    ///
    /// ```
    /// let job = fairq_worker::NewJob::new("q", "kind", vec![1, 2, 3]);
    /// assert_eq!(job.payload, [1, 2, 3]);
    /// ```
    pub fn new(queue: impl Into<String>, kind: impl Into<String>, payload: Vec<u8>) -> Self {
        NewJob {
            queue: queue.into(),
            kind: kind.into(),
            key: None,
            payload,
            schedule: Schedule::Now,
            retry: None,
            unique_key: None,
            on_conflict: OnConflict::Error,
            depends_on: None,
            metadata: BTreeMap::new(),
        }
    }

    /// A job whose payload is `value` encoded as JSON.
    ///
    /// ```
    /// let job = fairq_worker::NewJob::json("q", "kind", &[1, 2]).unwrap();
    /// assert_eq!(job.payload, b"[1,2]");
    /// ```
    pub fn json<T: Serialize + ?Sized>(
        queue: impl Into<String>,
        kind: impl Into<String>,
        value: &T,
    ) -> Result<Self, CodecError> {
        Self::encoded(queue, kind, &JsonCodec, value)
    }

    /// A job whose payload is `value` encoded with `codec`.
    ///
    /// ```
    /// use fairq_worker::{JsonCodec, NewJob};
    /// let job = NewJob::encoded("q", "kind", &JsonCodec, &"hi").unwrap();
    /// assert_eq!(job.payload, b"\"hi\"");
    /// ```
    pub fn encoded<C: Codec, T: Serialize + ?Sized>(
        queue: impl Into<String>,
        kind: impl Into<String>,
        codec: &C,
        value: &T,
    ) -> Result<Self, CodecError> {
        Ok(Self::new(queue, kind, codec.encode(value)?))
    }

    /// Sets the fairness key.
    ///
    /// ```
    /// let job = fairq_worker::NewJob::new("q", "k", vec![]).key("tenant");
    /// assert_eq!(job.key.as_deref(), Some("tenant"));
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Runs no earlier than `delay` after enqueue.
    ///
    /// ```
    /// use std::time::Duration;
    /// let job = fairq_worker::NewJob::new("q", "k", vec![]).delay(Duration::from_secs(1));
    /// assert_eq!(job.schedule, fairq_worker::Schedule::After(Duration::from_secs(1)));
    /// ```
    pub fn delay(mut self, delay: Duration) -> Self {
        self.schedule = Schedule::After(delay);
        self
    }

    /// Runs no earlier than `at`.
    ///
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    /// let at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    /// let job = fairq_worker::NewJob::new("q", "k", vec![]).run_at(at);
    /// assert_eq!(job.schedule, fairq_worker::Schedule::At(1_800_000_000_000));
    /// ```
    pub fn run_at(mut self, at: SystemTime) -> Self {
        self.schedule = Schedule::At(unix_millis(at));
        self
    }

    /// Runs no earlier than `at`, in milliseconds since the Unix epoch (the stores' own
    /// unit, and the time of a [`ManualClock`](crate::ManualClock) in tests).
    ///
    /// ```
    /// let job = fairq_worker::NewJob::new("q", "k", vec![]).run_at_millis(99);
    /// assert_eq!(job.schedule, fairq_worker::Schedule::At(99));
    /// ```
    pub fn run_at_millis(mut self, at: Millis) -> Self {
        self.schedule = Schedule::At(at);
        self
    }

    /// Checks what every store refuses, with the same messages everywhere, and returns the
    /// time the job becomes due if enqueued at `now`: an empty queue name or kind, a queue
    /// name or kind longer than [`MAX_NAME_LEN`], a fairness key or unique key longer than
    /// [`MAX_KEY_LEN`], a NUL character in a text field, more than [`MAX_CALL_BYTES`] of
    /// payload and metadata, or a run time past [`MAX_MILLIS`] (the end of the year 9999).
    ///
    /// ```
    /// use std::time::Duration;
    /// use fairq_worker::NewJob;
    /// assert_eq!(NewJob::new("q", "k", vec![]).check(5).unwrap(), 5);
    /// assert!(NewJob::new("", "k", vec![]).check(5).is_err());
    /// let long = "q".repeat(fairq_worker::MAX_NAME_LEN + 1);
    /// assert!(NewJob::new(long, "k", vec![]).check(5).is_err());
    /// let far = NewJob::new("q", "k", vec![]).delay(Duration::from_secs(u64::MAX));
    /// assert!(far.check(5).unwrap_err().to_string().contains("year 9999"));
    /// ```
    pub fn check(&self, now: Millis) -> Result<Millis, crate::BackendError> {
        use crate::BackendError::Invalid;
        check_queue_name(&self.queue)?;
        if self.kind.is_empty() {
            return Err(Invalid("job kind is empty".into()));
        }
        let lengths = [
            ("job kind", Some(self.kind.as_str()), MAX_NAME_LEN),
            ("fairness key", self.key.as_deref(), MAX_KEY_LEN),
            ("unique key", self.unique_key.as_deref(), MAX_KEY_LEN),
        ];
        for (what, text, most) in lengths {
            if let Some(text) = text.filter(|t| t.len() > most) {
                return Err(Invalid(format!(
                    "the {what} is {} bytes long: at most {most} are allowed",
                    text.len()
                )));
            }
        }
        // The queue name was checked above, NUL included.
        let texts = [
            Some(self.kind.as_str()),
            self.key.as_deref(),
            self.unique_key.as_deref(),
        ];
        // A byte loop: names are short, and `str::contains` sets up a searcher per call.
        let nul = |s: &str| s.bytes().any(|b| b == 0);
        let has_nul = texts.iter().flatten().any(|s| nul(s))
            || self.metadata.iter().any(|(k, v)| nul(k) || nul(v));
        if has_nul {
            return Err(Invalid(
                "text fields (queue, kind, key, unique key, metadata) cannot contain NUL \
                 characters"
                    .into(),
            ));
        }
        check_call_size(std::slice::from_ref(self))?;
        let run_at = self.schedule.run_at(now);
        check_time(run_at).map_err(|e| Invalid(format!("run time: {e}")))?;
        debug_assert!(run_at <= MAX_MILLIS);
        Ok(run_at)
    }

    /// The bytes of payload and metadata this job carries (what [`MAX_CALL_BYTES`] limits).
    fn carried_bytes(&self) -> usize {
        self.metadata
            .iter()
            .fold(self.payload.len(), |sum, (k, v)| {
                sum.saturating_add(k.len()).saturating_add(v.len())
            })
    }

    /// Uses `policy` instead of the store's default.
    ///
    /// ```
    /// use fairq_core::retry::RetryPolicy;
    /// let job = fairq_worker::NewJob::new("q", "k", vec![]).retry(RetryPolicy::new(3));
    /// assert_eq!(job.retry.unwrap().max_retries(), Some(3));
    /// ```
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Makes the job unique by `key` among its queue's unfinished jobs.
    ///
    /// ```
    /// use fairq_worker::{NewJob, OnConflict};
    /// let job = NewJob::new("q", "k", vec![]).unique("order-1", OnConflict::Error);
    /// assert_eq!(job.unique_key.as_deref(), Some("order-1"));
    /// ```
    pub fn unique(mut self, key: impl Into<String>, on_conflict: OnConflict) -> Self {
        self.unique_key = Some(key.into());
        self.on_conflict = on_conflict;
        self
    }

    /// Runs only after job `id` has succeeded.
    ///
    /// ```
    /// use fairq_worker::{JobId, NewJob};
    /// let job = NewJob::new("q", "k", vec![]).after(JobId(3));
    /// assert_eq!(job.depends_on, Some(JobId(3)));
    /// ```
    pub fn after(mut self, id: JobId) -> Self {
        self.depends_on = Some(id);
        self
    }

    /// Attaches one metadata entry.
    ///
    /// ```
    /// let job = fairq_worker::NewJob::new("q", "k", vec![]).meta("a", "b");
    /// assert_eq!(job.metadata["a"], "b");
    /// ```
    pub fn meta(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(name.into(), value.into());
        self
    }

    /// The policy this job runs under.
    ///
    /// ```
    /// let job = fairq_worker::NewJob::new("q", "k", vec![]);
    /// assert_eq!(job.effective_retry(), fairq_core::retry::RetryPolicy::default());
    /// ```
    pub fn effective_retry(&self) -> RetryPolicy {
        self.retry.clone().unwrap_or_default()
    }
}

/// Proof of a claim: the job and the fencing token of its lease.
///
/// ```
/// use fairq_core::job::LeaseToken;
/// use fairq_worker::{Claim, JobId};
/// let claim = Claim { id: JobId(1), token: LeaseToken(2) };
/// assert_eq!(claim.to_string(), "job 1 (lease#2)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Claim {
    /// The claimed job.
    pub id: JobId,
    /// The lease's fencing token.
    pub token: LeaseToken,
}

impl fmt::Display for Claim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {} ({})", self.id, self.token)
    }
}

/// A job claimed by a worker, under a lease.
///
/// ```
/// # use fairq_worker::*;
/// # use fairq_core::job::LeaseToken;
/// let job = Job::example(serde_json::to_vec(&42).unwrap());
/// let n: u32 = job.json().unwrap();
/// assert_eq!(n, 42);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Identity and fencing token; present it to complete, fail or heartbeat.
    pub claim: Claim,
    /// The queue it was claimed from.
    pub queue: String,
    /// Which handler runs it.
    pub kind: String,
    /// Its fairness key.
    pub key: Option<String>,
    /// The encoded payload.
    pub payload: Vec<u8>,
    /// The 1-based attempt this claim runs.
    pub attempt: u32,
    /// When the lease expires unless extended.
    pub lease_deadline: Millis,
    /// When it was enqueued.
    pub enqueued_at: Millis,
    /// When it became due (enqueue time, its scheduled time, or its retry time).
    pub run_at: Millis,
    /// Its retry policy.
    pub retry: RetryPolicy,
    /// Context captured at enqueue.
    pub metadata: BTreeMap<String, String>,
}

impl Job {
    /// Decodes the payload as JSON.
    ///
    /// ```
    /// let job = fairq_worker::Job::example(b"\"x\"".to_vec());
    /// assert_eq!(job.json::<String>().unwrap(), "x");
    /// assert!(job.json::<u32>().is_err());
    /// ```
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, CodecError> {
        self.decode(&JsonCodec)
    }

    /// Decodes the payload with `codec`.
    ///
    /// ```
    /// use fairq_worker::{Job, JsonCodec};
    /// let job = Job::example(b"[1]".to_vec());
    /// assert_eq!(job.decode::<_, Vec<u8>>(&JsonCodec).unwrap(), [1]);
    /// ```
    pub fn decode<C: Codec, T: serde::de::DeserializeOwned>(
        &self,
        codec: &C,
    ) -> Result<T, CodecError> {
        codec.decode(&self.payload)
    }

    /// A job as a store would hand it out, for examples and handler unit tests.
    ///
    /// ```
    /// let job = fairq_worker::Job::example(vec![]);
    /// assert_eq!(job.attempt, 1);
    /// ```
    pub fn example(payload: Vec<u8>) -> Job {
        Job {
            claim: Claim {
                id: JobId(1),
                token: LeaseToken(1),
            },
            queue: "default".into(),
            kind: "example".into(),
            key: None,
            payload,
            attempt: 1,
            lease_deadline: 30_000,
            enqueued_at: 0,
            run_at: 0,
            retry: RetryPolicy::default(),
            metadata: BTreeMap::new(),
        }
    }
}

/// The most bytes of a failure's message a store keeps as the job's last error: 16 KiB
/// ([`Failure::stored_message`]).
///
/// ```
/// assert_eq!(fairq_worker::MAX_ERROR_LEN, 16 * 1024);
/// ```
pub const MAX_ERROR_LEN: usize = 16 << 10;

/// Room kept at the end of a cut message for the note saying so.
const CUT_NOTE_ROOM: usize = 64;

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary
/// (`str::floor_char_boundary`, which needs Rust 1.91; the workspace supports 1.85).
fn prefix(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Why an attempt failed.
///
/// ```
/// let f = fairq_worker::Failure::retryable("timeout talking to smtp");
/// assert!(!f.permanent);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// A message for operators (stored as the job's last error).
    pub message: String,
    /// True when retrying cannot help (an undecodable payload): the job dies at once.
    pub permanent: bool,
}

impl Failure {
    /// The message as every store keeps it: a NUL character (which PostgreSQL's text cannot
    /// hold) becomes U+FFFD, and a message longer than [`MAX_ERROR_LEN`] bytes is cut at a
    /// character boundary and ends with a note giving its whole length. A failure is thus
    /// always recorded, whatever its handler wrote.
    ///
    /// ```
    /// use fairq_worker::{Failure, MAX_ERROR_LEN};
    /// assert_eq!(Failure::retryable("bad\0byte").stored_message(), "bad\u{FFFD}byte");
    /// let long = Failure::retryable("é".repeat(MAX_ERROR_LEN));
    /// let kept = long.stored_message();
    /// assert!(kept.len() <= MAX_ERROR_LEN && kept.starts_with("éé"));
    /// assert!(kept.ends_with(&format!("(cut from {} bytes)", 2 * MAX_ERROR_LEN)));
    /// ```
    pub fn stored_message(&self) -> std::borrow::Cow<'_, str> {
        let message = self.message.as_str();
        let has_nul = message.bytes().any(|b| b == 0);
        if !has_nul && message.len() <= MAX_ERROR_LEN {
            return std::borrow::Cow::Borrowed(message);
        }
        let head = prefix(message, MAX_ERROR_LEN);
        let mut text = head.replace('\0', "\u{FFFD}");
        if head.len() < message.len() || text.len() > MAX_ERROR_LEN {
            let kept = prefix(&text, MAX_ERROR_LEN - CUT_NOTE_ROOM).len();
            text.truncate(kept);
            text.push_str(&format!("… (cut from {} bytes)", message.len()));
        }
        std::borrow::Cow::Owned(text)
    }

    /// A failure the retry policy decides about.
    ///
    /// ```
    /// assert_eq!(fairq_worker::Failure::retryable("x").message, "x");
    /// ```
    pub fn retryable(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            permanent: false,
        }
    }

    /// A failure that kills the job whatever its policy.
    ///
    /// ```
    /// assert!(fairq_worker::Failure::permanent("bad payload").permanent);
    /// ```
    pub fn permanent(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            permanent: true,
        }
    }
}

/// A job as operators see it.
///
/// ```
/// use fairq_core::job::State;
/// use fairq_worker::{JobId, JobInfo, JobStatus};
/// let info = JobInfo::example(JobId(3), State::Scheduled { run_at: 0 });
/// assert_eq!(info.status(), JobStatus::Scheduled);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    /// Its id.
    pub id: JobId,
    /// Its queue.
    pub queue: String,
    /// Its handler kind.
    pub kind: String,
    /// Its fairness key.
    pub key: Option<String>,
    /// Where it is in its life.
    pub state: State,
    /// Attempts started.
    pub attempts: u32,
    /// When it was enqueued.
    pub enqueued_at: Millis,
    /// The last failure message, if any.
    pub last_error: Option<String>,
    /// Its unique key, if any.
    pub unique_key: Option<String>,
    /// The job it waits for, if any.
    pub depends_on: Option<JobId>,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Its metadata.
    pub metadata: BTreeMap<String, String>,
    /// When its current or last attempt became due (for a waiting job: becomes due; for a
    /// blocked job: 0, as it has no due time until its dependency succeeds).
    #[serde(default)]
    pub run_at: Millis,
    /// When its current or last attempt was claimed (`None`: never started).
    /// `started_at - run_at` is how long that attempt waited.
    #[serde(default)]
    pub started_at: Option<Millis>,
}

impl JobInfo {
    /// The state's name as an enum.
    ///
    /// ```
    /// use fairq_core::job::State;
    /// use fairq_worker::{JobId, JobInfo, JobStatus};
    /// assert_eq!(JobInfo::example(JobId(1), State::Blocked).status(), JobStatus::Blocked);
    /// ```
    pub fn status(&self) -> JobStatus {
        JobStatus::of(&self.state)
    }

    /// A minimal record, for examples and tests.
    ///
    /// ```
    /// use fairq_core::job::State;
    /// let info = fairq_worker::JobInfo::example(fairq_worker::JobId(1), State::Blocked);
    /// assert_eq!(info.queue, "default");
    /// ```
    pub fn example(id: JobId, state: State) -> JobInfo {
        JobInfo {
            id,
            queue: "default".into(),
            kind: "example".into(),
            key: None,
            state,
            attempts: 0,
            enqueued_at: 0,
            last_error: None,
            unique_key: None,
            depends_on: None,
            payload: Vec::new(),
            metadata: BTreeMap::new(),
            run_at: 0,
            started_at: None,
        }
    }
}

/// The state of a job without its data, for filters and counts.
///
/// ```
/// use fairq_worker::JobStatus;
/// assert_eq!("dead".parse::<JobStatus>().unwrap(), JobStatus::Dead);
/// assert_eq!(JobStatus::Retrying.as_str(), "retrying");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    /// Waiting for a dependency.
    Blocked,
    /// Waiting for its first run (ready or delayed).
    Scheduled,
    /// Held by a worker.
    Running,
    /// Waiting to run again after a failure.
    Retrying,
    /// Finished successfully.
    Succeeded,
    /// Given up on.
    Dead,
}

impl JobStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Blocked,
        JobStatus::Scheduled,
        JobStatus::Running,
        JobStatus::Retrying,
        JobStatus::Succeeded,
        JobStatus::Dead,
    ];

    /// The status of a lifecycle state.
    ///
    /// ```
    /// use fairq_core::job::State;
    /// assert_eq!(fairq_worker::JobStatus::of(&State::Blocked), fairq_worker::JobStatus::Blocked);
    /// ```
    pub fn of(state: &State) -> JobStatus {
        match state {
            State::Blocked => JobStatus::Blocked,
            State::Scheduled { .. } => JobStatus::Scheduled,
            State::Running { .. } => JobStatus::Running,
            State::Retrying { .. } => JobStatus::Retrying,
            State::Succeeded { .. } => JobStatus::Succeeded,
            State::Dead { .. } => JobStatus::Dead,
        }
    }

    /// The lower-case name (the same as [`State::name`]).
    ///
    /// ```
    /// assert_eq!(fairq_worker::JobStatus::Dead.as_str(), "dead");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            JobStatus::Blocked => "blocked",
            JobStatus::Scheduled => "scheduled",
            JobStatus::Running => "running",
            JobStatus::Retrying => "retrying",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Dead => "dead",
        }
    }

    /// True for `Succeeded` and `Dead`.
    ///
    /// ```
    /// assert!(fairq_worker::JobStatus::Dead.is_final());
    /// ```
    pub fn is_final(&self) -> bool {
        matches!(self, JobStatus::Succeeded | JobStatus::Dead)
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown status name.
///
/// ```
/// assert!("nope".parse::<fairq_worker::JobStatus>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown job status {0:?} (expected blocked, scheduled, running, retrying, succeeded or dead)"
)]
pub struct UnknownStatus(pub String);

impl std::str::FromStr for JobStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_string()))
    }
}
