//! Pieces of segment files in memory, shared by every reader of a queue.
//!
//! Readers of a fan-out queue read the same bytes. The first reader that needs a stretch of a
//! segment reads it (64 KiB at a time) into a [`Chunk`] and checks each record's checksum as
//! it decodes it; readers that come by later find the chunk in the queue's [`ChunkCache`],
//! make no system call and skip the checksums already verified in it (the bytes in memory
//! cannot change). So a second, third, fourth reader costs little more than its own
//! bookkeeping and the copy of each payload.
//!
//! A chunk never holds bytes past what readers may read when it was read (the visible end of
//! the open segment, or a sealed segment's end), so it only ever holds complete records.
//!
//! A reader that needs bytes another reader is reading right now waits for that read
//! instead of making its own: readers running side by side (the usual fan-out) would
//! otherwise miss the cache together and each read and check every chunk.
//!
//! Chunks stay while some reader has not passed them yet (readers drift apart by whole time
//! slices when there are more of them than cores), up to `JournalConfig::read_cache_bytes`;
//! chunks every reader has passed go at once, and over the cap the oldest go first.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::pos::Pos;
use crate::reader_state::ReadingAt;
use crate::storage::{read_at_most, ReadFile, Storage};
use crate::sync::lock;
use crate::sync::proto::{self, Condvar, Mutex};

/// How much one chunk reads at least.
pub(crate) const CHUNK_LEN: usize = 64 * 1024;
/// Open segment files kept.
const KEEP_FILES: usize = 4;

/// Bytes of one segment from `start`.
pub(crate) struct Chunk {
    pub(crate) seg: u64,
    pub(crate) start: u64,
    /// The buffer; its first `len` bytes are the segment's.
    data: Vec<u8>,
    len: usize,
    /// Every record that starts in `[start, checked)` was decoded with a valid checksum.
    checked: AtomicU64,
}

impl Chunk {
    /// Whether the chunk holds `len` bytes at `pos`.
    pub(crate) fn holds(&self, pos: Pos, len: u64) -> bool {
        self.seg == pos.seg && pos.off >= self.start && pos.off + len <= self.end()
    }

    pub(crate) fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    /// The bytes from `off` to the end of the chunk.
    pub(crate) fn from(&self, off: u64) -> &[u8] {
        &self.data[(off - self.start) as usize..self.len]
    }

    /// Whether the record at `off` had its checksum verified already.
    pub(crate) fn is_checked(&self, off: u64) -> bool {
        off < self.checked.load(Ordering::Acquire)
    }

