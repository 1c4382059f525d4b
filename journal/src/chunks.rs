//! Pieces of segment files in memory, shared by every reader of a queue.
//!
//! Readers of a fan-out queue read the same bytes. The first reader that needs a stretch of a
//! segment reads it (256 KiB at a time, less at the end of what may be read) into a
//! [`Chunk`] and checks each record's checksum as it decodes it; readers that come by later
//! find the chunk in the queue's [`ChunkCache`], make no system call and skip the checksums
//! already verified in it (the bytes in memory cannot change). So a second, third, fourth
//! reader costs little more than its own bookkeeping: items hand out slices of the chunk's
//! bytes ([`Bytes`]), not copies. Each reader wraps a chunk in a [`Bytes`] of its own
//! ([`Held`]), so the reference count its items update is one no other reader's items write
//! to (a count shared by every reader of a chunk would bounce between cores at every item).
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
//! chunks every reader has passed go at once, and over the cap the oldest go first. A chunk's
//! buffer goes back to the cache's spare buffers when the last slice of it is dropped (by the
//! cache, a reader or an item the application held on to), so the next read reuses it
//! without allocating it or zeroing it again.
//!
//! Buffers come in two sizes. A reader behind the writers reads [`RUN_LEN`] bytes at a time:
//! fewer system calls, and fewer chunk changes, each of which takes the cache's lock and, in
//! a fan-out, may find another reader's read of the chunk under way and wait for it. A read
//! of no more than [`CHUNK_LEN`] (a reader at the writers' heels, which reads what was just
//! put) takes a buffer of that size, so that the items an application holds from such reads
//! keep 64 KiB each in memory, not 256.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use crate::pos::Pos;
use crate::pos::ReadingAt;
use crate::storage::{read_at_most, ReadFile, Storage};
use crate::sync::lock;
use crate::sync::proto::{self, Condvar, Mutex};

/// The smaller of the two buffer sizes: that of a read of this many bytes or fewer.
pub(crate) const CHUNK_LEN: usize = 64 * 1024;
/// How much one chunk reads when that much may be read (the larger buffer size). Against
/// reading 64 KiB at a time, on a Zen 5 machine (the journal bench's ratio rows, binaries
/// in turns, two runs each): get+commit of 1 KiB items 5.43 and 5.45 million a second
/// against 5.26 and 5.25; four fan-out readers 11.6 and 13.3 million deliveries a second
/// against 11.5 and 10.8 (2.20x and 2.47x one reader, against 2.21x and 2.16x).
pub(crate) const RUN_LEN: usize = 256 * 1024;

/// The size of the buffer a read of `want` bytes takes: [`CHUNK_LEN`] or [`RUN_LEN`] (which
/// the spare buffers keep), or `want` itself for a record larger than that.
fn buffer_len(want: usize) -> usize {
    if want <= CHUNK_LEN {
        CHUNK_LEN
    } else {
        want.max(RUN_LEN)
    }
}

/// Open segment files kept.
const KEEP_FILES: usize = 4;
/// The share of the cache's cap kept in spare buffers (1/8), up to [`SPARE_MAX`] and at
/// least one buffer of either size.
const SPARE_SHARE: usize = 8;
/// The most bytes kept in spare buffers, whatever the cap: 2 MiB, what an idle queue held
/// when the default cap was 16 MiB. With the default 64 MiB, 8 MiB of spare buffers took
/// four readers 3% more deliveries a second than 2 MiB in `journal_ops`, not worth 6 MiB
/// more held by every idle fan-out queue.
const SPARE_MAX: usize = 2 << 20;

/// Buffers of chunks nobody holds any more, reused without allocating or zeroing them again.
/// A leaf lock of its own: a buffer comes back here wherever its last slice is dropped, which
/// may be while the cache's lock is held (a chunk evicted) or in the application (an item).
///
/// Readers that drift apart (more readers than cores, each running for whole time slices)
/// free chunks in bursts; the spare buffers absorb a burst so the next reads reuse them,
/// instead of the allocator giving the memory back and the next read faulting it in and
/// zeroing it again. Idle, they hold at most an eighth of the cache's cap, and no more
/// than 2 MiB.
struct Spare {
    bufs: std::sync::Mutex<Vec<Vec<u8>>>,
    /// The most bytes of buffers kept.
    keep: usize,
}

