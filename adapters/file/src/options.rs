//! How a file store is opened.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fairq_journal::storage::Storage;
use fairq_worker::{Clock, Random, SystemClock, SystemRandom};

/// When a change is on disk before the call that made it returns. Both modes make every
/// acknowledged change survive a crash of the process or of the machine.
///
/// ```
/// assert_eq!(fairq_file::SyncMode::default(), fairq_file::SyncMode::Group);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Group commit: changes made while a sync is running share the next one.
    #[default]
    Group,
    /// One journal sync per write, even if other changes are waiting (slower; for
    /// comparisons).
    Always,
}

/// Options of [`FileBackend::open`](crate::FileBackend::open).
///
/// ```
/// use fairq_file::{FileOptions, SyncMode};
/// use fairq_worker::ManualClock;
/// let options = FileOptions::default().clock(ManualClock::new(0)).sync(SyncMode::Always);
/// assert_eq!(options.sync, SyncMode::Always);
/// ```
#[derive(Clone)]
pub struct FileOptions {
    /// Where the store reads "now" (the system clock by default; a manual clock in tests).
    pub clock: Arc<dyn Clock>,
    /// Where retry jitter comes from ([`SystemRandom`] by default; a fixed number in tests).
    pub random: Arc<dyn Random>,
    /// When changes are made durable.
    pub sync: SyncMode,
    /// Size at which a journal segment file is sealed and a new one started (default 16 MiB).
    /// Space comes back a segment at a time.
    pub segment_size: u64,
    /// Where the journal's files live: the real file system when `None`. Tests pass a
    /// [`fairq_journal::sim::SimDisk`] to simulate power loss and I/O failures. The folder's
    /// lock file is always on the real file system.
    pub storage: Option<Arc<dyn Storage>>,
    /// When the folder is held by another process, open the store as a client of it through
    /// the folder's socket (default `true`). Off: fail with
    /// [`FileError::Locked`](crate::FileError::Locked).
    pub share: bool,
    /// Serve the store on the folder's socket while this process holds it, so that other
    /// processes can use it (default `true`).
    pub serve: bool,
    /// How long opening waits for the process holding the folder to answer on its socket (it
    /// may still be reading its journal) before giving up (default 10 s).
    pub connect_timeout: Duration,
    /// Permission bits of the files the store creates: journal segments, checkpoints, the
    /// lock file and the socket (default `0o600`: only the owner can read the payloads). The
    /// process umask still applies.
    pub file_mode: u32,
    /// Permission bits of the store folder when opening creates it (default `0o700`). An
    /// existing folder keeps its permissions.
    pub dir_mode: u32,
    /// Keep succeeded jobs until a prune deletes them (default `true`), or delete each when
    /// its success is recorded (see [`FileOptions::keep_succeeded`](Self::keep_succeeded)).
    pub keep_succeeded: bool,
    /// The largest message either end of the folder's socket sends or accepts (512 MiB):
    /// the owner cuts a client's claims and lists short to stay below it. Only tests change
    /// it (owner and clients must agree), to reach it without gigabytes of payload.
    #[doc(hidden)]
    pub max_message: usize,
    /// The largest journal item, one frame (1 GiB); the writer cuts frames at a 128th of it
    /// (8 MiB), its relocations included. Only tests change it, to reach it without
    /// gigabytes of payload; a store written with a larger one may not open with it.
    #[doc(hidden)]
    pub max_item_size: usize,
}

impl Default for FileOptions {
    fn default() -> Self {
        FileOptions {
            clock: Arc::new(SystemClock),
            random: Arc::new(SystemRandom),
            sync: SyncMode::Group,
            segment_size: 16 << 20,
            storage: None,
            share: true,
            serve: true,
            connect_timeout: Duration::from_secs(10),
            file_mode: 0o600,
            dir_mode: 0o700,
            keep_succeeded: true,
            max_message: crate::remote::wire::MAX_MESSAGE,
            max_item_size: crate::local::MAX_ITEM_SIZE,
        }
    }
}

impl fmt::Debug for FileOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileOptions")
            .field("now", &self.clock.now())
            .field("sync", &self.sync)
            .field("segment_size", &self.segment_size)
            .field("storage", &self.storage)
            .field("share", &self.share)
            .field("serve", &self.serve)
            .field("connect_timeout", &self.connect_timeout)
            .field("file_mode", &format_args!("{:o}", self.file_mode))
            .field("dir_mode", &format_args!("{:o}", self.dir_mode))
            .finish()
    }
}

