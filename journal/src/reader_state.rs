//! The bookkeeping of one reader: its position in the stream, its open and aborted reads,
//! the ids it finished out of order, its counts and the chunk it reads from.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use crate::checkpoint::Checkpoint;
use crate::chunks::Held;
use crate::config::ReaderConfig;
use crate::open_reads::{Located, OpenReads};
use crate::pos::{Pos, ReadingAt};
use crate::sink::Sinks;
use crate::sync::lock;

/// The mutable state of a reader.
pub(crate) struct ReaderState {
    /// Next position to read from the stream; records there have ids of at least `cursor_id`.
    pub(crate) cursor: Pos,
    pub(crate) cursor_id: u64,
    /// What readers may read, as last seen (refreshed when the cursor reaches it).
    pub(crate) limit: Pos,
    /// The length of `cursor.seg` once it is known to be sealed.
    pub(crate) sealed_len: Option<(u64, u64)>,
    pub(crate) open: OpenReads,
    pub(crate) returned: BTreeMap<u64, Located>,
    /// Finished ids at or above the head (committed out of order, or restored from a
    /// checkpoint and not yet reached).
    pub(crate) done: BTreeSet<u64>,
    /// Abort counts restored from the checkpoint for items not read yet in this session.
    pub(crate) errors: BTreeMap<u64, u32>,
    /// Items (and payload bytes) that left the waiting set: the reader's waiting count is
    /// the queue's put totals minus these (wrapping; see [`ReaderState::waiting`]). A put
    /// never touches a reader, so puts cost the same with one reader or many.
    pub(crate) consumed_items: u64,
    pub(crate) consumed_bytes: u64,
    /// The reader's limits.
    pub(crate) config: ReaderConfig,
    pub(crate) dirty: bool,
    /// When the next checkpoint is due (ms since the epoch; 0: at the next change).
    pub(crate) checkpoint_due_ms: u64,
    /// The chunk the reader reads from.
    pub(crate) chunk: Option<Held>,
    /// Where the reader reads from, published for the shared chunks.
    pub(crate) at: Arc<ReadingAt>,
    /// What the reader did since the queue was opened.
    pub(crate) counters: Counters,
}

/// The reader's counters (see [`ReaderStats`](crate::ReaderStats)).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counters {
    pub(crate) get_hits: u64,
    pub(crate) get_misses: u64,
    pub(crate) expired: u64,
    pub(crate) discarded: u64,
    pub(crate) opened: u64,
    pub(crate) aborted: u64,
    pub(crate) committed: u64,
    pub(crate) dead_lettered: u64,
}

impl ReaderState {
    pub(crate) fn new(
        cursor: Pos,
        cursor_id: u64,
        done: BTreeSet<u64>,
        errors: BTreeMap<u64, u32>,
        config: ReaderConfig,
    ) -> Self {
        ReaderState {
            config,
            cursor,
            cursor_id,
            limit: Pos::default(),
            sealed_len: None,
            open: OpenReads::default(),
            returned: BTreeMap::new(),
            done,
            errors,
            consumed_items: 0,
            consumed_bytes: 0,
            dirty: false,
            checkpoint_due_ms: 0,
            chunk: None,
            at: Arc::new(ReadingAt::new(cursor)),
            counters: Counters::default(),
        }
    }

    /// Every id below the head is finished.
    pub(crate) fn head(&self) -> u64 {
        let mut h = self.cursor_id;
        if let Some((id, _)) = self.open.first() {
            h = h.min(id);
        }
        if let Some((&id, _)) = self.returned.first_key_value() {
            h = h.min(id);
        }
        h
    }

    /// Records that `id` (no longer open or waiting) is finished.
    pub(crate) fn mark_done(&mut self, id: u64) {
        let head = self.head();
        // Below the head it is implied (the usual case: commits in order).
        if id >= head {
            self.done.insert(id);
        }
        while self.done.first().is_some_and(|&d| d < head) {
            self.done.pop_first();
        }
        self.dirty = true;
    }

    /// The oldest segment the reader still needs: the one of its oldest open or aborted
    /// read, or the one its next read comes from.
    pub(crate) fn head_segment(&self) -> u64 {
        let mut s = self.cursor.seg;
        if let Some((_, loc)) = self.open.first() {
            s = s.min(loc.pos.seg);
        }
        if let Some((_, loc)) = self.returned.first_key_value() {
            s = s.min(loc.pos.seg);
        }
        s
    }

    /// Whether a checkpoint should be written now: something changed and the interval since
    /// the last one has passed.
    pub(crate) fn checkpoint_is_due(&self, now_ms: u64) -> bool {
        self.dirty && now_ms >= self.checkpoint_due_ms
    }

