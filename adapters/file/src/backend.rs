//! [`FileBackend`]: opening a store folder (as its owner, or as a client of the process that
//! owns it) and the [`Backend`] calls, handed to whichever side this handle is.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairq_core::job::Millis;
use fairq_worker::Retention;
use fairq_worker::{
    Backend, BackendError, Claim, Each, Finished, Job, JobId, JobInfo, ListFilter, LiveCounts,
    NewJob, Purge, QueueStats, ReviveTarget, Settled, SettledAndClaimed, StatusCounts,
};

use crate::error::FileError;
use crate::folder::{FolderLock, SharedLock, existing_folder, prepare_folder};
use crate::local::Local;
use crate::options::FileOptions;
use crate::remote::client::{Client, ConnectFailure};
use crate::remote::server::Server;
use crate::salvage::SalvageReport;
use crate::snapshot::Snapshot;
use crate::writer::lock;
use fairq_journal::RecoveryReport;

/// How often opening looks again while the folder's holder does not answer yet.
const RETRY_EVERY: Duration = Duration::from_millis(20);

/// Which side of a store folder a [`FileBackend`] is.
///
/// ```
/// use fairq_file::{FileBackend, FileOptions, Role};
/// let dir = tempfile::tempdir().unwrap();
/// let owner = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
/// let client = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
/// assert_eq!((owner.role(), client.role()), (Role::Owner, Role::Client));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// This process holds the folder: it keeps the store in memory, writes its journal and
    /// (unless [`FileOptions::serve`] is off) serves it to other processes.
    Owner,
    /// Another process holds the folder; every call goes to it over the folder's socket.
    Client,
    /// Nobody held the folder when it was opened with
    /// [`FileBackend::open_read_only`]: a snapshot of the store, read from its files
    /// without changing them, that refuses every change.
    Snapshot,
}

/// The store of a folder this process holds, and the server that shares it.
pub(crate) struct Owner {
    pub(crate) local: Local,
    server: Mutex<Option<Server>>,
}

impl Owner {
    fn shutdown(&self) -> Result<(), FileError> {
        // The socket goes first, while the folder is still locked: a later owner's socket is
        // never removed by this one.
        if let Some(mut server) = lock(&self.server).take() {
            server.stop();
        }
        self.local.shutdown()
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(dir = %self.local.dir().display(), error = %e, "closing the file store failed");
        }
    }
}

pub(crate) enum Side {
    Owner(Owner),
    Client(Client),
    Snapshot(Box<Snapshot>),
}

/// A durable job store in one folder on the local file system, on a `fairq-journal` journal.
///
/// It has the semantics of the in-memory reference store (fair claims by key, leases with
/// fencing tokens, retries, rescue, dependencies, unique keys, operator calls) because it *is*
/// that store's state machine, with every change written to the journal before the call that
/// made it returns (claims excepted: see the [crate documentation](crate) for what each call
/// waits for, the design and the recovery argument).
///
/// One process owns a folder at a time; other processes that open it reach the store through
/// the owner (see [`FileBackend::open`]). Clones share the store. The store is closed when the
/// last clone is dropped, or with [`FileBackend::close`].
///
/// ```
/// use std::time::Duration;
/// use fairq_file::{FileBackend, FileOptions};
/// use fairq_worker::{Backend, NewJob};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
/// let id = store.enqueue(NewJob::new("mail", "welcome", b"{}".to_vec()).key("tenant-a")).await.unwrap();
/// store.close().unwrap();
///
/// // Reopened, the job is still there.
/// let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
/// let jobs = store.claim("mail", 10, Duration::from_secs(30)).await.unwrap();
/// assert_eq!(jobs[0].claim.id, id);
/// store.complete(jobs[0].claim).await.unwrap();
/// # });
/// ```
#[derive(Clone)]
pub struct FileBackend {
    pub(crate) side: Arc<Side>,
    /// Opened with [`FileBackend::open_read_only`]: every change is refused, also as a client.
    read_only: bool,
}