impl FileOptions {
    /// Reads time from `clock`.
    ///
    /// ```
    /// use fairq_worker::{Clock, ManualClock};
    /// let options = fairq_file::FileOptions::default().clock(ManualClock::new(5));
    /// assert_eq!(options.clock.now(), 5);
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Draws retry jitter from `random`.
    ///
    /// ```
    /// use fairq_worker::FixedRandom;
    /// let options = fairq_file::FileOptions::default().random(FixedRandom(7));
    /// assert_eq!(options.random.next_u64(), 7);
    /// ```
    pub fn random(mut self, random: impl Random) -> Self {
        self.random = Arc::new(random);
        self
    }

    /// Sets the sync mode.
    ///
    /// ```
    /// use fairq_file::{FileOptions, SyncMode};
    /// assert_eq!(FileOptions::default().sync(SyncMode::Always).sync, SyncMode::Always);
    /// ```
    pub fn sync(mut self, sync: SyncMode) -> Self {
        self.sync = sync;
        self
    }

    /// Sets the journal segment size (at least 64 KiB is used).
    ///
    /// ```
    /// assert_eq!(fairq_file::FileOptions::default().segment_size(1 << 20).segment_size, 1 << 20);
    /// ```
    pub fn segment_size(mut self, bytes: u64) -> Self {
        self.segment_size = bytes;
        self
    }

    /// Keeps the journal on `storage` instead of the real file system.
    ///
    /// ```
    /// use fairq_journal::sim::SimDisk;
    /// let options = fairq_file::FileOptions::default().storage(SimDisk::new(1));
    /// assert!(options.storage.is_some());
    /// ```
    pub fn storage(mut self, storage: impl Storage + 'static) -> Self {
        self.storage = Some(Arc::new(storage));
        self
    }

    /// Whether a folder held by another process is opened as its client (see
    /// [`FileOptions::share`](Self::share)).
    ///
    /// ```
    /// assert!(!fairq_file::FileOptions::default().share(false).share);
    /// ```
    pub fn share(mut self, share: bool) -> Self {
        self.share = share;
        self
    }

    /// Whether succeeded jobs are kept (the default) until a prune deletes them, or deleted
    /// when their success is recorded, as BullMQ's `removeOnComplete` does: the journal then
    /// holds no succeeded job to replay at the next open. A job with dependents is kept.
    /// Statistics count deleted successes all the same (retries, run times); `get`, `list`,
    /// the status counts and a later `depends_on` naming one no longer find it. The process
    /// that holds the folder decides: clients that reach it through the socket get its
    /// choice, whatever their own options say.
    ///
    /// ```
    /// assert!(!fairq_file::FileOptions::default().keep_succeeded(false).keep_succeeded);
    /// ```
    pub fn keep_succeeded(mut self, keep: bool) -> Self {
        self.keep_succeeded = keep;
        self
    }

    /// Whether this process serves the folder to others while it holds it.
    ///
    /// ```
    /// assert!(!fairq_file::FileOptions::default().serve(false).serve);
    /// ```
    pub fn serve(mut self, serve: bool) -> Self {
        self.serve = serve;
        self
    }

    /// How long opening waits for the folder's holder to answer (`Duration::MAX`: as long
    /// as it takes).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = fairq_file::FileOptions::default().connect_timeout(Duration::from_secs(1));
    /// assert_eq!(options.connect_timeout, Duration::from_secs(1));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the permission bits of the files the store creates (see
    /// [`FileOptions::file_mode`](Self::file_mode)).
    ///
    /// ```
    /// assert_eq!(fairq_file::FileOptions::default().file_mode(0o640).file_mode, 0o640);
    /// ```
    pub fn file_mode(mut self, mode: u32) -> Self {
        self.file_mode = mode;
        self
    }

    /// Sets [`FileOptions::max_message`](Self::max_message) (tests only).
    #[doc(hidden)]
    pub fn max_message(mut self, bytes: usize) -> Self {
        self.max_message = bytes;
        self
    }

    /// Sets [`FileOptions::max_item_size`](Self::max_item_size) (tests only).
    #[doc(hidden)]
    pub fn max_item_size(mut self, bytes: usize) -> Self {
        self.max_item_size = bytes;
        self
    }

    /// Sets the permission bits of a store folder that opening creates (see
    /// [`FileOptions::dir_mode`](Self::dir_mode)).
    ///
    /// ```
    /// assert_eq!(fairq_file::FileOptions::default().dir_mode(0o750).dir_mode, 0o750);
    /// ```
    pub fn dir_mode(mut self, mode: u32) -> Self {
        self.dir_mode = mode;
        self
    }
}
