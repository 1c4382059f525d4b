//! Mapped writes ([`JournalConfig::mapped_writes`](crate::JournalConfig::mapped_writes)):
//! puts store their records into a shared memory map of the writer's segment instead of
//! writing them.
//!
//! Each segment is allocated in full and mapped ([`WriteFile::map`]), with [`MAP_SLACK`]
//! to spare past the segment size, since the record that crosses the size is the segment's
//! last; then its pages are prepared for stores ([`WriteMap::prefaulter`]). The helper thread
//! that creates the next segment ahead of the writer does both ([`map_ahead`]; under mapped
//! writes it starts as soon as the writer starts a segment), so rotation only switches maps;
//! the segment a queue opens with is mapped and prepared by [`Inner::attach_map`]. Without
//! the preparation, the first store past the header waited 4 to 5 ms for the kernel's
//! readahead of the file (8 MiB on the development machine) and each later readahead window
//! about 2 ms.
//!
//! The helper hands the new segment over as soon as it is created and mapped, and prepares
//! its pages afterwards, while the writer may already store into them: rotation waits for
//! the creation only. Preparing 16 MiB takes about 10 ms of the helper's 12 to 20, and a
//! writer of small records on two busy processors filled a segment in about 20 ms, so a
//! rotation that waited for the preparation too stalled a put for up to 5 ms now and then
//! (`fairq qtest flood --mapped-writes`). A writer that catches up with the preparation
//! meets the page faults it would have met without it.
//!
//! A put encodes its records straight into the map at the writer's offset, under the
//! writer's lock: no system call, no buffer in between. Readers read the file with `pread`
//! as always; the page cache they read is the one the map writes, and they read no further
//! than what the writer published after its stores.
//!
//! The map is given up, and the file cut back to its records, when the segment is sealed
//! (on a helper thread, [`Inner::unmap_sealed`]), when the queue closes or is dropped
//! ([`Writer::unmap`]), and when a record does not fit in what is left of the map (the rest
//! of that segment is written as usual). A segment created ahead that is not used is cut
//! back to its header ([`discard_map`]). Until then a file is as long as its map, zeros
//! after the records: after a crash, recovery reads those zeros as the end of the segment
//! and cuts them off.

use crate::format::{
    encode_record_header, Record, RecordKind, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};
use crate::state::{Created, Inner, Writer};
use crate::storage::{Prefault, WriteFile, WriteMap};
use crate::JournalError;

/// What a map holds past the segment size: the record that crosses the size still fits if
/// it is at most this long (larger ones near a segment's end are written as usual).
pub(crate) const MAP_SLACK: u64 = 64 << 10;

/// Maps segment `seg` (its records end at `records_end`) for mapped writes: on the helper
/// thread that creates the segment ahead of the writer ([`map_ahead`]), or on the writer's
/// ([`Inner::attach_map`]). Its pages are prepared for stores afterwards
/// ([`WriteMap::prefaulter`]). `Ok(None)` when the file cannot be mapped; a failed
/// map is logged, and the file cut back to `records_end`, since the allocation may have
/// extended it with zeros. The error is the failure of that cut: the file then must not be
/// appended to, since the records would follow the zeros.
fn map_segment(
    queue: &str,
    seg: u64,
    file: &dyn WriteFile,
    len: u64,
    records_end: u64,
) -> std::io::Result<Option<Box<dyn WriteMap>>> {
    match file.map(len) {
        Ok(map) => Ok(map),
        Err(e) => {
            tracing::warn!(queue = %queue, segment = seg, error = %e, "could not map the segment; writing it as usual");
            file.set_len(records_end).map(|()| None)
        }
    }
}

/// [`map_segment`] for a segment just created ahead of the writer, on the helper thread.
pub(crate) fn map_ahead(
    queue: &str,
    seg: u64,
    file: &dyn WriteFile,
    len: u64,
) -> std::io::Result<Option<Box<dyn WriteMap>>> {
    map_segment(queue, seg, file, len, SEGMENT_HEADER_LEN as u64)
}

/// The work that prepares the pages of a segment created ahead, if it was mapped: the
/// helper thread runs it after handing the segment over ([`WriteMap::prefaulter`]).
pub(crate) fn prefaulter_of(created: &Result<Created, JournalError>) -> Option<Prefault> {
    created.as_ref().ok()?.1.as_ref()?.prefaulter()
}