impl std::fmt::Debug for FileBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileBackend")
            .field("dir", &self.path())
            .field("role", &self.role())
            .finish_non_exhaustive()
    }
}

impl FileBackend {
    /// Opens the store in folder `path`, creating the folder if needed.
    ///
    /// If no other process holds the folder, this process becomes its **owner**: it takes
    /// the folder's lock, replays the journal (every job, its state and the queues' counters
    /// come back as they were after the last acknowledged change; jobs that were running
    /// belonged to the previous owner, which is gone, so they are rescued at once like any
    /// expired lease) and serves the store on the folder's socket (`fairq.sock`).
    ///
    /// If a live process holds the folder, the store is opened as a **client** of it: every
    /// call goes to the owner over the socket, with the same answers. Opening waits up to
    /// [`FileOptions::connect_timeout`] for the owner to answer (it may still be replaying). A
    /// socket left behind by an owner that was killed is noticed (nobody answers it, and its
    /// lock is free) and the opener becomes the new owner.
    ///
    /// Errors: [`FileError::NotAFolder`] and [`FileError::Io`] for a path that is not a usable
    /// folder, [`FileError::Locked`] when another process holds it and cannot be reached
    /// (sharing off, or it does not serve the socket), [`FileError::CorruptJournal`] /
    /// [`FileError::CorruptRecord`] for damaged files, [`FileError::UnsafeFile`] for a store
    /// file that is a symbolic link or not a regular file, and
    /// [`FileError::UnsupportedVersion`] for a folder written by a newer version.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_file::{FileBackend, FileError, FileOptions};
    /// use fairq_worker::{Backend, NewJob};
    /// let dir = tempfile::tempdir().unwrap();
    /// let owner = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
    /// // A second open (here in the same process, usually another one) is a client.
    /// let client = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
    /// let id = client.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// assert!(owner.get(id).await.unwrap().is_some());
    /// // Without sharing, a held folder is refused.
    /// let refused = FileBackend::open(dir.path(), FileOptions::default().share(false));
    /// assert!(matches!(refused, Err(FileError::Locked { .. })));
    /// # });
    /// ```
    pub fn open(path: impl AsRef<Path>, options: FileOptions) -> Result<FileBackend, FileError> {
        let dir = path.as_ref().to_path_buf();
        prepare_folder(&dir, options.dir_mode)?;
        // `None`: a timeout too long for an `Instant` (`Duration::MAX`) waits as long as it takes.
        let deadline = Instant::now().checked_add(options.connect_timeout);
        loop {
            if let Some(folder_lock) = FolderLock::try_acquire(&dir, options.file_mode)? {
                return Self::own(&dir, folder_lock, &options);
            }
            if !options.share {
                return Err(FileError::Locked {
                    path: dir,
                    detail: " (its lock file is held)".into(),
                });
            }
            match Client::connect(&dir, options.clock.clone(), options.max_message) {
                Ok(client) => {
                    return Ok(FileBackend {
                        side: Arc::new(Side::Client(client)),
                        read_only: false,
                    });
                }
                Err(ConnectFailure::NotServed(why))
                    if deadline.is_some_and(|d| Instant::now() >= d) =>
                {
                    return Err(FileError::Locked {
                        path: dir,
                        detail: format!(
                            ", which does not serve the store to other processes ({why})"
                        ),
                    });
                }
                Err(ConnectFailure::NotServed(_)) => std::thread::sleep(RETRY_EVERY),
                Err(ConnectFailure::Failed(e)) => return Err(e),
            }
        }
    }

    fn own(
        dir: &Path,
        folder_lock: FolderLock,
        options: &FileOptions,
    ) -> Result<FileBackend, FileError> {
        let local = Local::open(dir, folder_lock, options)?;
        let server = if options.serve {
            match Server::start(local.clone(), options.file_mode, options.max_message) {
                Ok(server) => Some(server),
                Err(e) => {
                    // The store works without it; other processes are told it is in use.
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot serve the store to other processes");
                    None
                }
            }
        } else {
            None
        };
        Ok(FileBackend {
            side: Arc::new(Side::Owner(Owner {
                local,
                server: Mutex::new(server),
            })),
            read_only: false,
        })
    }

