//! Positions in the journal.

/// A byte position in the journal: segment id and offset within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct Pos {
    pub(crate) seg: u64,
    pub(crate) off: u64,
}