    /// The abort count of an item read from the stream now (restored from the checkpoint).
    pub(crate) fn take_error_count(&mut self, id: u64) -> u32 {
        if self.errors.is_empty() {
            return 0;
        }
        // Entries below the id belong to items finished without being read again.
        while self.errors.first_key_value().is_some_and(|(&e, _)| e < id) {
            self.errors.pop_first();
        }
        self.errors.remove(&id).unwrap_or(0)
    }

    pub(crate) fn checkpoint_data(&self) -> Checkpoint {
        let head = self.head();
        let mut errors: Vec<(u64, u32)> = self
            .open
            .iter()
            .chain(self.returned.iter().map(|(&id, loc)| (id, loc)))
            .filter(|(_, loc)| loc.error_count > 0)
            .map(|(id, loc)| (id, loc.error_count))
            .chain(self.errors.iter().map(|(&id, &n)| (id, n)))
            .filter(|&(id, _)| id >= head)
            .collect();
        errors.sort_unstable();
        errors.dedup_by_key(|e| e.0);
        Checkpoint {
            head,
            head_segment: self.head_segment(),
            // Filled in by the queue, which knows its segments.
            tail_segment: 0,
            done: self.done.range(head..).copied().collect(),
            errors,
        }
    }

    /// Items and payload bytes waiting (open reads excluded), given the queue's put totals.
    pub(crate) fn waiting(&self, totals: (u64, u64)) -> (u64, u64) {
        (
            totals.0.wrapping_sub(self.consumed_items),
            totals.1.wrapping_sub(self.consumed_bytes),
        )
    }

    /// An item of `len` bytes left the waiting set (delivered, finished or dropped).
    pub(crate) fn left(&mut self, len: u64) {
        self.consumed_items = self.consumed_items.wrapping_add(1);
        self.consumed_bytes = self.consumed_bytes.wrapping_add(len);
    }

    /// An item of `len` bytes is waiting again (aborted).
    pub(crate) fn came_back(&mut self, len: u64) {
        self.consumed_items = self.consumed_items.wrapping_sub(1);
        self.consumed_bytes = self.consumed_bytes.wrapping_sub(len);
    }

    /// Whether `n` more items of `len` bytes in all would break a limit.
    pub(crate) fn would_overflow(&self, totals: (u64, u64), n: u64, len: u64) -> bool {
        let (items, bytes) = self.waiting(totals);
        let cfg = &self.config;
        cfg.max_items.is_some_and(|m| items + n > m)
            || cfg.max_bytes.is_some_and(|m| bytes + len > m)
    }

    pub(crate) fn is_over(&self, totals: (u64, u64)) -> bool {
        let (items, bytes) = self.waiting(totals);
        let cfg = &self.config;
        cfg.max_items.is_some_and(|m| items > m) || cfg.max_bytes.is_some_and(|m| bytes > m)
    }
}

/// Checkpoint bookkeeping of a reader, locked while a checkpoint is written.
pub(crate) struct CpSlot {
    pub(crate) path: PathBuf,
}

/// A reader shared between the queue and every `Reader` handle.
pub(crate) struct ReaderShared {
    pub(crate) name: Mutex<String>,
    pub(crate) state: Mutex<ReaderState>,
    pub(crate) cp: Mutex<CpSlot>,
    /// The head segment recorded by the last checkpoint that reached the disk (0 while the
    /// reader has none): no segment from it on may be retired.
    pub(crate) durable_segment: AtomicU64,
    /// Where expired items and dead letters go.
    pub(crate) sinks: Mutex<Sinks>,
    /// Set by `remove_reader`: every handle fails from then on.
    pub(crate) removed: AtomicBool,
    /// Where the reader reads from, as last published (shared with its state).
    pub(crate) at: Arc<ReadingAt>,
    /// The queue's put count when this reader was set up (its `puts` count from there).
    pub(crate) puts_base: u64,
}

impl ReaderShared {
    pub(crate) fn name(&self) -> String {
        lock(&self.name).clone()
    }
}

/// Used by the queue to build readers.
pub(crate) fn new_shared(
    name: String,
    path: PathBuf,
    state: ReaderState,
    durable_segment: u64,
    puts_base: u64,
) -> Arc<ReaderShared> {
    Arc::new(ReaderShared {
        name: Mutex::new(name),
        cp: Mutex::new(CpSlot { path }),
        durable_segment: AtomicU64::new(durable_segment),
        sinks: Mutex::new(Sinks::default()),
        removed: AtomicBool::new(false),
        at: state.at.clone(),
        state: Mutex::new(state),
        puts_base,
    })
}
