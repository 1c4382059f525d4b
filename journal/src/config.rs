//! Configuration: sync policy, segment size, per-reader limits, the clock and the storage.

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::sim::SimDisk;
use crate::storage::{FsStorage, Storage};

/// When a put is made durable before it returns.
///
/// ```
/// use fairq_journal::SyncPolicy;
/// assert_eq!(SyncPolicy::default(), SyncPolicy::Group);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// Every put runs its own `fdatasync` before returning.
    Always,
    /// Group commit: a put returns after an `fdatasync` that covers it; concurrent puts share
    /// one `fdatasync` (the first waiting writer syncs for everyone waiting).
    #[default]
    Group,
    /// A background thread syncs at this interval; a put returns once written to the OS.
    Periodic(Duration),
    /// Never sync on put (the OS writes back when it likes); `close` still syncs.
    Never,
}

impl SyncPolicy {
    /// Whether a put under this policy returns only once durable.
    ///
    /// ```
    /// use fairq_journal::SyncPolicy;
    /// assert!(SyncPolicy::Always.is_durable_on_put());
    /// assert!(!SyncPolicy::Never.is_durable_on_put());
    /// ```
    pub fn is_durable_on_put(self) -> bool {
        matches!(self, SyncPolicy::Always | SyncPolicy::Group)
    }
}

/// Whether puts under [`SyncPolicy::Never`] and [`SyncPolicy::Periodic`] that arrive while
/// another put writes share its next write (see [`JournalConfig::coalesce`]). Under
/// [`SyncPolicy::Always`] and [`SyncPolicy::Group`] they always do, since one sync then
/// covers them all.
///
/// ```
/// use fairq_journal::Coalesce;
/// assert_eq!(Coalesce::default(), Coalesce::Auto);
/// assert!(Coalesce::Auto.resolve(8));
/// assert!(!Coalesce::Auto.resolve(2));
/// assert!(Coalesce::On.resolve(1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Coalesce {
    /// [`On`](Coalesce::On) with more than two processors available to the process,
    /// [`Off`](Coalesce::Off) with one or two.
    #[default]
    Auto,
    /// A put that finds another one writing queues its record behind it and waits,
    /// spinning, for that put to write the queue's records in one call.
    On,
    /// Puts take turns at the writer's lock, each writing its own records, and a put that
    /// finds the lock taken sleeps in it.
    Off,
}

impl Coalesce {
    /// Whether puts share writes on a machine with `processors` available to the process.
    pub fn resolve(self, processors: usize) -> bool {
        match self {
            Coalesce::Auto => processors > 2,
            Coalesce::On => true,
            Coalesce::Off => false,
        }
    }
}

/// What a reader does when a put would take it over one of its limits.
///
/// ```
/// use fairq_journal::FullPolicy;
/// assert_eq!(FullPolicy::default(), FullPolicy::Refuse);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FullPolicy {
    /// The put fails with [`JournalError::Full`](crate::JournalError::Full).
    #[default]
    Refuse,
    /// The reader drops its oldest waiting items (not its open reads) to make room.
    DropOldest,
}

/// Limits of one reader. `None` means unlimited.
///
/// Expiry has one boundary for both of its rules: an item is expired from the instant its
/// `expires_at` is reached (`now >= expires_at`), and from the instant its age reaches
/// `max_age` (`now >= added_at + max_age`). An expired item is never delivered.
///
/// ```
/// use fairq_journal::{FullPolicy, ReaderConfig};
/// let cfg = ReaderConfig { max_items: Some(1000), full_policy: FullPolicy::DropOldest, ..Default::default() };
/// assert_eq!(cfg.max_bytes, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReaderConfig {
    /// Most items waiting in the reader (open reads excluded).
    pub max_items: Option<u64>,
    /// Most payload bytes waiting in the reader (open reads excluded).
    pub max_bytes: Option<u64>,
    /// Items are expired once their age (since their add time) reaches this.
    pub max_age: Option<Duration>,
    /// What a put does when the reader is at `max_items` or `max_bytes`.
    pub full_policy: FullPolicy,
    /// An item aborted more than this many times is not returned to the front again but
    /// handed to the reader's error sink ([`Reader::set_error_sink`](crate::Reader::set_error_sink)),
    /// or dropped without one.
    pub max_errors: Option<u32>,
}

impl ReaderConfig {
    /// Whether the reader has a `max_items` or `max_bytes` limit.
    pub(crate) fn has_limits(&self) -> bool {
        self.max_items.is_some() || self.max_bytes.is_some()
    }
}

