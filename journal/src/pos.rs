//! Positions in the journal.

use std::sync::atomic::{AtomicU64, Ordering};

/// A byte position in the journal: segment id and offset within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct Pos {
    pub(crate) seg: u64,
    pub(crate) off: u64,
}

/// Where a reader reads from (segment, offset), as last published: what the shared chunks
/// must keep for it. Two relaxed atomics; a torn pair only makes the cache keep or drop one
/// chunk too many.
#[derive(Debug, Default)]
pub(crate) struct ReadingAt {
    seg: AtomicU64,
    off: AtomicU64,
}

impl ReadingAt {
    pub(crate) fn new(pos: Pos) -> Self {
        ReadingAt {
            seg: AtomicU64::new(pos.seg),
            off: AtomicU64::new(pos.off),
        }
    }

    pub(crate) fn set(&self, pos: Pos) {
        self.seg.store(pos.seg, Ordering::Relaxed);
        self.off.store(pos.off, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> Pos {
        Pos {
            seg: self.seg.load(Ordering::Relaxed),
            off: self.off.load(Ordering::Relaxed),
        }
    }
}
