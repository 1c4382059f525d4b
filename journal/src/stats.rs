//! Per-reader counters.

use std::time::Duration;

/// What a reader holds and what it has done since the queue was opened (counters start at
/// zero on every open; `items`, `bytes` and `open_reads` describe the reader now).
///
/// ```
/// use fairq_journal::{JournalConfig, JournaledQueue};
/// let dir = tempfile::tempdir().unwrap();
/// let q = JournaledQueue::open(dir.path(), "q", JournalConfig::default()).unwrap();
/// let r = q.reader("r").unwrap();
/// q.put(b"a").unwrap();
/// let item = r.get().unwrap().unwrap();
/// r.commit(item.id).unwrap();
/// assert!(r.get().unwrap().is_none());
/// let s = r.stats().unwrap();
/// assert_eq!((s.puts, s.get_hits, s.get_misses, s.committed, s.items), (1, 1, 1, 1, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReaderStats {
    /// Items waiting to be delivered (aborted ones included, open reads excluded).
    pub items: u64,
    /// Payload bytes of the waiting items.
    pub bytes: u64,
    /// Items delivered and neither committed nor aborted.
    pub open_reads: u64,
    /// Items put into the queue (and so into this reader) since the queue was opened.
    pub puts: u64,
    /// Calls of `get` that returned an item.
    pub get_hits: u64,
    /// Calls of `get` that found nothing.
    pub get_misses: u64,
    /// Expired items taken out of the way (dropped, or handed to the expired-item sink).
    pub expired: u64,
    /// Items dropped unread: by [`FullPolicy::DropOldest`](crate::FullPolicy::DropOldest),
    /// or aborted more than `max_errors` times without an error sink.
    pub discarded: u64,
    /// Items handed out as open reads (by `get`).
    pub opened: u64,
    /// Open reads aborted.
    pub aborted: u64,
    /// Open reads committed.
    pub committed: u64,
    /// Items aborted more than `max_errors` times and handed to the error sink.
    pub dead_lettered: u64,
    /// Age of the oldest waiting item, by its add time (`None` when nothing waits).
    pub oldest_age: Option<Duration>,
}
