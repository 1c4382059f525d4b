//! Reserving disk space ahead of the writer.
//!
//! An append past a file's allocated blocks makes the file system find blocks for it: on
//! ext4 that is about a tenth of the kernel's work for a 1 KiB `write` (delayed allocation
//! books every new page), and it comes back at writeback, which allocates the blocks. So the
//! leader, before it steps down, reserves the stretch of the segment ahead of it (`fallocate`
//! with `FALLOC_FL_KEEP_SIZE`, under the writer's lock: one call per up to 2 MiB of
//! records), and appends land in blocks already there.
//!
//! A reservation changes neither the file's length nor its bytes: the format, recovery and
//! what a crash can leave are unchanged (by default ext4 already allocates new data as
//! unwritten extents, converted once the data is on the disk; the length still decides what
//! recovery reads). Stretches grow with the segment, from 64 KiB up to 4 MiB, never past the
//! segment size and, beyond the first 64 KiB, never more than the segment already holds: a
//! queue holding a few items reserves little. When the queue closes, its last segment keeps
//! at most one stretch unused past its end, until it is retired. A failed reservation is
//! only logged (an append that then finds the disk full fails as before); a file system that
//! cannot reserve space is not asked again.

use crate::state::{Inner, Writer};

/// The smallest stretch reserved at once.
const MIN_STRETCH: u64 = 64 << 10;
/// The largest stretch reserved at once. A reservation costs about the same whatever its
/// size (4 to 10 µs on ext4 on the development machine, for 64 KiB as for 8 MiB), so the
/// stretches grow with the segment.
const MAX_STRETCH: u64 = 4 << 20;

impl Inner {
    /// Reserves the next stretch of the writer's segment once the writer is within half a
    /// stretch of the end of what it reserved. Every leader asks before it steps down, so
    /// the test is inlined and the rest is out of line.
    #[inline]
    pub(crate) fn reserve_ahead(&self, w: &mut Writer) {
        if w.offset >= w.reserve_at {
            self.reserve_next(w);
        }
    }

    #[cold]
    fn reserve_next(&self, w: &mut Writer) {
        let end = self.config.segment_size;
        let stretch = w.offset.clamp(MIN_STRETCH, MAX_STRETCH);
        let from = w.reserved.max(w.offset);
        let to = (w.offset + stretch).min(end);
        if to <= from {
            w.reserve_at = u64::MAX;
            return;
        }
        match w.file().reserve(from, to - from) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
                w.reserve_unsupported = true;
                w.reserve_at = u64::MAX;
                return;
            }
            Err(e) => {
                tracing::debug!(queue = %self.name, error = %e, "could not reserve space ahead of the writer");
            }
        }
        w.reserved = to;
        w.reserve_at = if to >= end {
            u64::MAX
        } else {
            to - stretch / 2
        };
    }
}
