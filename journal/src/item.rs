//! The items readers deliver.

use std::fmt;
use std::time::SystemTime;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's id, unique and increasing within the queue.
    pub id: ItemId,
    /// The item's bytes.
    pub data: Vec<u8>,
    /// When the item was put (millisecond precision).
    pub added_at: SystemTime,
    /// When the item expires, if it does.
    pub expires_at: Option<SystemTime>,
    /// How many times this reader aborted the item (kept across reopens by the checkpoint).
    pub error_count: u32,
}