impl Spare {
    /// A spare buffer of `len` bytes if one is kept, else an empty one.
    fn take(&self, len: usize) -> Vec<u8> {
        let mut spare = lock(&self.bufs);
        match spare.iter().rposition(|b| b.len() == len) {
            Some(i) => spare.swap_remove(i),
            None => Vec::new(),
        }
    }

    fn give(&self, buf: Vec<u8>) {
        if buf.len() == CHUNK_LEN || buf.len() == RUN_LEN {
            let mut spare = lock(&self.bufs);
            if spare.iter().map(Vec::len).sum::<usize>() + buf.len() <= self.keep {
                spare.push(buf);
            }
        }
    }
}

/// A chunk's buffer: back to the spare buffers when dropped.
struct Buffer {
    data: Vec<u8>,
    spare: Arc<Spare>,
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.spare.give(std::mem::take(&mut self.data));
    }
}

/// Bytes of one segment from `start`.
pub(crate) struct Chunk {
    pub(crate) seg: u64,
    pub(crate) start: u64,
    /// The buffer; its first `len` bytes are the segment's.
    data: Buffer,
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
        &self.data.data[(off - self.start) as usize..self.len]
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

/// A reader's hold on a chunk: the chunk, and its bytes as a [`Bytes`] of this reader's own,
/// which the reader's items slice.
pub(crate) struct Held {
    chunk: Arc<Chunk>,
    bytes: Bytes,
}

/// The owner of a [`Held`]'s bytes: the chunk's bytes, as long as any slice of them lives.
struct Whole(Arc<Chunk>);

impl AsRef<[u8]> for Whole {
    fn as_ref(&self) -> &[u8] {
        self.0.from(self.0.start)
    }
}

impl Held {
    pub(crate) fn new(chunk: Arc<Chunk>) -> Self {
        Held {
            bytes: Bytes::from_owner(Whole(chunk.clone())),
            chunk,
        }
    }

    /// `part` (of [`Chunk::from`]'s bytes) as a slice sharing the chunk's buffer: no copy.
    pub(crate) fn share(&self, part: &[u8]) -> Bytes {
        self.bytes.slice_ref(part)
    }
}

impl std::ops::Deref for Held {
    type Target = Chunk;