/// A source of wall-clock time. The journal reads it for add times, expiry and
/// checkpoint intervals, so tests can control time instead of sleeping. Expiry and
/// checkpoint intervals use [`Clock::coarse_now_ms`] (for [`SystemClock`] a few
/// milliseconds behind real time, so an item may be delivered that long after its expiry).
///
/// ```
/// use fairq_journal::{Clock, ManualClock};
/// use std::time::{Duration, UNIX_EPOCH};
/// let c = ManualClock::new(UNIX_EPOCH + Duration::from_secs(10));
/// c.advance(Duration::from_secs(1));
/// assert_eq!(c.now(), UNIX_EPOCH + Duration::from_secs(11));
/// ```
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time (a put reads it once, for the item's add time).
    fn now(&self) -> SystemTime;

    /// The current time in milliseconds since the Unix epoch, for the checks readers make
    /// on every call (expiry, checkpoint intervals). It must be cheap and may be coarse:
    /// a few milliseconds behind [`Clock::now`], never ahead of it. The default reads
    /// [`Clock::now`].
    ///
    /// ```
    /// use fairq_journal::{Clock, SystemClock};
    /// use std::time::{SystemTime, UNIX_EPOCH};
    /// let precise = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    /// let coarse = SystemClock.coarse_now_ms();
    /// assert!(coarse <= precise + 1 && coarse + 1000 > precise);
    /// ```
    fn coarse_now_ms(&self) -> u64 {
        to_ms(self.now())
    }

    /// [`Clock::now`] in milliseconds since the Unix epoch (0 before it): what a put records
    /// as its item's add time. The default converts [`Clock::now`].
    ///
    /// ```
    /// use fairq_journal::{Clock, ManualClock};
    /// use std::time::{Duration, UNIX_EPOCH};
    /// let c = ManualClock::new(UNIX_EPOCH + Duration::from_millis(1500));
    /// assert_eq!(c.now_ms(), 1500);
    /// ```
    fn now_ms(&self) -> u64 {
        to_ms(self.now())
    }
}

/// The system's wall clock.
///
/// ```
/// use fairq_journal::{Clock, SystemClock};
/// assert!(SystemClock.now() > std::time::UNIX_EPOCH);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    /// `CLOCK_REALTIME_COARSE` on Linux: the time of the last clock tick, read without
    /// touching the hardware clock (a few nanoseconds instead of tens).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn coarse_now_ms(&self) -> u64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        let secs = u64::try_from(t.tv_sec).unwrap_or(0);
        let ms = u64::try_from(t.tv_nsec).unwrap_or(0) / 1_000_000;
        secs.saturating_mul(1000).saturating_add(ms)
    }

    /// `CLOCK_REALTIME` read straight into milliseconds (no `SystemTime` arithmetic).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn now_ms(&self) -> u64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
        let Ok(secs) = u64::try_from(t.tv_sec) else {
            return 0;
        };
        let ms = u64::try_from(t.tv_nsec).unwrap_or(0) / 1_000_000;
        secs.saturating_mul(1000).saturating_add(ms)
    }
}

/// A clock that moves only when told to; clones share the same time.
///
/// ```
/// use fairq_journal::{Clock, ManualClock};
/// use std::time::{Duration, UNIX_EPOCH};
/// let c = ManualClock::new(UNIX_EPOCH);
/// let c2 = c.clone();
/// c.set(UNIX_EPOCH + Duration::from_millis(5));
/// assert_eq!(c2.now(), UNIX_EPOCH + Duration::from_millis(5));
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    ms: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock standing at `start` (millisecond precision).
    pub fn new(start: SystemTime) -> Self {
        ManualClock {
            ms: Arc::new(AtomicU64::new(to_ms(start))),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.ms.fetch_add(
            by.as_millis().min(u128::from(u64::MAX)) as u64,
            Ordering::SeqCst,
        );
    }

    /// Sets the clock.
    pub fn set(&self, to: SystemTime) {
        self.ms.store(to_ms(to), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        from_ms(self.ms.load(Ordering::SeqCst))
    }

    fn now_ms(&self) -> u64 {
        self.ms.load(Ordering::SeqCst)
    }
}

/// Milliseconds since the Unix epoch (0 for earlier times).
pub(crate) fn to_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis().min(u128::from(u64::MAX)) as u64)
        .unwrap_or(0)
}

