//! The owner's side: a thread that serves the store on the folder's socket, one task per
//! connection and one per request, each request a call on the [`Local`] store.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use fairq_worker::{Backend, Claim, JobInfo};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use super::address::{Address, socket_path};
use super::wire::{
    ANSWER_OVERHEAD, Answer, Call, PROTOCOL, ReadError, Request, Response, WireError, each_to_wire,
    encode, encoded_len, read, write,
};
use crate::error::FileError;
use crate::local::Local;

/// The longest a client's `wait_for_jobs` is held at the owner.
pub(crate) const LONGEST_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The most calls of one connection the owner serves at once, from reading the request to
/// writing its answer: 64. The owner reads no further request of a connection that has this
/// many in flight until one of their answers is written, so a peer that sends and does not
/// read stalls only itself, with at most this many answers held for it (besides its
/// waits'). The client sends every call of a handle on one connection: more calls at once
/// queue behind, in order.
pub(crate) const MAX_IN_FLIGHT: usize = 64;

/// The most `wait_for_jobs` calls of one connection held at once: 1024. They are counted
/// apart from [`MAX_IN_FLIGHT`]: each is held up to [`LONGEST_WAIT`], and waits filling the
/// bound would hold back the calls that end them (an enqueue on the same connection). Each
/// costs a task and a wake-up registration, and its answer a few bytes.
pub(crate) const MAX_WAITS: usize = 1024;

/// A running server; [`Server::stop`] (or dropping it) ends it and removes the socket.
pub(crate) struct Server {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl Server {
    /// Binds the folder's socket (removing one a dead owner left behind: the caller holds the
    /// folder's lock, so no live process serves it) and starts serving `local` on it. No
    /// message over `limit` bytes is accepted or sent ([`MAX_MESSAGE`](super::wire::MAX_MESSAGE)
    /// but in tests).
    pub(crate) fn start(local: Local, mode: u32, limit: usize) -> Result<Server, FileError> {
        let dir = local.dir().to_path_buf();
        let path = socket_path(&dir);
        remove_stale(&path)?;
        let listener = Address::of(&dir)?
            .bind()
            .map_err(|e| FileError::io(&path, e))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| FileError::io(&path, e))?;
        // Our own user id, as the socket we just created carries it: only processes of the
        // same user are served.
        let uid = std::fs::symlink_metadata(&path)
            .map_err(|e| FileError::io(&path, e))?
            .uid();
        listener
            .set_nonblocking(true)
            .map_err(|e| FileError::io(&path, e))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| FileError::io(&path, e))?;
        let (stop, mut stopped) = watch::channel(false);
        let name = path.clone();
        let thread = std::thread::Builder::new()
            .name("fairq-file-server".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match UnixListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(e) => {
                            tracing::error!(socket = %name.display(), error = %e, "cannot serve the store");
                            return;
                        }
                    };
                    loop {
                        tokio::select! {
                            accepted = listener.accept() => match accepted {
                                Ok((stream, _)) => {
                                    if let Some(stream) = admit(stream, uid) {
                                        tokio::spawn(serve(local.clone(), stream, limit));
                                    }
                                }
                                Err(e) => {
                                    tracing::warn!(socket = %name.display(), error = %e, "accepting a connection failed");
                                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                                }
                            },
                            _ = stopped.changed() => break,
                        }
                    }
                });
                // Dropping the runtime ends every connection.
                drop(runtime);
            })
            .map_err(|e| FileError::io(&dir, e))?;
        Ok(Server {
            stop,
            thread: Some(thread),
            path,
        })
    }

    /// Stops serving, waits for the thread and removes the socket.
    pub(crate) fn stop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!(socket = %self.path.display(), "the store's server thread panicked");
            }
            if let Err(e) = std::fs::remove_file(&self.path) {
                tracing::warn!(socket = %self.path.display(), error = %e, "could not remove the store's socket");
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Removes a socket left by an owner that died; refuses anything else under its name.
fn remove_stale(path: &Path) -> Result<(), FileError> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|e| FileError::io(path, e))
        }
        Ok(meta) => Err(FileError::UnsafeFile {
            path: path.to_path_buf(),
            reason: if meta.file_type().is_symlink() {
                "it is a symbolic link where the store keeps its socket".into()
            } else {
                "it is not a socket, but the store keeps its socket under this name".into()
            },
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(FileError::io(path, e)),
    }
}

