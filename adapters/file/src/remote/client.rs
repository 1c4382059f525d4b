//! A process that opened a store folder held by another process: every call goes to the
//! owner over the folder's socket.
//!
//! One connection carries every call of this handle (and its clones): a thread with its own
//! small runtime writes the requests and reads the answers, which find their callers by
//! request id, so the handle works under any runtime (or none, for the blocking accessors).
//! When the owner goes away, calls in flight fail with [`BackendError::Unavailable`] (they
//! may or may not have taken effect) and the next call connects again, to whichever process
//! serves the folder by then.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairq_core::job::Millis;
use fairq_worker::Retention;
use fairq_worker::{
    Backend, BackendError, Claim, Clock, Each, Finished, Job, JobId, JobInfo, ListFilter,
    LiveCounts, NewJob, Purge, QueueStats, ReviveTarget, Settled, SettledAndClaimed, StatusCounts,
};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};

use super::address::{Address, socket_path};
use super::wire::{
    Answer, Call, PROTOCOL, ReadError, Request, Response, WireError, each_from_wire, encode, read,
    write,
};
use crate::error::FileError;
use crate::writer::lock;

/// How long a client's `wait_for_jobs` pauses when the owner cannot be reached, before
/// it returns for the caller to try again.
const UNREACHABLE_PAUSE: Duration = Duration::from_secs(1);
/// How long the handshake with the owner may take.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// How long a blocking accessor waits for its answer.
const BLOCKING_WAIT: Duration = Duration::from_secs(30);

/// Where an answer goes.
enum Reply {
    Async(oneshot::Sender<Result<Answer, WireError>>),
    Blocking(std::sync::mpsc::Sender<Result<Answer, WireError>>),
    /// Nobody: the release of jobs whose claim's caller stopped waiting (see
    /// [`hand_back`]). A failure is logged.
    HandBack,
}

impl Reply {
    /// Hands `answer` to its caller; gives it back when the caller has stopped waiting.
    fn send(self, answer: Result<Answer, WireError>) -> Option<Result<Answer, WireError>> {
        match self {
            Reply::Async(tx) => tx.send(answer).err(),
            Reply::Blocking(tx) => tx.send(answer).err().map(|e| e.0),
            Reply::HandBack => {
                let refused = match answer {
                    Ok(Answer::Units(each)) => each.iter().filter(|one| one.is_err()).count(),
                    _ => 1,
                };
                if refused > 0 {
                    tracing::warn!(
                        refused,
                        "could not release some jobs of a claim whose caller stopped waiting; they are rescued when their leases expire"
                    );
                }
                None
            }
        }
    }
}

/// Releases the jobs `answer` hands over (a claim's) when nobody will run them: the caller
/// stopped waiting for it (its future was dropped, by a timeout or a `select!`). Otherwise
/// they would stay running under leases nobody holds until these expire, and their rescue
/// would count an attempt that never ran. The release goes on the same connection; should
/// that be gone, the owner has released them itself (it could not deliver the answer) or
/// the caller's call failed before the answer came.
fn hand_back(calls: &mpsc::UnboundedSender<Outgoing>, answer: &Answer) {
    let claims = answer.claims();
    if claims.is_empty() {
        return;
    }
    let _ = calls.send(Outgoing {
        call: Call::Release(claims),
        reply: Reply::HandBack,
    });
}

struct Outgoing {
    call: Call,
    reply: Reply,
}

/// Why no connection could be made.
pub(crate) enum ConnectFailure {
    /// Nobody serves the socket (it is missing, or left by a process that died).
    NotServed(String),
    /// Something else went wrong.
    Failed(FileError),
}

/// One connection to the owner and the thread that runs it.
struct Connection {
    calls: mpsc::UnboundedSender<Outgoing>,
    lost: Arc<AtomicBool>,
    /// Dropped to end the connection's thread.
    _stop: oneshot::Sender<()>,
}