    /// Opens the store in folder `path` for looking only: nothing in the folder is created,
    /// repaired or changed, so a store on a full disk or a read-only mount can still be
    /// inspected (`fairq stats`, `fairq list`).
    ///
    /// If a live process owns the folder, this is a client of it (as [`FileBackend::open`]
    /// makes) that refuses every change. Otherwise the journal is read once, as the next
    /// owner would replay it, into a [`Role::Snapshot`]: reads answer from it, and it does
    /// not follow later changes. A torn tail is ignored instead of cut off, and reported in
    /// [`recovery_report`](Self::recovery_report); jobs that were running when the last owner
    /// stopped are shown running (the next owner rescues them). Every change fails with
    /// [`FileError::ReadOnly`].
    ///
    /// Errors: as [`FileBackend::open`], and [`FileError::Io`] when the folder does not
    /// exist (it is never created).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_file::{FileBackend, FileError, FileOptions, Role};
    /// use fairq_worker::{Backend, ListFilter, NewJob};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = FileBackend::open(dir.path(), FileOptions::default()).unwrap();
    /// store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// store.close().unwrap();
    ///
    /// let view = FileBackend::open_read_only(dir.path(), FileOptions::default()).unwrap();
    /// assert_eq!(view.role(), Role::Snapshot);
    /// assert_eq!(view.list(ListFilter::default()).await.unwrap().len(), 1);
    /// let refused = view.enqueue(NewJob::new("q", "k", vec![])).await.unwrap_err();
    /// assert!(refused.to_string().contains("read-only"));
    /// # });
    /// ```
    pub fn open_read_only(
        path: impl AsRef<Path>,
        options: FileOptions,
    ) -> Result<FileBackend, FileError> {
        let dir = path.as_ref().to_path_buf();
        existing_folder(&dir)?;
        // `None`: a timeout too long for an `Instant` (`Duration::MAX`) waits as long as it takes.
        let deadline = Instant::now().checked_add(options.connect_timeout);
        loop {
            let side = match FolderLock::try_shared(&dir)? {
                SharedLock::Taken(folder_lock) => {
                    let snapshot = Snapshot::open(&dir, &options);
                    drop(folder_lock);
                    Side::Snapshot(Box::new(snapshot?))
                }
                SharedLock::NoLockFile => Side::Snapshot(Box::new(Snapshot::open(&dir, &options)?)),
                SharedLock::Held if !options.share => {
                    return Err(FileError::Locked {
                        path: dir,
                        detail: " (its lock file is held)".into(),
                    });
                }
                SharedLock::Held => {
                    match Client::connect(&dir, options.clock.clone(), options.max_message) {
                        Ok(client) => Side::Client(client),
                        Err(ConnectFailure::NotServed(why))
                            if deadline.is_some_and(|d| Instant::now() >= d) =>
                        {
                            return Err(FileError::Locked {
                                path: dir,
                                detail: format!(
                                    ", which does not serve the store to other processes ({why})"
                                ),
                            });
                        }
                        Err(ConnectFailure::NotServed(_)) => {
                            std::thread::sleep(RETRY_EVERY);
                            continue;
                        }
                        Err(ConnectFailure::Failed(e)) => return Err(e),
                    }
                }
            };
            return Ok(FileBackend {
                side: Arc::new(side),
                read_only: true,
            });
        }
    }