/// Keeps a connection only when its process runs as the same user as this one.
fn admit(stream: UnixStream, uid: u32) -> Option<UnixStream> {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == uid => Some(stream),
        Ok(cred) => {
            tracing::warn!(
                peer_uid = cred.uid(),
                "refused a connection to the store from another user"
            );
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "refused a connection whose user is unknown");
            None
        }
    }
}

/// An answer on its way to the peer, with the claims of the jobs it hands over.
struct Outbound {
    bytes: Vec<u8>,
    claims: Vec<Claim>,
    /// Its request's place among the connection's calls in flight, given up once written.
    _permit: OwnedSemaphorePermit,
}

/// Serves one connection: each request runs as its own task, answers go back in the order
/// they are ready. No answer over `limit` bytes is sent: the client would refuse it and drop
/// the connection, failing every call in flight on it. Jobs claimed for an answer that
/// cannot be written (the peer went away) are handed back (see [`hand_back`]). At most
/// [`MAX_IN_FLIGHT`] calls and [`MAX_WAITS`] waits are in flight at once.
async fn serve(local: Local, stream: UnixStream, limit: usize) {
    let (mut from, mut to) = stream.into_split();
    let calls = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let waits = Arc::new(Semaphore::new(MAX_WAITS));
    // Each answer holds its request's permit: the channel holds at most as many.
    let (answers, mut outgoing) = mpsc::unbounded_channel::<Outbound>();
    let writer = {
        let local = local.clone();
        tokio::spawn(async move {
            while let Some(answer) = outgoing.recv().await {
                if write(&mut to, &answer.bytes).await.is_err() {
                    hand_back(&local, answer.claims).await;
                    break;
                }
            }
            // The peer is gone: nothing queued or still to come reaches it. Answers sent
            // from now on come back to their senders, who hand their jobs back themselves.
            outgoing.close();
            while let Some(answer) = outgoing.recv().await {
                hand_back(&local, answer.claims).await;
            }
        })
    };
    loop {
        let request: Request = match read(&mut from, limit).await {
            Ok(request) => request,
            Err(ReadError::Closed) => break,
            Err(e) => {
                tracing::warn!(error = %e, "dropped a connection to the store");
                break;
            }
        };
        let bound = match request.call {
            Call::WaitForJobs { .. } => &waits,
            _ => &calls,
        };
        // With the bound reached, the next request waits (in the socket) for an answer
        // to be written; the semaphore is never closed.
        let Ok(permit) = bound.clone().acquire_owned().await else {
            break;
        };
        tokio::spawn(respond(
            local.clone(),
            request,
            limit,
            answers.clone(),
            permit,
        ));
    }
    drop(answers);
    let _ = writer.await;
}

/// Releases jobs claimed for a peer that will never hear of them (its connection is gone),
/// as the peer would have: due again at once, the attempt refunded. Otherwise they would stay
/// running under leases nobody holds until these expire, and their rescue would count an
/// attempt that never ran. A job meanwhile changed otherwise (rescued, say) is left as it is.
async fn hand_back(local: &Local, claims: Vec<Claim>) {
    if claims.is_empty() {
        return;
    }
    let n = claims.len();
    match local.release(claims).await {
        Ok(each) => {
            let refused = each.iter().filter(|one| one.is_err()).count();
            tracing::debug!(
                jobs = n,
                refused,
                "released jobs claimed for a connection that went away"
            );
        }
        Err(e) => tracing::warn!(
            jobs = n,
            error = %e,
            "could not release jobs claimed for a connection that went away; they are rescued when their leases expire"
        ),
    }
}

