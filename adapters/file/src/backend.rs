//! [`FileBackend`]: opening a store folder (as its owner, or as a client of the process that
//! owns it) and the [`Backend`] calls, handed to whichever side this handle is.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairq_core::job::Millis;
use fairq_worker::{
    Backend, BackendError, Claim, Each, Finished, Job, JobId, JobInfo, ListFilter, NewJob, Purge,
    QueueStats, ReviveTarget, Settled, SettledAndClaimed, StatusCounts,
};

use crate::error::FileError;
use crate::folder::{FolderLock, prepare_folder};
use crate::local::Local;
use crate::options::FileOptions;
use crate::remote::client::{Client, ConnectFailure};
use crate::remote::server::Server;
use crate::writer::lock;

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
}

/// The store of a folder this process holds, and the server that shares it.
struct Owner {
    local: Local,
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

enum Side {
    Owner(Owner),
    Client(Client),
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
    side: Arc<Side>,
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
        prepare_folder(&dir)?;
        let deadline = Instant::now() + options.connect_timeout;
        loop {
            if let Some(folder_lock) = FolderLock::try_acquire(&dir)? {
                return Self::own(&dir, folder_lock, &options);
            }
            if !options.share {
                return Err(FileError::Locked {
                    path: dir,
                    detail: " (its lock file is held)".into(),
                });
            }
            match Client::connect(&dir, options.clock.clone()) {
                Ok(client) => {
                    return Ok(FileBackend {
                        side: Arc::new(Side::Client(client)),
                    });
                }
                Err(ConnectFailure::NotServed(why)) if Instant::now() >= deadline => {
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
            match Server::start(local.clone(), 0o600) {
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
        })
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
        }
    };
}

impl Backend for FileBackend {
    async fn enqueue(&self, job: NewJob) -> Result<JobId, BackendError> {
        each_side!(self, store => store.enqueue(job))
    }

    async fn enqueue_many(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>, BackendError> {
        each_side!(self, store => store.enqueue_many(jobs))
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
        each_side!(self, store => store.claim(queue, max, lease))
    }

    /// Settles the whole batch in one change: its records share one journal frame and one
    /// sync.
    async fn settle(&self, batch: Vec<Finished>) -> Result<Each<Settled>, BackendError> {
        each_side!(self, store => store.settle(batch))
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
        each_side!(self, store => store.settle_and_claim(batch, queue, max, lease))
    }

    async fn release(&self, claims: Vec<Claim>) -> Result<Each<()>, BackendError> {
        each_side!(self, store => store.release(claims))
    }

    /// Extends a lease in memory only: leases do not outlive the owning process (a reopened
    /// store rescues every job that was running), so a deadline is not worth a disk write.
    async fn heartbeat(&self, claim: Claim, lease: Duration) -> Result<Millis, BackendError> {
        each_side!(self, store => store.heartbeat(claim, lease))
    }

    /// Extends every lease under one lock, in memory only.
    async fn heartbeat_many(
        &self,
        claims: Vec<Claim>,
        lease: Duration,
    ) -> Result<Each<Millis>, BackendError> {
        each_side!(self, store => store.heartbeat_many(claims, lease))
    }

    async fn rescue(&self, queue: &str) -> Result<u64, BackendError> {
        each_side!(self, store => store.rescue(queue))
    }

    async fn hold_retries(&self, queue: &str, until: Millis) -> Result<u64, BackendError> {
        each_side!(self, store => store.hold_retries(queue, until))
    }

    fn wait_for_jobs(&self, queue: &str, timeout: Duration) -> impl Future<Output = ()> + Send {
        let this = self.clone();
        let queue = queue.to_string();
        async move { each_side!(this, store => store.wait_for_jobs(&queue, timeout)) }
    }

    async fn stats(&self) -> Result<Vec<QueueStats>, BackendError> {
        each_side!(self, store => store.stats())
    }

    async fn list(&self, filter: ListFilter) -> Result<Vec<JobInfo>, BackendError> {
        each_side!(self, store => store.list(filter))
    }

    async fn get(&self, id: JobId) -> Result<Option<JobInfo>, BackendError> {
        each_side!(self, store => store.get(id))
    }

    async fn revive(&self, target: ReviveTarget) -> Result<u64, BackendError> {
        each_side!(self, store => store.revive(target))
    }

    async fn purge(&self, purge: Purge) -> Result<u64, BackendError> {
        each_side!(self, store => store.purge(purge))
    }

    async fn prune(&self, older_than: Duration) -> Result<u64, BackendError> {
        each_side!(self, store => store.prune(older_than))
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
