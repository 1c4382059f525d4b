//! Mapped writes ([`JournalConfig::mapped_writes`](crate::JournalConfig::mapped_writes)):
//! puts store their records into a shared memory map of the writer's segment instead of
//! writing them.
//!
//! When the writer starts a segment, [`Inner::attach_map`] has the storage allocate the
//! whole segment and map it ([`WriteFile::map`](crate::storage::WriteFile::map)), with
//! [`MAP_SLACK`] to spare past the segment size, since the record that crosses the size is
//! the segment's last. A put then encodes its records straight into the map at the
//! writer's offset, under the writer's lock: no system call, no buffer in between. Readers
//! read the file with `pread` as always; the page cache they read is the one the map
//! writes, and they read no further than what the writer published after its stores.
//!
//! The map is given up ([`Writer::unmap`]), and the file cut back to the records, when
//! the segment is sealed, when the queue closes or is dropped, and when a record does not
//! fit in what is left of the map (the rest of that segment is written as usual). Until
//! then the file is as long as the map, zeros after the records: after a crash, recovery
//! reads those zeros as the end of the segment and cuts them off.

use crate::format::{encode_record_header, Record, RecordKind, RECORD_HEADER_LEN};
use crate::state::{Inner, Writer};

/// What a map holds past the segment size: the record that crosses the size still fits if
/// it is at most this long (larger ones near a segment's end are written as usual).
pub(crate) const MAP_SLACK: u64 = 64 << 10;

impl Inner {
    /// Maps the writer's segment for mapped writes, when they are configured and the
    /// storage can. A failure is logged, and the segment is written as usual.
    pub(crate) fn attach_map(&self, w: &mut Writer) {
        if !self.config.mapped_writes || self.read_only {
            return;
        }
        let len = self.config.segment_size.saturating_add(MAP_SLACK);
        match w.file().map(len) {
            Ok(Some(map)) => {
                w.map = Some(map);
                // The map's blocks are allocated already.
                w.reserve_at = u64::MAX;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(queue = %self.name, segment = w.seg_id, error = %e, "could not map the segment; writing it as usual");
                // The allocation may have extended the file: cut it back to the records.
                if let Err(e) = w.file().set_len(w.offset) {
                    self.poison(format!(
                        "could not cut {} back to its records after a failed map: {e}",
                        self.segment_path(w.seg_id).display()
                    ));
                }
            }
        }
    }
}

impl Writer {
    /// Stores the records of `items` (ids from `first`) into the map at the writer's
    /// offset and returns their length; `Ok(None)` when there is no map, or when they do
    /// not fit in it, in which case the map is given up and the caller writes them as
    /// usual. An error is the failure to cut the file back to its records.
    #[inline]
    pub(crate) fn store(
        &mut self,
        items: &[&[u8]],
        first: u64,
        added_at_ms: u64,
        expires_at_ms: Option<u64>,
    ) -> std::io::Result<Option<u64>> {
        let Some(map) = self.map.as_mut() else {
            return Ok(None);
        };
        let len: usize = items.iter().map(|d| RECORD_HEADER_LEN + d.len()).sum();
        let mut at = self.offset as usize;
        if at.checked_add(len).is_none_or(|end| end > map.len()) {
            self.unmap()?;
            return Ok(None);
        }
        for (i, d) in items.iter().enumerate() {
            let rec = Record {
                kind: RecordKind::Item,
                id: first + i as u64,
                added_at_ms,
                expires_at_ms,
                payload: d,
            };
            map.store(at, &[&encode_record_header(&rec), d]);
            at += RECORD_HEADER_LEN + d.len();
        }
        Ok(Some(len as u64))
    }

    /// Gives up the segment's map, if any, and cuts the file back to its records.
    pub(crate) fn unmap(&mut self) -> std::io::Result<()> {
        if self.map.take().is_some() {
            self.file().set_len(self.offset)?;
        }
        Ok(())
    }
}