/// Answers one request. The call runs as a task of its own: should it panic (a bug), its
/// caller is answered with [`WireError::Store`] rather than left waiting for an answer that
/// never comes (the connection stays up, so the client would wait forever).
async fn respond(
    local: Local,
    request: Request,
    limit: usize,
    answers: mpsc::UnboundedSender<Outbound>,
    permit: OwnedSemaphorePermit,
) {
    let Request { id, call } = request;
    let task = {
        let local = local.clone();
        tokio::spawn(async move { answer(&local, call, limit).await })
    };
    let answer = match task.await {
        Ok(answer) => answer,
        Err(e) if e.is_panic() => {
            // The panic's message went to the panic hook; it is not sent on: it may quote
            // anything the call carried.
            tracing::error!(
                request = id,
                "a call to the store panicked; its caller is answered with an error"
            );
            Err(WireError::Store(
                "the store's owner failed while serving this call (a panic, which its log \
                 shows); the call may or may not have taken effect"
                    .into(),
            ))
        }
        // Cancelled: the server is stopping, and the connection with it.
        Err(_) => return,
    };
    let claims = match &answer {
        Ok(answer) => answer.claims(),
        Err(_) => Vec::new(),
    };
    let bytes = match encode(&Response { id, answer }) {
        Ok(bytes) if bytes.len() - 4 <= limit => Ok(bytes),
        // Claims and lists are cut short to fit; anything else this large (one job
        // of `get`) is refused on its own rather than by the client's reader.
        Ok(bytes) => Err(format!(
            "the answer takes {} bytes, more than one message may carry ({limit})",
            bytes.len() - 4
        )),
        Err(e) => Err(format!("cannot encode the answer: {e}")),
    };
    let (bytes, claims) = match bytes {
        Ok(bytes) => (Ok(bytes), claims),
        Err(reason) => {
            // The jobs are not sent: they go back.
            hand_back(&local, claims).await;
            let refusal = encode(&Response {
                id,
                answer: Err(WireError::Store(reason)),
            });
            (refusal, Vec::new())
        }
    };
    match bytes {
        Ok(bytes) => {
            let answer = Outbound {
                bytes,
                claims,
                _permit: permit,
            };
            if let Err(mpsc::error::SendError(answer)) = answers.send(answer) {
                hand_back(&local, answer.claims).await;
            }
        }
        Err(_) => hand_back(&local, claims).await,
    }
}

/// Runs one call on the store; its answer takes at most `limit` bytes when it holds jobs a
/// claim took (see [`Local::claim_durable`]) or a list's rows.
async fn answer(local: &Local, call: Call, limit: usize) -> Result<Answer, WireError> {
    #[cfg(test)]
    let _held = hook::enter(&call).await;
    let room = limit.saturating_sub(ANSWER_OVERHEAD);
    Ok(match call {
        Call::Hello { .. } => Answer::Hello { protocol: PROTOCOL },
        Call::Enqueue(jobs) => Answer::Ids(local.enqueue_many(jobs).await?),
        // The client's leases outlive this process: its claims wait for the disk.
        Call::Claim { queue, max, lease } => {
            Answer::Jobs(local.claim_durable(&queue, clamp(max), lease, room).await?)
        }
        Call::Settle(batch) => Answer::Settled(each_to_wire(local.settle(batch).await?)),
        Call::SettleAndClaim {
            batch,
            queue,
            max,
            lease,
        } => {
            let done = local
                .settle_and_claim_within(batch, &queue, clamp(max), lease, Some(room))
                .await?;
            Answer::SettledAndClaimed {
                settled: each_to_wire(done.settled),
                claimed: done.claimed.map_err(WireError::from),
            }
        }
        Call::Release(claims) => Answer::Units(each_to_wire(local.release(claims).await?)),
        Call::Heartbeat { claims, lease } => {
            Answer::Deadlines(each_to_wire(local.heartbeat_many(claims, lease).await?))
        }
        Call::Rescue(queue) => Answer::Count(local.rescue(&queue).await?),
        Call::HoldRetries { queue, until } => {
            Answer::Count(local.hold_retries(&queue, until).await?)
        }
        Call::WaitForJobs { queue, timeout } => {
            local.wait_for_jobs(&queue, timeout.min(LONGEST_WAIT)).await;
            Answer::Done
        }
        Call::Stats => Answer::Stats(local.stats().await?),
        Call::List(filter) => Answer::List(fitting(local.list(filter).await?, room)?),
        Call::Get(id) => Answer::Job(local.get(id).await?),
        Call::Revive(target) => Answer::Count(local.revive(target).await?),
        Call::Purge(purge) => Answer::Count(local.purge(purge).await?),
        Call::Prune(retention) => Answer::Count(local.prune(retention).await?),
        Call::Counts(queue) => {
            fairq_worker::check_queue_name(&queue)?;
            Answer::Counts(local.counts(&queue))
        }
        Call::Len => Answer::Count(local.len() as u64),
        Call::WakeAll => {
            local.wake_all();
            Answer::Done
        }
        Call::Cancel(id) => {
            local.cancel(id).await?;
            Answer::Done
        }
        Call::RemoveQueue(queue) => Answer::Count(local.remove_queue(&queue).await?),
        Call::SetPaused { queue, paused } => {
            local.set_paused(&queue, paused).await?;
            Answer::Done
        }
        Call::Paused => Answer::Names(local.paused()?),
    })
}

