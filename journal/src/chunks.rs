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
//! Chunks stay while some reader has not passed them yet (readers drift apart by whole time
//! slices when there are more of them than cores), up to `JournalConfig::read_cache_bytes`;
//! chunks every reader has passed go at once, and over the cap the oldest go first.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::pos::Pos;
use crate::storage::{read_at_most, ReadFile, Storage};
use crate::sync::lock;

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
}

#[derive(Default)]
struct Cached {
    chunks: VecDeque<Arc<Chunk>>,
    files: VecDeque<(u64, Arc<dyn ReadFile>)>,
    /// Buffers of evicted chunks nobody held any more, reused without zeroing them again.
    spare: Vec<Vec<u8>>,
}

impl ChunkCache {
    /// A chunk holding at least `min` bytes at `pos`, from the cache if one does and
    /// `fresh` is false, else read now: `want` bytes (at most), from segment file `path`.
    /// `behind` is the oldest position some reader still reads from, and `cap` the bytes the
    /// cache may keep.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn get(
        &self,
        storage: &dyn Storage,
        path: &std::path::Path,
        pos: Pos,
        min: u64,
        want: u64,
        fresh: bool,
        behind: impl FnOnce() -> Pos,
        cap: usize,
    ) -> std::io::Result<Arc<Chunk>> {
        let (file, mut buf) = {
            let mut c = lock(&self.inner);
            if !fresh {
                if let Some(hit) = c.chunks.iter().rev().find(|ch| ch.holds(pos, min)) {
                    return Ok(hit.clone());
                }
            }
            let file = c
                .files
                .iter()
                .find(|(s, _)| *s == pos.seg)
                .map(|(_, f)| f.clone());
            (file, c.spare.pop().unwrap_or_default())
        };
        let file = match file {
            Some(f) => f,
            None => {
                let f: Arc<dyn ReadFile> = Arc::from(storage.open_read(path)?);
                let mut c = lock(&self.inner);
                c.files.push_back((pos.seg, f.clone()));
                if c.files.len() > KEEP_FILES {
                    c.files.pop_front();
                }
                f
            }
        };
        let want = want.max(min) as usize;
        if buf.len() < want.max(CHUNK_LEN) {
            buf.resize(want.max(CHUNK_LEN), 0);
        }
        let n = read_at_most(file.as_ref(), &mut buf[..want], pos.off)?;
        let chunk = Arc::new(Chunk {
            seg: pos.seg,
            start: pos.off,
            data: buf,
            len: n,
            checked: AtomicU64::new(pos.off),
        });
        let mut c = lock(&self.inner);
        if fresh {
            // A re-read after a bad decode: the cached copy may be the bad one.
            c.chunks
                .retain(|ch| !(ch.seg == pos.seg && ch.start <= pos.off && pos.off < ch.end()));
        }
        c.chunks.push_back(chunk.clone());
        let oldest = behind();
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

    /// Forgets the chunks and files of segments before `seg` (retired).
    pub(crate) fn forget_before(&self, seg: u64) {
        let mut c = lock(&self.inner);
        c.chunks.retain(|ch| ch.seg >= seg);
        c.files.retain(|(s, _)| *s >= seg);
    }
}