impl Connection {
    /// Connects to the owner of `dir`; no message over `limit` bytes is sent or accepted.
    fn open(dir: &Path, limit: usize) -> Result<Connection, ConnectFailure> {
        let path = socket_path(dir);
        let stream = match Address::of(dir).map_err(ConnectFailure::Failed)?.connect() {
            Ok(stream) => stream,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Err(ConnectFailure::NotServed(format!(
                    "{}: {e}",
                    path.display()
                )));
            }
            Err(e) => return Err(ConnectFailure::Failed(FileError::io(&path, e))),
        };
        stream
            .set_nonblocking(true)
            .map_err(|e| ConnectFailure::Failed(FileError::io(&path, e)))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ConnectFailure::Failed(FileError::io(&path, e)))?;
        let (calls, outgoing) = mpsc::unbounded_channel();
        let releases = calls.downgrade();
        let (stop, stopped) = oneshot::channel();
        let lost = Arc::new(AtomicBool::new(false));
        let (ready, handshake) = std::sync::mpsc::channel();
        let thread_lost = lost.clone();
        std::thread::Builder::new()
            .name("fairq-file-client".into())
            .spawn(move || {
                runtime.block_on(run(stream, outgoing, releases, stopped, ready, limit));
                thread_lost.store(true, Ordering::Release);
            })
            .map_err(|e| ConnectFailure::Failed(FileError::io(&path, e)))?;
        match handshake.recv_timeout(HANDSHAKE) {
            Ok(Ok(())) => Ok(Connection {
                calls,
                lost,
                _stop: stop,
            }),
            // The owner may be on its way out (killed, or a child it was forking still holds
            // its socket for a moment): its lock goes with it, so this is retried like a
            // socket nobody serves.
            Ok(Err(Handshake::Gone(reason))) => Err(ConnectFailure::NotServed(format!(
                "{}: the connection ended during the handshake ({reason})",
                path.display()
            ))),
            Ok(Err(Handshake::Refused(reason))) => {
                Err(ConnectFailure::Failed(FileError::Protocol { path, reason }))
            }
            Err(_) => Err(ConnectFailure::NotServed(format!(
                "{}: no answer to the handshake",
                path.display()
            ))),
        }
    }
}

/// Why a handshake failed.
enum Handshake {
    /// The connection broke or ended (reset, closed): the owner is going away.
    Gone(String),
    /// The owner answered, but not as this build expects.
    Refused(String),
}

/// The connection's thread: the handshake, then requests out and answers in until either
/// side stops. A call whose request would be over `limit` bytes is refused here: the owner
/// would drop the connection, and every call in flight on it. Jobs claimed for a caller that
/// stopped waiting are released through `releases` (see [`hand_back`]).
async fn run(
    stream: std::os::unix::net::UnixStream,
    mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
    releases: mpsc::WeakUnboundedSender<Outgoing>,
    stopped: oneshot::Receiver<()>,
    ready: std::sync::mpsc::Sender<Result<(), Handshake>>,
    limit: usize,
) {
    let stream = match UnixStream::from_std(stream) {
        Ok(stream) => stream,
        Err(e) => {
            let _ = ready.send(Err(Handshake::Refused(e.to_string())));
            return;
        }
    };
    let (mut from, mut to) = stream.into_split();
    let hello = Request {
        id: 0,
        call: Call::Hello { protocol: PROTOCOL },
    };
    let greeted = async {
        let bytes = encode(&hello).map_err(|e| Handshake::Refused(e.to_string()))?;
        write(&mut to, &bytes)
            .await
            .map_err(|e| Handshake::Gone(e.to_string()))?;
        let answer = read::<Response>(&mut from, limit).await.map_err(|e| match e {
            ReadError::Invalid(_) => Handshake::Refused(e.to_string()),
            ReadError::Closed | ReadError::Io(_) => Handshake::Gone(e.to_string()),
        })?;
        match answer {
            Response {
                id: 0,
                answer: Ok(Answer::Hello { protocol }),
            } if protocol == PROTOCOL => Ok(()),
            Response {
                answer: Ok(Answer::Hello { protocol }),
                ..
            } => Err(Handshake::Refused(format!(
                "the owner speaks protocol {protocol}, this build {PROTOCOL}; use the same fairq version for both"
            ))),
            other => Err(Handshake::Refused(unexpected_hello(&other))),
        }
    }
    .await;
    let failed = greeted.is_err();
    let _ = ready.send(greeted);
    if failed {
        return;
    }
    let waiting: Arc<Mutex<HashMap<u64, Reply>>> = Arc::default();
    let sender = {
        let waiting = waiting.clone();
        async move {
            let mut next = 0u64;
            while let Some(Outgoing { call, reply }) = outgoing.recv().await {
                next += 1;
                let bytes = match encode(&Request { id: next, call }) {
                    Ok(bytes) if bytes.len() - 4 > limit => {
                        let _ = reply.send(Err(WireError::Invalid(format!(
                            "the call takes {} bytes, more than the store's owner accepts ({limit}); send less at a time",
                            bytes.len() - 4
                        ))));
                        continue;
                    }
                    Ok(bytes) => bytes,
                    Err(e) => {
                        let _ = reply.send(Err(WireError::Invalid(format!(
                            "cannot encode the call: {e}"
                        ))));
                        continue;
                    }
                };
                lock(&waiting).insert(next, reply);
                if write(&mut to, &bytes).await.is_err() {
                    break;
                }
            }
        }
    };
    let receiver = {
        let waiting = waiting.clone();
        async move {
            while let Ok(Response { id, answer }) = read::<Response>(&mut from, limit).await {
                let Some(reply) = lock(&waiting).remove(&id) else {
                    continue;
                };
                if let Some(Ok(answer)) = reply.send(answer)
                    && let Some(calls) = releases.upgrade()
                {
                    hand_back(&calls, &answer);
                }
            }
        }
    };
    tokio::select! {
        _ = sender => {}
        _ = receiver => {}
        _ = stopped => {}
    }
    // Calls still waiting never get an answer: their senders are dropped here.
    lock(&waiting).clear();
}