pub(crate) fn from_ms(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// Configuration of a [`JournaledQueue`](crate::JournaledQueue).
///
/// ```
/// use fairq_journal::{JournalConfig, SyncPolicy};
/// let cfg = JournalConfig { segment_size: 1 << 20, sync: SyncPolicy::Always, ..Default::default() };
/// assert_eq!(cfg.max_item_size, JournalConfig::default().max_item_size);
/// ```
#[derive(Clone)]
pub struct JournalConfig {
    /// A segment file is sealed and a new one started once it reaches this size
    /// (default 16 MiB). It must exceed the segment header
    /// ([`SEGMENT_HEADER_LEN`](crate::format::SEGMENT_HEADER_LEN), 28 bytes): opening refuses
    /// a smaller one with [`JournalError::InvalidConfig`](crate::JournalError::InvalidConfig).
    /// A record is never split: one that does not fit makes its segment longer than this.
    pub segment_size: u64,
    /// When puts are made durable (default [`SyncPolicy::Group`]).
    pub sync: SyncPolicy,
    /// Largest accepted item payload in bytes (default 16 MiB). At most
    /// [`MAX_PAYLOAD_LEN`](crate::format::MAX_PAYLOAD_LEN) (4 GiB less 28 bytes, what a
    /// record's length field can say): opening refuses more with
    /// [`JournalError::InvalidConfig`](crate::JournalError::InvalidConfig).
    pub max_item_size: usize,
    /// A reader whose position changed (by a commit, or by skipping expired items) writes its
    /// checkpoint on its next call once this much time passed since its last checkpoint
    /// (default 1 s; `Duration::ZERO` checkpoints after every change). Readers also checkpoint
    /// on [`Reader::checkpoint`](crate::Reader::checkpoint) and on close.
    pub checkpoint_interval: Duration,
    /// Where finished segments are moved instead of being deleted (same file system). An
    /// archived file is never replaced: a segment whose name is taken there (a queue deleted
    /// and made again, or a queue of the same name in another folder sharing the archive)
    /// is archived as that name plus `.1`, `.2`, and so on.
    pub archive_dir: Option<PathBuf>,
    /// Limits of readers created without their own configuration.
    pub reader: ReaderConfig,
    /// The time source (default [`SystemClock`]).
    pub clock: Arc<dyn Clock>,
    /// The file system (default [`FsStorage`]).
    pub storage: Arc<dyn Storage>,
    /// Permission bits of the files the queue creates (default `0o600`: only the owner can
    /// read the payloads). The process umask still applies; ignored outside Unix.
    pub file_mode: u32,
    /// Permission bits of the folders the queue creates (default `0o700`). An existing folder
    /// keeps its permissions.
    pub dir_mode: u32,
    /// Most bytes of segment data kept in memory for readers that lag behind others (default
    /// 64 MiB): with several readers, the first one to read a stretch of the journal keeps
    /// it (checksums verified) for the others, which then make no system call for it. Data
    /// every reader has passed is dropped at once, so a queue with one reader, or readers
    /// that keep together, holds about one chunk each (256 KiB, or 64 KiB for a read of
    /// what was just put); `0` keeps only what a reader
    /// reads now. The cap is reached when readers drift apart: readers on more threads
    /// than cores drift by whole time slices (tens of megabytes at a few million items a
    /// second), and a reader that stops while others go on keeps the cache full until it
    /// catches up or is removed. Four readers on two cores delivered 8.2 to 9.3 million
    /// 1 KiB items a second with 16 MiB, re-reading what had been dropped, and 9.7 to
    /// 10.1 million with 64 MiB.
    ///
    /// ```
    /// let cfg = fairq_journal::JournalConfig::default();
    /// assert_eq!(cfg.read_cache_bytes, 64 << 20);
    /// ```
    pub read_cache_bytes: usize,
    /// The queue is ready to be deleted once it has been open this long with nothing in any
    /// reader (see [`JournaledQueue::is_ready_for_expiration`](crate::JournaledQueue::is_ready_for_expiration)).
    /// Measured from when this handle opened the queue, so a restart starts it again.
    pub max_queue_age: Option<Duration>,
    /// Puts store their records into a shared memory map of the segment instead of writing
    /// them with a system call (default `false`). Only with [`SyncPolicy::Never`] and
    /// [`SyncPolicy::Periodic`], where a put is acknowledged once the operating system has
    /// it: a store into the map puts the record in the page cache as a `write` does, so a
    /// killed process loses nothing acknowledged, and the file's sync makes it durable as
    /// before. A put then makes no system call; `journal/README.md` (*Mapped writes*) has
    /// the numbers.
    ///
    /// Each segment is allocated in full (`fallocate`), mapped and its pages prepared for
    /// stores, on the helper thread that creates it ahead of the writer, so its file is as
    /// long as a whole segment until it is sealed or the queue closes, either of which cuts
    /// it back to its records; after a crash, recovery cuts the unused zeros off. The costs
    /// of a map: an I/O error met by a store into it (a disk failing while a page is read
    /// back in) stops the process with `SIGBUS` instead of returning an error, and so does
    /// another program shrinking the segment file. Linux only (the simulated disk maps
    /// everywhere), and on file systems that can allocate ahead; elsewhere, and for
    /// storages that cannot map, puts write as usual. A record larger than what is left of
    /// the map (records over 64 KiB near a segment's end, or over the segment size) is
    /// written as usual, and the rest of that segment too.
    ///
    /// ```
    /// use fairq_journal::{JournalConfig, JournaledQueue, SyncPolicy};
    /// let dir = tempfile::tempdir().unwrap();
    /// let cfg = JournalConfig { sync: SyncPolicy::Never, mapped_writes: true, ..Default::default() };
    /// let q = JournaledQueue::open(dir.path(), "fast", cfg).unwrap();
    /// q.put(b"no system call").unwrap();
    /// assert_eq!(&q.reader("").unwrap().get().unwrap().unwrap().data[..], b"no system call");
    /// ```
    pub mapped_writes: bool,
    /// Whether puts under [`SyncPolicy::Never`] and [`SyncPolicy::Periodic`] that meet share
    /// one write (default [`Coalesce::Auto`]: only with more than two processors).
    ///
    /// Sharing makes a put that arrives during another's `write` queue its record and
    /// spin until that put has written it: one system call for several puts, which pays
    /// when the waiting puts have processors of their own to spin on. With more writer
    /// threads than processors the spinning takes the processor from the very thread that
    /// writes, and taking turns at the lock is faster: with four writers on two processors,
    /// 1.5 to 1.6 times as many 128-byte puts a second (`journal/README.md`, *Puts that
    /// meet*). With no more writer threads than processors, sharing can win even on two:
    /// on one such machine two writers put about 45% faster with [`Coalesce::On`] than
    /// with what `Auto` chose; measure with your own writers. Mapped writes
    /// (`mapped_writes`) always take turns.
    ///
    /// ```
    /// use fairq_journal::{Coalesce, JournalConfig, JournaledQueue, SyncPolicy};
    /// let dir = tempfile::tempdir().unwrap();
    /// let cfg = JournalConfig { sync: SyncPolicy::Never, coalesce: Coalesce::Off, ..Default::default() };
    /// let q = JournaledQueue::open(dir.path(), "turns", cfg).unwrap();
    /// q.put(b"one write per put").unwrap();
    /// assert_eq!(q.reader("").unwrap().len(), 1);
    /// ```
    pub coalesce: Coalesce,
}

impl JournalConfig {
    /// A configuration that stores on a simulated disk (for tests).
    ///
    /// ```
    /// use fairq_journal::{sim::SimDisk, JournalConfig};
    /// let cfg = JournalConfig::on_sim(&SimDisk::new(1));
    /// assert_eq!(cfg.segment_size, 16 << 20);
    /// ```
    pub fn on_sim(disk: &SimDisk) -> Self {
        JournalConfig {
            storage: Arc::new(disk.clone()),
            ..JournalConfig::default()
        }
    }
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            segment_size: 16 << 20,
            sync: SyncPolicy::Group,
            max_item_size: 16 << 20,
            checkpoint_interval: Duration::from_secs(1),
            archive_dir: None,
            reader: ReaderConfig::default(),
            clock: Arc::new(SystemClock),
            storage: Arc::new(FsStorage),
            file_mode: 0o600,
            dir_mode: 0o700,
            max_queue_age: None,
            read_cache_bytes: 64 << 20,
            mapped_writes: false,
            coalesce: Coalesce::Auto,
        }
    }
}