/// The first of `rows` that fit in `room` bytes of a message: a list's page cut short (the
/// client asks for the rest after the last row it got). A first row too large for any
/// message is refused.
fn fitting(mut rows: Vec<JobInfo>, room: usize) -> Result<Vec<JobInfo>, WireError> {
    let mut used = 0usize;
    let fit = rows
        .iter()
        .take_while(|row| {
            used = used.saturating_add(encoded_len(row));
            used <= room
        })
        .count();
    if fit == 0 && !rows.is_empty() {
        return Err(WireError::Invalid(format!(
            "job {} takes {used} bytes, more than an answer to another process may carry ({room}); only the process that holds the store folder can list it",
            rows[0].id
        )));
    }
    rows.truncate(fit);
    Ok(rows)
}

fn clamp(max: u64) -> usize {
    usize::try_from(max).unwrap_or(usize::MAX)
}

/// Test-only seams of the server.
#[cfg(test)]
pub(crate) mod hook {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::Semaphore;

    use super::Call;

    /// A count of this queue panics at the owner: no input reaches a panic once core clamps
    /// a decoded retry policy's jitter, yet a bug may add one.
    pub(crate) const PANICS: &str = "fairq-test-hook-panics";
    /// A count of this queue is counted in [`RUNNING`] and [`PEAK`] and held until [`GATE`]
    /// has a permit.
    pub(crate) const HELD: &str = "fairq-test-hook-held";
    /// Counts of [`HELD`] running now.
    pub(crate) static RUNNING: AtomicUsize = AtomicUsize::new(0);
    /// The most counts of [`HELD`] that ever ran at once.
    pub(crate) static PEAK: AtomicUsize = AtomicUsize::new(0);
    /// Holds the counts of [`HELD`] until the test adds permits.
    pub(crate) static GATE: Semaphore = Semaphore::const_new(0);

    /// One count of [`HELD`] running.
    pub(crate) struct Held;