/// The client side of a shared store folder.
pub(crate) struct Client {
    dir: PathBuf,
    clock: Arc<dyn Clock>,
    /// The largest message sent or accepted ([`MAX_MESSAGE`](super::wire::MAX_MESSAGE)
    /// but in tests).
    limit: usize,
    connection: Mutex<Option<Arc<Connection>>>,
    closed: AtomicBool,
}

impl Client {
    /// Connects to the process serving `dir`; no message over `limit` bytes is sent or
    /// accepted.
    pub(crate) fn connect(
        dir: &Path,
        clock: Arc<dyn Clock>,
        limit: usize,
    ) -> Result<Client, ConnectFailure> {
        let connection = Connection::open(dir, limit)?;
        Ok(Client {
            dir: dir.to_path_buf(),
            clock,
            limit,
            connection: Mutex::new(Some(Arc::new(connection))),
            closed: AtomicBool::new(false),
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn now(&self) -> Millis {
        self.clock.now()
    }

    /// Ends the connection; later calls fail with [`FileError::Closed`].
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        lock(&self.connection).take();
    }

    /// The live connection, made again if the last one was lost.
    fn connection(&self) -> Result<Arc<Connection>, BackendError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(FileError::Closed.into());
        }
        let mut slot = lock(&self.connection);
        if let Some(connection) = slot.as_ref()
            && !connection.lost.load(Ordering::Acquire)
        {
            return Ok(connection.clone());
        }
        *slot = None;
        match Connection::open(&self.dir, self.limit) {
            Ok(connection) => {
                let connection = Arc::new(connection);
                *slot = Some(connection.clone());
                Ok(connection)
            }
            Err(ConnectFailure::NotServed(why)) => Err(BackendError::Unavailable(
                format!(
                    "no process serves store folder {} any more ({why}); open the store again to take it over",
                    self.dir.display()
                )
                .into(),
            )),
            Err(ConnectFailure::Failed(e)) => Err(BackendError::Unavailable(Box::new(e))),
        }
    }

    fn lost(&self) -> BackendError {
        BackendError::Unavailable(
            format!(
                "the connection to the process serving store folder {} was lost; the call may or may not have taken effect",
                self.dir.display()
            )
            .into(),
        )
    }

    /// Sends `call` and waits for its answer. Dropping the future does not take the call
    /// back (it may be sent and done still), but the jobs a claim's answer hands over are
    /// released (see [`hand_back`]): nobody would run them.
    async fn call(&self, call: Call) -> Result<Answer, BackendError> {
        let connection = self.connection()?;
        let (tx, rx) = oneshot::channel();
        let sent = connection.calls.send(Outgoing {
            call,
            reply: Reply::Async(tx),
        });
        if sent.is_err() {
            connection.lost.store(true, Ordering::Release);
            return Err(self.lost());
        }
        let mut waiting = Waiting {
            rx,
            calls: connection.calls.clone(),
            answered: false,
        };
        let answer = (&mut waiting.rx).await;
        waiting.answered = true;
        match answer {
            Ok(answer) => answer.map_err(BackendError::from),
            Err(_) => {
                connection.lost.store(true, Ordering::Release);
                Err(self.lost())
            }
        }
    }

    /// Sends `call` and blocks this thread until its answer (for the synchronous accessors).
    fn call_blocking(&self, call: Call) -> Result<Answer, BackendError> {
        let connection = self.connection()?;
        let (tx, rx) = std::sync::mpsc::channel();
        let sent = connection.calls.send(Outgoing {
            call,
            reply: Reply::Blocking(tx),
        });
        if sent.is_err() {
            connection.lost.store(true, Ordering::Release);
            return Err(self.lost());
        }
        match rx.recv_timeout(BLOCKING_WAIT) {
            Ok(answer) => answer.map_err(BackendError::from),
            Err(_) => Err(self.lost()),
        }
    }