    fn deref(&self) -> &Chunk {
        &self.chunk
    }
}

/// The chunks and open files of one queue.
pub(crate) struct ChunkCache {
    inner: Mutex<Cached>,
    /// Where each reader of the queue reads from: chunks every reader has passed go. A leaf
    /// lock of its own (not the queue's reader list), so a read that others wait for never
    /// waits for a lock that one of them may hold.
    readers: std::sync::Mutex<Vec<Arc<ReadingAt>>>,
    /// Notified when a read in `Cached::loading` ends (with a chunk or without).
    loaded: Condvar,
    spare: Arc<Spare>,
}

#[derive(Default)]
struct Cached {
    chunks: VecDeque<Arc<Chunk>>,
    files: VecDeque<(u64, Arc<dyn ReadFile>)>,
    /// Reads under way: (segment, start, end, ticket).
    loading: Vec<(u64, u64, u64, u64)>,
    /// Readers waiting on `loaded` for one of those reads. A read that ends while none
    /// waits notifies nobody: `std`'s notification is a system call even then.
    waiting: usize,
    next_ticket: u64,
    /// Which chunks to keep, worked out at each new chunk (reused, so that a chunk's read
    /// allocates nothing for it).
    keep: Vec<bool>,
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
    /// A cache that keeps up to `cap` bytes of chunks (`JournalConfig::read_cache_bytes`).
    pub(crate) fn new(cap: usize) -> Self {
        ChunkCache {
            inner: Mutex::default(),
            readers: std::sync::Mutex::default(),
            loaded: Condvar::default(),
            spare: Arc::new(Spare {
                bufs: std::sync::Mutex::default(),
                keep: (cap / SPARE_SHARE).clamp(RUN_LEN, SPARE_MAX),
            }),
        }
    }

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
                    c.waiting += 1;
                    c = self.loaded.wait(c).unwrap_or_else(|p| p.into_inner());
                    c.waiting -= 1;
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
            (file, self.spare.take(buffer_len(want)), ticket)
        };
        let read = self.read(storage, path, pos, want, file, &mut buf);
        let mut c = proto::lock(&self.inner);
        c.loading.retain(|l| l.3 != ticket);
        if c.waiting > 0 {
            self.loaded.notify_all();
        }
        let n = match read {
            Ok(n) => n,
            Err(e) => {
                self.spare.give(buf);
                return Err(e);
            }
        };
        let chunk = Arc::new(Chunk {
            seg: pos.seg,
            start: pos.off,
            data: Buffer {
                data: buf,
                spare: self.spare.clone(),
            },
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
        let mut keep = std::mem::take(&mut c.keep);
        keep.clear();
        keep.resize(i, false);
        while i > 0 {
            i -= 1;
            let ch = &c.chunks[i];
            if Arc::ptr_eq(ch, &chunk) || (!passed(ch) && kept + ch.data.data.len() <= cap) {
                kept += ch.data.data.len();
                keep[i] = true;
            }
        }
        // In place (`retain` visits the chunks once each, oldest first). Chunks dropped
        // here hand their buffers to the spare ones unless some reader or item still holds
        // them (then the last of those does).
        let mut decided = keep.iter();
        c.chunks.retain(|_| decided.next().copied().unwrap_or(true));
        c.keep = keep;
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
        let size = buffer_len(want);
        if buf.len() < size {
            buf.resize(size, 0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::RECORD_HEADER_LEN;
    use crate::{JournalConfig, JournaledQueue};

    const ITEM: usize = 1000;

    fn queue(dir: &std::path::Path, cache: usize) -> JournaledQueue {
        let config = JournalConfig {
            read_cache_bytes: cache,
            ..JournalConfig::default()
        };
        JournaledQueue::open(dir, "q", config).unwrap()
    }

    fn payload(i: usize) -> Vec<u8> {
        vec![i as u8; ITEM]
    }

    /// Bytes of spare buffers kept.
    fn spare(q: &JournaledQueue) -> usize {
        lock(&q.inner.chunks.spare.bufs).iter().map(Vec::len).sum()
    }

    /// An item's bytes are a slice of the chunk they were read in, not a copy: consecutive
    /// items of one chunk lie one record apart in memory.
    #[test]
    fn items_slice_the_chunk_they_were_read_in() {
        let dir = tempfile::tempdir().unwrap();
        let q = queue(dir.path(), 16 << 20);
        for i in 0..3 {
            q.put(&payload(i)).unwrap();
        }
        let r = q.reader("").unwrap();
        let a = r.get().unwrap().unwrap();
        let b = r.get().unwrap().unwrap();
        assert_eq!(
            (&a.data[..], &b.data[..]),
            (&payload(0)[..], &payload(1)[..])
        );
        let gap = b.data.as_ptr() as usize - a.data.as_ptr() as usize;
        assert_eq!(gap, ITEM + RECORD_HEADER_LEN);
    }

    /// Items held past their chunk's eviction keep their bytes (the buffer is not reused
    /// under them), and the buffer comes back to the spare ones when the last item goes.
    #[test]
    fn held_items_keep_their_bytes_and_release_the_buffer_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        // One reader: a chunk is evicted as soon as it has been read through.
        let q = queue(dir.path(), 32 * RUN_LEN);
        let per_chunk = RUN_LEN / (ITEM + RECORD_HEADER_LEN);
        let n = per_chunk * 12;
        for i in 0..n {
            q.put(&payload(i)).unwrap();
        }
        let r = q.reader("").unwrap();
        let first = r.get().unwrap().unwrap();
        r.commit(first.id).unwrap();
        for i in 1..n {
            let item = r.get().unwrap().unwrap();
            assert_eq!(&item.data[..], &payload(i)[..], "item {i}");
            r.commit(item.id).unwrap();
        }
        // Every later chunk reused spare buffers; the first one's is still held.
        assert_eq!(&first.data[..], &payload(0)[..]);
        let before = spare(&q);
        assert!(before < q.inner.chunks.spare.keep, "{before} spare buffers");
        drop(r);
        drop(first);
        assert_eq!(spare(&q), before + RUN_LEN, "the held buffer came back");
    }

    /// The spare buffers' limit: an eighth of the cap, at least one buffer of either size,
    /// at most `SPARE_MAX`.
    #[test]
    fn spare_buffers_are_an_eighth_of_the_cap_within_bounds() {
        let keep = |cap: usize| ChunkCache::new(cap).spare.keep;
        assert_eq!(keep(0), RUN_LEN);
        assert_eq!(keep(16 * CHUNK_LEN), RUN_LEN);
        assert_eq!(keep(16 * RUN_LEN), 2 * RUN_LEN);
        assert_eq!(keep(16 << 20), 2 << 20);
        assert_eq!(keep(JournalConfig::default().read_cache_bytes), SPARE_MAX);
        assert_eq!(keep(usize::MAX), SPARE_MAX);
    }

    /// A read of what was just put (a reader at the writers' heels) takes a small buffer,
    /// a read of a backlog a large one; both come back to the spare buffers and are taken
    /// again by reads of their size, never by the other's.
    #[test]
    fn reads_take_buffers_of_their_size() {
        assert_eq!(buffer_len(1), CHUNK_LEN);
        assert_eq!(buffer_len(CHUNK_LEN), CHUNK_LEN);
        assert_eq!(buffer_len(CHUNK_LEN + 1), RUN_LEN);
        assert_eq!(buffer_len(RUN_LEN), RUN_LEN);
        assert_eq!(buffer_len(RUN_LEN + 1), RUN_LEN + 1);
        let dir = tempfile::tempdir().unwrap();
        let q = queue(dir.path(), 32 * RUN_LEN);
        let r = q.reader("").unwrap();
        // At the writer's heels: one record visible, one small read.
        q.put(&payload(0)).unwrap();
        let first = r.get().unwrap().unwrap();
        // Behind: a backlog of two large reads' worth.
        let per_run = RUN_LEN / (ITEM + RECORD_HEADER_LEN);
        for i in 1..=2 * per_run {
            q.put(&payload(i)).unwrap();
        }
        let second = r.get().unwrap().unwrap();
        assert_eq!(
            (&first.data[..], &second.data[..]),
            (&payload(0)[..], &payload(1)[..])
        );
        let sizes = |q: &JournaledQueue| -> Vec<usize> {
            lock(&q.inner.chunks.spare.bufs)
                .iter()
                .map(Vec::len)
                .collect()
        };
        // The small chunk is held by the first item only (the reader has passed it), the
        // large one by the reader and the cache.
        assert_eq!(sizes(&q), Vec::<usize>::new());
        drop(first);
        assert_eq!(sizes(&q), vec![CHUNK_LEN], "the small buffer came back");
        // A large read does not take it; a small one does.
        assert!(q.inner.chunks.spare.take(RUN_LEN).is_empty());
        assert_eq!(q.inner.chunks.spare.take(CHUNK_LEN).len(), CHUNK_LEN);
        drop(second);
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// Put this many items.
        Put(usize),
        /// Reader 0 or 1 gets (and commits) up to this many items, holding each one if the
        /// flag says so.
        Get(usize, usize, bool),
        /// Drop every held item (an even number) or the one at this index (modulo their
        /// number).
        Release(usize),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            // Single items (reads at the writer's heels) and backlogs past 256 KiB.
            (1usize..4).prop_map(Op::Put),
            (60usize..400).prop_map(Op::Put),
            (0usize..2, 1usize..400, any::<bool>()).prop_map(|(r, n, h)| Op::Get(r, n, h)),
            any::<usize>().prop_map(Op::Release),
        ]
    }

    /// An item's bytes: its number, then filler.
    fn numbered(i: usize) -> Vec<u8> {
        let mut v = vec![0xA5; ITEM];
        v[..8].copy_from_slice(&(i as u64).to_le_bytes());
        v
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Two readers that read at the writer's heels and behind it, in any interleaving,
        /// with items held and let go at random, against a model that counts what each
        /// reader should get next: every item arrives in order with its bytes, also after
        /// the buffer it was read into went through the spare buffers, and the spare buffers
        /// only ever hold buffers of the two sizes, within their limit.
        #[test]
        fn reads_of_both_sizes_deliver_every_item_and_keep_the_spare_buffers_bounded(
            ops in proptest::collection::vec(op(), 1..32),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let config = JournalConfig {
                read_cache_bytes: 4 * RUN_LEN,
                sync: crate::SyncPolicy::Never,
                ..JournalConfig::default()
            };
            let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
            let readers = [q.reader("a").unwrap(), q.reader("b").unwrap()];
            let (mut put, mut next) = (0usize, [0usize; 2]);
            let mut held: Vec<(usize, crate::Item)> = Vec::new();
            for op in ops {
                match op {
                    Op::Put(n) => {
                        for _ in 0..n {
                            q.put(&numbered(put)).unwrap();
                            put += 1;
                        }
                    }
                    Op::Get(r, n, hold) => {
                        for _ in 0..n.min(put - next[r]) {
                            let item = readers[r].get().unwrap().unwrap();
                            proptest::prop_assert_eq!(&item.data[..], &numbered(next[r])[..]);
                            readers[r].commit(item.id).unwrap();
                            if hold {
                                held.push((next[r], item));
                            }
                            next[r] += 1;
                        }
                        if next[r] == put {
                            proptest::prop_assert!(readers[r].get().unwrap().is_none());
                        }
                    }
                    Op::Release(k) if k % 2 == 0 => held.clear(),
                    Op::Release(k) => {
                        if !held.is_empty() {
                            held.swap_remove(k % held.len());
                        }
                    }
                }
                for (i, item) in &held {
                    proptest::prop_assert_eq!(&item.data[..], &numbered(*i)[..]);
                }
                let bufs: Vec<usize> = lock(&q.inner.chunks.spare.bufs)
                    .iter()
                    .map(Vec::len)
                    .collect();
                proptest::prop_assert!(bufs.iter().all(|&l| l == CHUNK_LEN || l == RUN_LEN), "{:?}", bufs);
                proptest::prop_assert!(bufs.iter().sum::<usize>() <= q.inner.chunks.spare.keep);
            }
        }
    }

    /// The spare buffers stay within their share of the cache's cap however many chunks
    /// are freed at once.
    #[test]
    fn spare_buffers_stay_within_their_share_of_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let q = queue(dir.path(), 16 * RUN_LEN);
        let keep = q.inner.chunks.spare.keep;
        assert_eq!(keep, 2 * RUN_LEN);
        let per_chunk = RUN_LEN / (ITEM + RECORD_HEADER_LEN);
        let n = per_chunk * 10;
        for i in 0..n {
            q.put(&payload(i)).unwrap();
        }
        let r = q.reader("").unwrap();
        // Hold one item of every chunk, then let them all go at once.
        let mut held = Vec::new();
        for i in 0..n {
            let item = r.get().unwrap().unwrap();
            r.commit(item.id).unwrap();
            if i % per_chunk == 0 {
                held.push(item);
            }
        }
        assert!(held.len() * RUN_LEN > keep);
        drop(r);
        drop(held);
        assert_eq!(spare(&q), keep);
    }
}