    /// Whether this handle refuses every change ([`FileBackend::open_read_only`]).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// assert!(!store.is_read_only());
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Rebuilds the store of folder `from`, which refuses to open because of damage
    /// ([`FileError::CorruptJournal`], [`FileError::CorruptRecord`]), into the new or empty
    /// folder `to`, and says what was lost. `from` is not changed: its journal is read as
    /// [`fairq_journal::salvage`] reads one (every record whose checksum holds, past damaged
    /// stretches), each decodable frame is applied in order as opening applies them, and
    /// `to` gets each job's latest intact record, the queues' counters and pause flags, and
    /// the id counter. Open `to` afterwards like any store (jobs that were running are
    /// rescued then).
    ///
    /// What a salvage cannot bring back, the report lists: the unreadable stretches, frames
    /// that did not decode, and jobs whose full record (with the payload) was lost. A job
    /// whose latest change was lost comes back as it was before that change (a completed job
    /// may run again, a deleted one reappear): at least once, never silently dropped.
    ///
    /// Errors: [`FileError::Locked`] when a live process owns `from`, [`FileError::NotEmpty`]
    /// when `to` holds anything, [`FileError::UnsupportedVersion`] for a store written by a
    /// newer build, [`FileError::Io`] when `from` holds no journal segment at all (a wrong
    /// path: nothing is written then), and I/O errors reading `from` or writing `to`.
    ///
    /// ```
    /// use fairq_file::{FileBackend, FileOptions};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_worker::{Backend, ListFilter, NewJob};
    /// let (old, new) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    /// let store = FileBackend::open(old.path(), FileOptions::default()).unwrap();
    /// store.enqueue(NewJob::new("mail", "k", b"hello".to_vec())).await.unwrap();
    /// store.close().unwrap();
    ///
    /// let report = FileBackend::salvage(old.path(), new.path(), FileOptions::default()).unwrap();
    /// assert_eq!(report.jobs, 1);
    /// assert!(!report.lost_anything());
    /// let rebuilt = FileBackend::open(new.path(), FileOptions::default()).unwrap();
    /// let jobs = rebuilt.list(ListFilter::default()).await.unwrap();
    /// assert_eq!(jobs.len(), 1);
    /// assert_eq!(jobs[0].payload, b"hello");
    /// # });
    /// ```
    pub fn salvage(
        from: impl AsRef<Path>,
        to: impl AsRef<Path>,
        options: FileOptions,
    ) -> Result<SalvageReport, FileError> {
        crate::salvage::salvage_store(from.as_ref(), to.as_ref(), &options)
    }