    pub(crate) fn len(&self) -> Result<usize, BackendError> {
        match self.call_blocking(Call::Len)? {
            Answer::Count(n) => Ok(usize::try_from(n).unwrap_or(usize::MAX)),
            other => Err(unexpected(&other)),
        }
    }

    pub(crate) fn counts(&self, queue: &str) -> Result<StatusCounts, BackendError> {
        match self.call_blocking(Call::Counts(queue.to_string()))? {
            Answer::Counts(counts) => Ok(counts),
            other => Err(unexpected(&other)),
        }
    }

    pub(crate) fn wake_all(&self) {
        if let Err(e) = self.call_blocking(Call::WakeAll) {
            tracing::warn!(error = %e, "could not wake the store's waiters");
        }
    }

    async fn count(&self, call: Call) -> Result<u64, BackendError> {
        match self.call(call).await? {
            Answer::Count(n) => Ok(n),
            other => Err(unexpected(&other)),
        }
    }
}

impl Client {
    /// Cancels job `id` at the owner ([`crate::cancel`]).
    pub(crate) async fn cancel(&self, id: JobId) -> Result<(), BackendError> {
        match self.call(Call::Cancel(id)).await? {
            Answer::Done => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// Pauses or resumes `queue` at the owner ([`crate::pause`]).
    pub(crate) async fn set_paused(&self, queue: &str, paused: bool) -> Result<(), BackendError> {
        let call = Call::SetPaused {
            queue: queue.to_string(),
            paused,
        };
        match self.call(call).await? {
            Answer::Done => Ok(()),
            other => Err(unexpected(&other)),
        }
    }

    /// The owner's paused queues.
    pub(crate) async fn paused(&self) -> Result<Vec<String>, BackendError> {
        match self.call(Call::Paused).await? {
            Answer::Names(names) => Ok(names),
            other => Err(unexpected(&other)),
        }
    }
}

/// A call's wait for its answer. Dropped before the answer was taken (its caller stopped
/// waiting), it hands back the jobs of an answer that came meanwhile; one that comes later
/// finds the wait gone, and the connection's reader hands its jobs back.
struct Waiting {
    rx: oneshot::Receiver<Result<Answer, WireError>>,
    calls: mpsc::UnboundedSender<Outgoing>,
    /// The caller took the answer.
    answered: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        // From here on the reader finds the wait gone.
        self.rx.close();
        if let Ok(Ok(answer)) = self.rx.try_recv() {
            hand_back(&self.calls, &answer);
        }
    }
}

/// A call answered with another call's kind of answer. Only the kind is named: the
/// answer may hold payloads.
fn unexpected(answer: &Answer) -> BackendError {
    BackendError::Store(
        format!(
            "the store's owner answered out of turn (a {} answer)",
            answer.kind()
        )
        .into(),
    )
}

/// Why a handshake's answer is refused, naming only its kind (the answer may hold payloads).
fn unexpected_hello(response: &Response) -> String {
    let what = match &response.answer {
        Ok(answer) => format!("a {} answer", answer.kind()),
        Err(_) => "an error".to_string(),
    };
    format!(
        "unexpected handshake answer ({what} to request {})",
        response.id
    )
}

fn count(max: usize) -> u64 {
    u64::try_from(max).unwrap_or(u64::MAX)
}

impl Backend for Client {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        let ids = self.enqueue_many(vec![job]).await?;
        ids.into_iter()
            .next()
            .ok_or_else(|| BackendError::Invalid("nothing enqueued".into()))
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        // Refused here, without sending the call to the owner only to hear the same.
        fairq_worker::check_call_size(&jobs)?;
        match self.call(Call::Enqueue(jobs)).await? {
            Answer::Ids(ids) => Ok(ids),
            other => Err(unexpected(&other)),
        }
    }

    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        let call = Call::Claim {
            queue: queue.to_string(),
            max: count(max),
            lease,
        };
        match self.call(call).await? {
            Answer::Jobs(jobs) => Ok(jobs),
            other => Err(unexpected(&other)),
        }
    }

    async fn settle(&self, batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        match self.call(Call::Settle(batch)).await? {
            Answer::Settled(answers) => Ok(each_from_wire(answers)),
            other => Err(unexpected(&other)),
        }
    }

    async fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<SettledAndClaimed, BackendError> {
        let call = Call::SettleAndClaim {
            batch,
            queue: queue.to_string(),
            max: count(max),
            lease,
        };
        match self.call(call).await? {
            Answer::SettledAndClaimed { settled, claimed } => Ok(SettledAndClaimed {
                settled: each_from_wire(settled),
                claimed: claimed.map_err(BackendError::from),
            }),
            other => Err(unexpected(&other)),
        }
    }

    async fn release(&self, claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        match self.call(Call::Release(claims)).await? {
            Answer::Units(answers) => Ok(each_from_wire(answers)),
            other => Err(unexpected(&other)),
        }
    }

    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        self.heartbeat_many(vec![claim], lease)
            .await?
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(BackendError::Store("the owner answered nothing".into())))
    }

    async fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> Result<Each<Millis>, BackendError> {
        match self.call(Call::Heartbeat { claims, lease }).await? {
            Answer::Deadlines(answers) => Ok(each_from_wire(answers)),
            other => Err(unexpected(&other)),
        }
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        self.count(Call::Rescue(queue.to_string())).await
    }

    async fn hold_retries(&self, queue: &str, until: Millis) -> Result<u64, BackendError> {
        self.count(Call::HoldRetries {
            queue: queue.to_string(),
            until,
        })
        .await
    }

    fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        let waited = self.call(Call::WaitForJobs {
            queue: queue.to_string(),
            timeout,
        });
        async move {
            // The owner answers at the timeout, or after `LONGEST_WAIT`, at the latest. If
            // it cannot be reached, pause a little (so that a caller's poll loop does not
            // spin) and return: the caller's next call reaches the next owner. A timeout
            // of `Duration::MAX` (no end) is bounded the same way.
            let held = timeout.min(super::server::LONGEST_WAIT);
            match tokio::time::timeout(held + Duration::from_secs(1), waited).await {
                Ok(Ok(_)) | Err(_) => {}
                Ok(Err(_)) => tokio::time::sleep(timeout.min(UNREACHABLE_PAUSE)).await,
            }
        }
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        match self.call(Call::Stats).await? {
            Answer::Stats(stats) => Ok(stats),
            other => Err(unexpected(&other)),
        }
    }

    /// The owner counts the one queue in memory, instead of sending every queue's
    /// statistics for the default to filter.
    async fn live_counts(&self, queue: &str) -> Result<LiveCounts, BackendError> {
        match self.call(Call::Counts(queue.to_string())).await? {
            Answer::Counts(counts) => Ok(counts.into()),
            other => Err(unexpected(&other)),
        }
    }

    /// The owner cuts a page short when its rows would not fit in one message; a short
    /// page that is not empty is followed by another, from its last row on, until the
    /// limit is reached or a page comes back empty (one more call when the list ends
    /// before the limit).
    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        let mut rows: Vec<JobInfo> = Vec::new();
        loop {
            let page = ListFilter {
                after: rows.last().map(|row| row.id).or(filter.after),
                limit: filter.limit - rows.len(),
                ..filter.clone()
            };
            let got = match self.call(Call::List(page)).await? {
                Answer::List(jobs) => jobs,
                other => return Err(unexpected(&other)),
            };
            let last = got.is_empty();
            rows.extend(got);
            if last || rows.len() >= filter.limit {
                return Ok(rows);
            }
        }
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        match self.call(Call::Get(id)).await? {
            Answer::Job(job) => Ok(job),
            other => Err(unexpected(&other)),
        }
    }

    async fn revive(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        self.count(Call::Revive(target)).await
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        self.count(Call::Purge(purge)).await
    }

    async fn prune(&self, retention: Retention) -> Result<u64, BackendError> {
        self.count(Call::Prune(retention)).await
    }

    async fn remove_queue(&self, queue: &str) -> Result<u64, BackendError> {
        self.count(Call::RemoveQueue(queue.to_string())).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer out of turn is named by its kind, never shown: it may hold payloads.
    #[test]
    fn answers_out_of_turn_are_named_not_shown() {
        let answer = Answer::Names(vec!["s3cr3t".into()]);
        let message = unexpected(&answer).to_string();
        assert!(
            message.contains("Names") && !message.contains("s3cr3t"),
            "{message}"
        );
        let response = Response {
            id: 3,
            answer: Ok(answer),
        };
        let message = unexpected_hello(&response);
        assert!(
            message.contains("Names") && !message.contains("s3cr3t"),
            "{message}"
        );
        let response = Response {
            id: 0,
            answer: Err(WireError::Store("s3cr3t".into())),
        };
        assert!(!unexpected_hello(&response).contains("s3cr3t"));
    }
}