    impl Drop for Held {
        fn drop(&mut self) {
            RUNNING.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Called as each call starts at the owner.
    pub(crate) async fn enter(call: &Call) -> Option<Held> {
        match call {
            Call::Counts(queue) if queue == PANICS => panic!("a call that panics (test hook)"),
            Call::Counts(queue) if queue == HELD => {
                let now = RUNNING.fetch_add(1, Ordering::SeqCst) + 1;
                PEAK.fetch_max(now, Ordering::SeqCst);
                let held = Held;
                drop(GATE.acquire().await);
                Some(held)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use fairq_core::job::State;
    use fairq_core::retry::RetryPolicy;
    use fairq_worker::{Backend, BackendError, JobId, JobInfo, ListFilter, ManualClock, NewJob};
    use tokio::net::UnixStream;

    use super::hook;
    use crate::remote::address::Address;
    use crate::remote::wire::{
        Answer, Call, MAX_MESSAGE, PROTOCOL, Request, Response, encode, read, write,
    };
    use crate::{FileBackend, FileOptions, Role};

    /// Sends one request as a client would.
    async fn send(stream: &mut UnixStream, id: u64, call: Call) {
        let bytes = encode(&Request { id, call }).unwrap();
        write(stream, &bytes).await.unwrap();
    }

    /// A peer that speaks the protocol by hand, connected to the owner of `dir` and greeted.
    async fn raw_peer(dir: &Path) -> UnixStream {
        let stream = Address::of(dir).unwrap().connect().unwrap();
        stream.set_nonblocking(true).unwrap();
        let mut stream = UnixStream::from_std(stream).unwrap();
        send(&mut stream, 0, Call::Hello { protocol: PROTOCOL }).await;
        let hello: Response = read(&mut stream, MAX_MESSAGE).await.unwrap();
        assert!(matches!(hello.answer, Ok(Answer::Hello { .. })));
        stream
    }

    /// Polls job `id` at `owner` until `wanted` holds of it, for at most 30 s.
    async fn until(owner: &FileBackend, id: JobId, wanted: impl Fn(&JobInfo) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let info = owner.get(id).await.unwrap().unwrap();
            if wanted(&info) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the job stays {:?}",
                info.state
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// A call that panics at the owner is answered with a store error, and the connection
    /// serves the calls after it.
    #[test]
    fn a_call_that_panics_at_the_owner_is_answered_with_an_error() {
        runtime().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let owner = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
            let client = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
            assert_eq!(client.role(), Role::Client);
            // A bound on the test, not a synchronisation: the answer comes at once.
            let answer =
                tokio::time::timeout(Duration::from_secs(30), client.live_counts(hook::PANICS))
                    .await
                    .expect("the call that panicked got an answer");
            match answer {
                Err(BackendError::Store(e)) => assert!(e.to_string().contains("panic"), "{e}"),
                other => panic!("expected a store error, got {other:?}"),
            }
            client
                .enqueue(NewJob::new("q", "kind", vec![]))
                .await
                .unwrap();
            assert_eq!(owner.len(), 1);
        });
    }

    /// Jobs claimed for a peer that is gone before their answer reaches it (here: the
    /// answer waits behind a large one the peer never reads) are released by the owner:
    /// due again, the attempt not counted. They used to stay running under a lease nobody
    /// held, until a rescue counted the attempt.
    #[test]
    fn jobs_claimed_for_a_peer_that_went_away_are_handed_back() {
        runtime().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let clock = ManualClock::new(1_000);
            let owner =
                FileBackend::open(dir.path(), FileOptions::default().clock(clock.clone())).unwrap();
            // Far more than a socket buffers: the answer of their list blocks the writer.
            let large = (0..32).map(|_| NewJob::new("large", "kind", vec![7; 64 << 10]));
            owner.enqueue_many(large.collect()).await.unwrap();
            let id = owner
                .enqueue(NewJob::new("q", "kind", vec![]).retry(RetryPolicy::new(0)))
                .await
                .unwrap();
            clock.advance(Duration::from_secs(1));

            let mut peer = raw_peer(dir.path()).await;
            send(
                &mut peer,
                1,
                Call::List(ListFilter::default().queue("large").limit(100)),
            )
            .await;
            let lease = Duration::from_secs(30);
            send(
                &mut peer,
                2,
                Call::Claim {
                    queue: "q".into(),
                    max: 1,
                    lease,
                },
            )
            .await;
            until(&owner, id, |info| {
                matches!(info.state, State::Running { .. })
            })
            .await;
            drop(peer);
            // A release makes the job due at its time, 2000 (it was first due at 1000).
            until(&owner, id, |info| {
                info.run_at == 2_000 && !matches!(info.state, State::Running { .. })
            })
            .await;
            let info = owner.get(id).await.unwrap().unwrap();
            assert_eq!(info.attempts, 0, "the attempt was refunded");
            clock.advance(lease);
            assert_eq!(owner.rescue("q").await.unwrap(), 0);
            assert_eq!(owner.claim("q", 1, lease).await.unwrap()[0].attempt, 1);
        });
    }

    /// A peer that sends more calls than [`MAX_IN_FLIGHT`](super::MAX_IN_FLIGHT) and reads
    /// none of their answers gets no more than that many served at once (they used to start
    /// as they were read, their answers piling up in the owner's memory), and stalls only its
    /// own connection: another is served meanwhile.
    #[test]
    fn a_connection_has_at_most_the_bound_of_calls_in_flight() {
        use std::sync::atomic::Ordering::SeqCst;
        const SENT: usize = super::MAX_IN_FLIGHT + 36;
        runtime().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let owner = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
            let mut peer = raw_peer(dir.path()).await;
            let mut pipelined = Vec::new();
            for id in 1..=SENT as u64 {
                let request = Request {
                    id,
                    call: Call::Counts(hook::HELD.into()),
                };
                pipelined.extend(encode(&request).unwrap());
            }
            write(&mut peer, &pipelined).await.unwrap();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
            while hook::RUNNING.load(SeqCst) < super::MAX_IN_FLIGHT {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the calls never ran"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Another connection is served while this one is stalled; by the time it is,
            // the server has gone through its tasks several times over.
            let mut other = raw_peer(dir.path()).await;
            send(&mut other, 1, Call::Len).await;
            let len: Response = read(&mut other, MAX_MESSAGE).await.unwrap();
            assert!(matches!(len.answer, Ok(Answer::Count(0))));
            assert_eq!(hook::RUNNING.load(SeqCst), super::MAX_IN_FLIGHT);

            hook::GATE.add_permits(1);
            for _ in 0..SENT {
                let answer = tokio::time::timeout(
                    Duration::from_secs(30),
                    read::<Response>(&mut peer, MAX_MESSAGE),
                )
                .await
                .expect("every call is answered")
                .unwrap();
                assert!(matches!(answer.answer, Ok(Answer::Counts(_))));
            }
            assert_eq!(hook::PEAK.load(SeqCst), super::MAX_IN_FLIGHT);
            drop(owner);
        });
    }
}