    /// The record at `off`, `len` bytes long, passed its checksum.
    pub(crate) fn mark_checked(&self, off: u64, len: u64) {
        // Only extends a contiguous run: records are checked in file order.
        let _ = self
            .checked
            .compare_exchange(off, off + len, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The chunks and open files of one queue.
#[derive(Default)]
pub(crate) struct ChunkCache {
    inner: Mutex<Cached>,
    /// Where each reader of the queue reads from: chunks every reader has passed go. A leaf
    /// lock of its own (not the queue's reader list), so a read that others wait for never
    /// waits for a lock that one of them may hold.
    readers: std::sync::Mutex<Vec<Arc<ReadingAt>>>,
    /// Notified when a read in `Cached::loading` ends (with a chunk or without).
    loaded: Condvar,
}

#[derive(Default)]
struct Cached {
    chunks: VecDeque<Arc<Chunk>>,
    files: VecDeque<(u64, Arc<dyn ReadFile>)>,
    /// Buffers of evicted chunks nobody held any more, reused without zeroing them again.
    spare: Vec<Vec<u8>>,
    /// Reads under way: (segment, start, end, ticket).
    loading: Vec<(u64, u64, u64, u64)>,
    next_ticket: u64,
}

impl Cached {
    /// Whether a read under way will bring `len` bytes at `pos`.
    fn being_read(&self, pos: Pos, len: u64) -> bool {
        self.loading
            .iter()
            .any(|&(seg, start, end, _)| seg == pos.seg && start <= pos.off && pos.off + len <= end)
    }
}

impl ChunkCache {
    /// Counts a reader's position in (a new reader, or every reader at open).
    pub(crate) fn track(&self, at: Arc<ReadingAt>) {
        lock(&self.readers).push(at);
    }

    /// Leaves a reader's position out (a removed reader).
    pub(crate) fn untrack(&self, at: &Arc<ReadingAt>) {
        lock(&self.readers).retain(|r| !Arc::ptr_eq(r, at));
    }

    /// The oldest position some reader still reads from.
    fn behind(&self) -> Pos {
        lock(&self.readers)
            .iter()
            .map(|r| r.get())
            .min()
            .unwrap_or_default()
    }

    /// A chunk holding at least `min` bytes at `pos`, from the cache if one does and
    /// `fresh` is false, else read now: `want` bytes (at most), from segment file `path`.
    /// `cap` is the bytes the cache may keep.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get(
        &self,
        storage: &dyn Storage,
        path: &std::path::Path,
        pos: Pos,
        min: u64,
        want: u64,
        fresh: bool,
        cap: usize,
    ) -> std::io::Result<Arc<Chunk>> {
        let want = want.max(min) as usize;
        let (file, mut buf, ticket) = {
            let mut c = proto::lock(&self.inner);
            if !fresh {
                loop {
                    if let Some(hit) = c.chunks.iter().rev().find(|ch| ch.holds(pos, min)) {
                        return Ok(hit.clone());
                    }
                    if !c.being_read(pos, min) {
                        break;
                    }
                    // Another reader is reading these bytes: wait for its chunk (or, if its
                    // read fails, read them here).
                    c = self.loaded.wait(c).unwrap_or_else(|p| p.into_inner());
                }
            }
            let ticket = c.next_ticket;
            c.next_ticket += 1;
            c.loading
                .push((pos.seg, pos.off, pos.off + want as u64, ticket));
            let file = c
                .files
                .iter()
                .find(|(s, _)| *s == pos.seg)
                .map(|(_, f)| f.clone());
            (file, c.spare.pop().unwrap_or_default(), ticket)
        };
        let read = self.read(storage, path, pos, want, file, &mut buf);
        let mut c = proto::lock(&self.inner);
        c.loading.retain(|l| l.3 != ticket);
        self.loaded.notify_all();
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                if buf.len() == CHUNK_LEN && c.spare.len() < 4 {
                    c.spare.push(buf);
                }
                return Err(e);
            }
        };
        let chunk = Arc::new(Chunk {
            seg: pos.seg,
            start: pos.off,
            data: buf,
            len: n,
            checked: AtomicU64::new(pos.off),
        });
        if fresh {
            // A re-read after a bad decode: the cached copy may be the bad one.
            c.chunks
                .retain(|ch| !(ch.seg == pos.seg && ch.start <= pos.off && pos.off < ch.end()));
        }
        c.chunks.push_back(chunk.clone());
        let oldest = self.behind();
        let passed = |ch: &Chunk| {
            Pos {
                seg: ch.seg,
                off: ch.end(),
            } <= oldest
        };
        let mut kept = 0usize;
        let mut i = c.chunks.len();
        // Newest first: keep what some reader still needs while it fits under the cap.
        let mut keep = vec![false; i];
        while i > 0 {
            i -= 1;
            let ch = &c.chunks[i];
            if Arc::ptr_eq(ch, &chunk) || (!passed(ch) && kept + ch.data.len() <= cap) {
                kept += ch.data.len();
                keep[i] = true;
            }
        }
        let old = std::mem::take(&mut c.chunks);
        for (ch, keep) in old.into_iter().zip(keep) {
            if keep {
                c.chunks.push_back(ch);
            } else if let Ok(gone) = Arc::try_unwrap(ch) {
                if gone.data.len() == CHUNK_LEN && c.spare.len() < 4 {
                    c.spare.push(gone.data);
                }
            }
        }
        Ok(chunk)
    }

    /// Reads `want` bytes at `pos` into `buf` from segment file `path` (opened now unless
    /// `file` is it, and then kept open).
    fn read(
        &self,
        storage: &dyn Storage,
        path: &std::path::Path,
        pos: Pos,
        want: usize,
        file: Option<Arc<dyn ReadFile>>,
        buf: &mut Vec<u8>,
    ) -> std::io::Result<usize> {
        let file = match file {
            Some(f) => f,
            None => {
                let f: Arc<dyn ReadFile> = Arc::from(storage.open_read(path)?);
                let mut c = proto::lock(&self.inner);
                c.files.push_back((pos.seg, f.clone()));
                if c.files.len() > KEEP_FILES {
                    c.files.pop_front();
                }
                f
            }
        };
        if buf.len() < want.max(CHUNK_LEN) {
            buf.resize(want.max(CHUNK_LEN), 0);
        }
        read_at_most(file.as_ref(), &mut buf[..want], pos.off)
    }

    /// Forgets the chunks and files of segments before `seg` (retired).
    pub(crate) fn forget_before(&self, seg: u64) {
        let mut c = proto::lock(&self.inner);
        c.chunks.retain(|ch| ch.seg >= seg);
        c.files.retain(|(s, _)| *s >= seg);
    }
}