    /// What opening the journal found and repaired, for the process that read it (the owner,
    /// or a snapshot); `None` for a client. A crash leaves a torn tail, which is cut off (a
    /// snapshot only ignores it): each [`TailRepair`](fairq_journal::TailRepair) names the
    /// file, the offset and the bytes dropped, and says whether they were the remains of an
    /// interrupted write ([`TailCause::Incomplete`](fairq_journal::TailCause::Incomplete)) or a
    /// complete record that failed its checksum
    /// ([`TailCause::Damaged`](fairq_journal::TailCause::Damaged)), which may have been an
    /// acknowledged change. [`FileBackend::recovery_warnings`] puts it in words.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// assert!(store.recovery_report().unwrap().is_clean());
    /// ```
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        match &*self.side {
            Side::Owner(owner) => Some(owner.local.recovery_report()),
            Side::Client(_) => None,
            Side::Snapshot(snapshot) => Some(snapshot.recovery_report()),
        }
    }

    /// One line per thing [`recovery_report`](Self::recovery_report) found, for an operator
    /// (the CLI prints them to stderr): empty after a clean shutdown.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// assert!(store.recovery_warnings().is_empty());
    /// ```
    pub fn recovery_warnings(&self) -> Vec<String> {
        self.recovery_report()
            .map(crate::recovery::warnings)
            .unwrap_or_default()
    }

    /// Whether this handle owns the folder or is a client of the process that does.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// assert_eq!(store.role(), fairq_file::Role::Owner);
    /// ```
    pub fn role(&self) -> Role {
        match &*self.side {
            Side::Owner(_) => Role::Owner,
            Side::Client(_) => Role::Client,
            Side::Snapshot(_) => Role::Snapshot,
        }
    }

    /// Closes the store. An owner writes what is queued, closes the journal (saving the
    /// reader's checkpoint so the next open replays little), stops serving the folder and
    /// releases its lock; a client closes its connection. Later calls on this store and its
    /// clones fail with [`FileError::Closed`]. Dropping the last clone closes it too.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// store.close().unwrap();
    /// ```
    pub fn close(&self) -> Result<(), FileError> {
        match &*self.side {
            Side::Owner(owner) => owner.shutdown(),
            Side::Client(client) => {
                client.close();
                Ok(())
            }
            Side::Snapshot(_) => Ok(()),
        }
    }

    /// The store's folder.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// assert_eq!(store.path(), dir.path());
    /// ```
    pub fn path(&self) -> &Path {
        match &*self.side {
            Side::Owner(owner) => owner.local.dir(),
            Side::Client(client) => client.dir(),
            Side::Snapshot(snapshot) => snapshot.dir(),
        }
    }

    /// The store's current time (a client reads its own clock).
    ///
    /// ```
    /// use fairq_file::{FileBackend, FileOptions};
    /// use fairq_worker::ManualClock;
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = FileBackend::open(dir.path(), FileOptions::default().clock(ManualClock::new(9))).unwrap();
    /// assert_eq!(store.now(), 9);
    /// ```
    pub fn now(&self) -> Millis {
        match &*self.side {
            Side::Owner(owner) => owner.local.now(),
            Side::Client(client) => client.now(),
            Side::Snapshot(snapshot) => snapshot.now(),
        }
    }

    /// Number of stored jobs, finished ones included (a client asks the owner, and blocks
    /// until it answers; 0 if it cannot be reached).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// assert_eq!(store.len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        match &*self.side {
            Side::Owner(owner) => owner.local.len(),
            Side::Client(client) => client.len().unwrap_or_else(|e| {
                tracing::warn!(error = %e, "could not count the store's jobs");
                0
            }),
            Side::Snapshot(snapshot) => snapshot.len(),
        }
    }

    /// True when no job is stored.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// assert!(fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Jobs per status in `queue` (a client asks the owner, and blocks until it answers;
    /// zeros if it cannot be reached).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use fairq_worker::{Backend, NewJob};
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap();
    /// store.enqueue(NewJob::new("q", "k", vec![])).await.unwrap();
    /// assert_eq!(store.counts("q").scheduled, 1);
    /// # });
    /// ```
    pub fn counts(&self, queue: &str) -> StatusCounts {
        match &*self.side {
            Side::Owner(owner) => owner.local.counts(queue),
            Side::Client(client) => client.counts(queue).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "could not count the queue's jobs");
                StatusCounts::default()
            }),
            Side::Snapshot(snapshot) => snapshot.counts(queue),
        }
    }

    /// Wakes every task waiting in [`Backend::wait_for_jobs`] (after moving a manual clock).
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// fairq_file::FileBackend::open(dir.path(), Default::default()).unwrap().wake_all();
    /// ```
    pub fn wake_all(&self) {
        match &*self.side {
            Side::Owner(owner) => owner.local.wake_all(),
            Side::Client(client) => client.wake_all(),
            Side::Snapshot(_) => {}
        }
    }
}

/// Calls the same [`Backend`] method on whichever side the handle is.
macro_rules! each_side {
    ($self:ident, $store:ident => $call:expr) => {
        match &*$self.side {
            Side::Owner(owner) => {
                let $store = &owner.local;
                $call.await
            }
            Side::Client(client) => {
                let $store = client;
                $call.await
            }
            Side::Snapshot(snapshot) => {
                let $store = snapshot;
                $call.await
            }
        }
    };
    // A change: refused by a read-only handle before it reaches any side.
    ($self:ident, $operation:literal, $store:ident => $call:expr) => {{
        $self.writable($operation)?;
        each_side!($self, $store => $call)
    }};
}

