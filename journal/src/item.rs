//! The items readers deliver.

use std::fmt;
use std::time::SystemTime;

use bytes::Bytes;

/// The id of an item: unique within a queue and strictly increasing in put order.
///
/// ```
/// use fairq_journal::ItemId;
/// assert!(ItemId(1) < ItemId(2));
/// assert_eq!(ItemId(7).to_string(), "7");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemId(pub u64);

impl fmt::Display for ItemId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An item delivered by a reader.
///
/// ```
/// use fairq_journal::{JournalConfig, JournaledQueue};
/// let dir = tempfile::tempdir().unwrap();
/// let q = JournaledQueue::open(dir.path(), "orders", JournalConfig::default()).unwrap();
/// q.put(b"order #1").unwrap();
/// let item = q.reader("").unwrap().get().unwrap().unwrap();
/// assert_eq!(&item.data[..], b"order #1");
/// let kept: Vec<u8> = item.data.to_vec(); // a copy of its own, for keeping long
/// assert_eq!(item.error_count, 0);
/// # drop(kept);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's id, unique and increasing within the queue.
    pub id: ItemId,
    /// The item's bytes: a shared slice of what the reader read, not a copy, so cloning an
    /// item or handing its bytes on costs no copy either. While any slice is alive it keeps
    /// the piece of the file it was read with in memory (a 256 KiB buffer when the reader
    /// was behind the writers, 64 KiB when it read what was just put): copy the bytes out
    /// (`item.data.to_vec()`) to keep a small item for long.
    pub data: Bytes,
    /// When the item was put (millisecond precision).
    pub added_at: SystemTime,
    /// When the item expires, if it does.
    pub expires_at: Option<SystemTime>,
    /// How many times this reader aborted the item (kept across reopens by the checkpoint).
    pub error_count: u32,
}