impl fmt::Debug for JournalConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JournalConfig")
            .field("segment_size", &self.segment_size)
            .field("sync", &self.sync)
            .field("max_item_size", &self.max_item_size)
            .field("checkpoint_interval", &self.checkpoint_interval)
            .field("archive_dir", &self.archive_dir)
            .field("reader", &self.reader)
            .field("clock", &self.clock)
            .field("storage", &self.storage)
            .field("file_mode", &format_args!("{:#o}", self.file_mode))
            .field("dir_mode", &format_args!("{:#o}", self.dir_mode))
            .field("max_queue_age", &self.max_queue_age)
            .field("read_cache_bytes", &self.read_cache_bytes)
            .field("mapped_writes", &self.mapped_writes)
            .field("coalesce", &self.coalesce)
            .finish()
    }
}

/// Options of a single put.
///
/// ```
/// use fairq_journal::PutOptions;
/// use std::time::{Duration, SystemTime};
/// let opts = PutOptions { expires_at: Some(SystemTime::now() + Duration::from_secs(60)), ..Default::default() };
/// assert!(opts.expires_at.is_some());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// The item is expired from this instant on (`now >= expires_at`): readers that reach
    /// it then never deliver it but hand it to their expired-item sink, or drop it.
    pub expires_at: Option<SystemTime>,
}