impl FileBackend {
    pub(crate) fn writable(&self, operation: &'static str) -> Result<(), BackendError> {
        if self.read_only {
            return Err(FileError::ReadOnly {
                path: self.path().to_path_buf(),
                operation,
            }
            .into());
        }
        Ok(())
    }
}

impl Backend for FileBackend {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        each_side!(self, "enqueue", store => store.enqueue(job))
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        each_side!(self, "enqueue", store => store.enqueue_many(jobs))
    }

    /// Claims without waiting for the disk when this process owns the folder: the claim is
    /// written with the next frame, and a crash before that hands the job out again as if it
    /// had never been claimed (see the crate documentation). A client's claim is durable
    /// before it returns, because its leases outlive the owner.
    async fn claim(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<Vec<Job>, BackendError> {
        each_side!(self, "claim", store => store.claim(queue, max, lease))
    }

    /// Settles the whole batch in one change: its records share one journal frame and one
    /// sync.
    async fn settle(&self, batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        each_side!(self, "settle", store => store.settle(batch))
    }

    /// Settles `batch` and claims the next jobs under one lock, in one journal frame: the
    /// call returns once the settlement (and the claim with it) is durable.
    async fn settle_and_claim(
        &self,
        batch: Vec<Finished>,
        queue: &str,
        max: usize,
        lease: Duration,
    ) -> Result<SettledAndClaimed, BackendError> {
        each_side!(self, "settle", store => store.settle_and_claim(batch, queue, max, lease))
    }

    async fn release(&self, claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        each_side!(self, "release", store => store.release(claims))
    }

    /// Extends a lease in memory only: leases do not outlive the owning process (a reopened
    /// store rescues every job that was running), so a deadline is not worth a disk write.
    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        each_side!(self, "heartbeat", store => store.heartbeat(claim, lease))
    }

    /// Extends every lease under one lock, in memory only.
    async fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> Result<Each<Millis>, BackendError> {
        each_side!(self, "heartbeat", store => store.heartbeat_many(claims, lease))
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        each_side!(self, "rescue", store => store.rescue(queue))
    }

    async fn hold_retries(&self, queue: &str, until: Millis) -> Result<u64, BackendError> {
        each_side!(self, "hold_retries", store => store.hold_retries(queue, until))
    }

    fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        let this = self.clone();
        let queue = queue.to_string();
        async move { each_side!(this, store => store.wait_for_jobs(&queue, timeout)) }
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        each_side!(self, store => store.stats())
    }

    async fn live_counts(&self, queue: &str) -> Result<LiveCounts, BackendError> {
        each_side!(self, store => store.live_counts(queue))
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        each_side!(self, store => store.list(filter))
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        each_side!(self, store => store.get(id))
    }

    async fn revive(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        each_side!(self, "revive", store => store.revive(target))
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        each_side!(self, "purge", store => store.purge(purge))
    }

    async fn prune(&self, retention: Retention) -> Result<u64, BackendError> {
        each_side!(self, "prune", store => store.prune(retention))
    }

    async fn remove_queue(&self, queue: &str) -> Result<u64, BackendError> {
        each_side!(self, "remove_queue", store => store.remove_queue(queue))
    }
}

/// The folder a `file:PATH` store URL names (`file:` alone or an empty path: `./fairq-data`).
///
/// ```
/// use std::path::PathBuf;
/// assert_eq!(fairq_file::folder_from_url("file:/var/q"), Some(PathBuf::from("/var/q")));
/// assert_eq!(fairq_file::folder_from_url("file:"), Some(PathBuf::from("./fairq-data")));
/// assert_eq!(fairq_file::folder_from_url("redis://x"), None);
/// ```
pub fn folder_from_url(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("file:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    if rest.is_empty() {
        Some(PathBuf::from(crate::DEFAULT_FOLDER))
    } else {
        Some(PathBuf::from(rest))
    }
}