/// A segment created ahead that the writer will not use (the queue closes, or it is not the
/// segment rotation needs): its map is given up and its file cut back to its header, as it
/// was created.
pub(crate) fn discard_map(queue: &str, (file, map): Created) {
    if map.is_some() {
        drop(map);
        if let Err(e) = file.set_len(SEGMENT_HEADER_LEN as u64) {
            tracing::warn!(queue = %queue, error = %e, "could not cut a segment created ahead back to its header; the next open cuts the zeros");
        }
    }
}

impl Inner {
    /// How long a segment's map is under mapped writes (`None`: puts are written).
    pub(crate) fn map_len(&self) -> Option<u64> {
        (self.config.mapped_writes && !self.read_only)
            .then(|| self.config.segment_size.saturating_add(MAP_SLACK))
    }

    /// Maps the writer's segment for mapped writes, when they are configured and the
    /// storage can. A failure is logged, and the segment is written as usual. (Rotation
    /// takes the map the helper made with the next segment; this is for the segment a
    /// queue opens with, or one made without a helper.)
    pub(crate) fn attach_map(&self, w: &mut Writer) {
        let Some(len) = self.map_len() else {
            return;
        };
        // On this thread, before the first store: 16 MiB took about 10 ms, once per open.
        match map_segment(&self.name, w.seg_id, w.file().as_ref(), len, w.offset) {
            Ok(Some(map)) => {
                if let Some(prepare) = map.prefaulter() {
                    prepare();
                }
                w.set_map(map);
            }
            Ok(None) => {}
            Err(e) => {
                self.poison(format!(
                    "could not cut {} back to its records after a failed map: {e}",
                    self.segment_path(w.seg_id).display()
                ));
            }
        }
    }
}

impl Writer {
    /// Makes `map` the map of the writer's segment, whose blocks it allocated.
    pub(crate) fn set_map(&mut self, map: Box<dyn WriteMap>) {
        self.map = Some(map);
        self.reserve_at = u64::MAX;
    }

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

    /// Gives up the segment's map, if any, and cuts the file back to its records; first
    /// waits for the map of a sealed segment being given up in the background.
    pub(crate) fn unmap(&mut self) -> std::io::Result<()> {
        self.finish_unmapping();
        if self.map.take().is_some() {
            self.file().set_len(self.offset)?;
        }
        Ok(())
    }

    /// Waits for the map given up by [`Inner::unmap_sealed`], if any.
    pub(crate) fn finish_unmapping(&mut self) {
        if let Some(handle) = self.unmapping.take() {
            // The thread logs its own failure; a panic there is a bug, not lost data.
            let _ = handle.join();
        }
    }
}

impl Inner {
    /// Rotation: gives up the map of the segment being sealed and cuts its file back to
    /// its records on a helper thread. Unmapping 16 MiB of written pages and truncating the
    /// unused allocation took 2 to 3 ms, which the put that rotates would otherwise wait for.
    /// A crash before the helper is done leaves the sealed segment's zeros, which recovery
    /// cuts (the next segment's header says the sealed one was not synced); its length in
    /// the index is the writer's offset, so readers never read the zeros. Close and drop
    /// wait for the helper.
    pub(crate) fn unmap_sealed(&self, w: &mut Writer) -> std::io::Result<()> {
        w.finish_unmapping();
        let Some(map) = w.map.take() else {
            return Ok(());
        };
        let (file, len) = (w.file().clone(), w.offset);
        let (queue, path) = (self.name.clone(), self.segment_path(w.seg_id));
        let cut = move || {
            drop(map);
            if let Err(e) = file.set_len(len) {
                tracing::warn!(queue = %queue, path = %path.display(), error = %e, "could not cut a sealed segment back to its records; the next open cuts the zeros");
            }
        };
        if !self.config.storage.helper_threads() {
            // The helper's work, with the helper's outcome, on the caller's thread.
            cut();
            return Ok(());
        }
        let spawned = std::thread::Builder::new()
            .name(format!("fairq-journal-unmap-{}", self.name))
            .stack_size(64 * 1024)
            .spawn(cut);
        match spawned {
            Ok(handle) => {
                w.unmapping = Some(handle);
                Ok(())
            }
            // No thread: give it up here.
            Err(_) => w.file().set_len(len),
        }
    }
}
