//! Durability: segment rotation, group commit, the periodic sync thread and creating
//! segments. Appending records is in `append.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::PutOptions;
use crate::files::segment_name;
use crate::format::{encode_segment_header, SegmentHeader};
use crate::item::ItemId;
use crate::mapped::{discard_map, map_ahead, prefaulter_of};
use crate::pos::Pos;
use crate::state::{Created, Creating, Inner, NextSegment, Sealed, Writer};
use crate::storage::{write_all, Storage, WriteFile};
use crate::sync::lock;
use crate::sync::proto;
use crate::tail::record_tail;
use crate::JournalError;

impl Inner {
    #[inline]
    pub(crate) fn put(&self, data: &[u8], opts: PutOptions) -> Result<ItemId, JournalError> {
        let id = self.put_records(&[data], opts)?;
        self.sync_if_due();
        Ok(ItemId(id))
    }

    /// Seals the writer's segment (after syncing it) and starts the next one.
    pub(crate) fn rotate(&self, w: &mut Writer) -> Result<(), JournalError> {
        let old = w.seg_id;
        let old_path = self.segment_path(old);
        let Some(new) = crate::recovery::next_segment_id(old) else {
            return Err(crate::recovery::no_segment_after(&old_path, old));
        };
        // Under Always and Group the sealed segment must be complete on disk before the next
        // one exists. Under Never and Periodic it is synced later, and the next segment's
        // header says so, which lets recovery treat a torn end of it as a torn tail.
        let sync_now = self.config.sync.is_durable_on_put();
        self.unmap_sealed(w)
            .map_err(|e| JournalError::io(&old_path, e))?;
        if sync_now {
            w.file()
                .sync_data()
                .map_err(|e| JournalError::io(&old_path, e))?;
        }
        let (file, map) = match self.take_next(w, new) {
            Some(created) => created,
            None => match create_segment(
                self.storage(),
                &self.dir,
                &self.name,
                new,
                !sync_now,
                self.config.file_mode,
            ) {
                Ok(file) => (file, None),
                Err(e) if e.is_storage_full() => return Err(self.rotation_stuck(w, e)),
                Err(e) => return Err(e),
            },
        };
        if !sync_now {
            w.unsynced_sealed.push(old);
        }
        {
            let mut idx = lock(&self.index);
            idx.segs.insert(old, Some(Sealed { len: w.offset }));
            idx.segs.insert(new, None);
        }
        w.seg_id = new;
        w.set_file(file);
        w.offset = crate::format::SEGMENT_HEADER_LEN as u64;
        match map {
            Some(map) => w.set_map(map),
            None => self.attach_map(w),
        }
        let start = w.end();
        if sync_now {
            self.mark_synced(start);
        }
        self.publish_held(w, start);
        Ok(())
    }

    /// The next segment could not be created for want of room (the new file was removed
    /// again): the writer stays on its segment, which grows past `segment_size` until a
    /// later put finds room for the rotation. Under `Always` and `Group` the segment was
    /// synced before the creation, so everything written is durable. Returns `e`, for
    /// `JournaledQueue::rotate` to report; a put's rotation only logs it.
    #[cold]
    fn rotation_stuck(&self, w: &mut Writer, e: JournalError) -> JournalError {
        // A map given up for the sealing is cut back on a helper thread: wait for it, as
        // the writer now appends to the file itself.
        w.finish_unmapping();
        w.rotation_stuck_at = w.offset;
        let end = w.end();
        if self.config.sync.is_durable_on_put() {
            self.mark_synced(end);
        }
        self.publish_held(w, end);
        tracing::warn!(queue = %self.name, error = %e, "no room to start the next segment; writing on in the current one");
        e
    }

    /// Under `Never` and `Periodic`, once the writer's segment is half full (under mapped
    /// writes: at once, and the helper maps the new segment too), starts creating the next
    /// one on a helper thread: rotation then finds it ready instead of waiting for the two
    /// syncs a new segment needs (its header and its directory entry). Rotation
    /// under these policies does not sync the sealed segment, so the new segment's header
    /// says so (`prev_unsynced`), as an inline creation's would. A crash leaves at most one
    /// empty (or torn) segment after the writer's, which recovery reuses (or removes).
    ///
    /// Every lone put asks, so the test is inlined and the rest is out of line.
    #[inline]
    pub(crate) fn create_next_ahead(&self, w: &mut Writer) {
        // Mapped puts fill a segment about three times as fast, faster than the helper's
        // syncs on ext4 once it starts half way (the put that rotated then waited for it,
        // up to 6 ms): with a map the helper starts with the segment.
        if (w.offset < self.config.segment_size / 2 && w.map.is_none())
            || w.next.is_some()
            || self.config.sync.is_durable_on_put()
        {
            return;
        }
        self.spawn_next(w);
    }

    #[cold]
    fn spawn_next(&self, w: &mut Writer) {
        let Some(seg) = crate::recovery::next_segment_id(w.seg_id) else {
            // Rotation reports it.
            return;
        };
        let path = self.segment_path(seg);
        let (storage, dir, name, mode) = (
            self.config.storage.clone(),
            self.dir.clone(),
            self.name.clone(),
            self.config.file_mode,
        );
        let map_len = self.map_len();
        let create = move || {
            let file = create_segment(storage.as_ref(), &dir, &name, seg, true, mode)?;
            let map = match map_len {
                // A failed cut after a failed map fails the helper: rotation then
                // cannot create the segment again and poisons the queue, rather than
                // appending after the zeros.
                Some(len) => map_ahead(&name, seg, file.as_ref(), len)
                    .map_err(|e| JournalError::io(dir.join(segment_name(&name, seg)), e))?,
                None => None,
            };
            Ok((file, map))
        };
        if !self.config.storage.helper_threads() {
            // The same work at the same point of the run, on the caller's thread.
            let created = create();
            if let Some(prepare) = prefaulter_of(&created) {
                prepare();
            }
            w.next = Some(NextSegment {
                seg,
                path,
                creating: Creating::Done(created),
            });
            return;
        }
        // The segment goes to rotation as soon as it exists; the pages of its map are
        // prepared after that, so that rotation does not wait for them (`mapped.rs`).
        let (send, created) = std::sync::mpsc::sync_channel(1);
        let helper = move || {
            let made = create();
            let prepare = prefaulter_of(&made);
            // Rotation may be gone (the queue closed): then nobody needs the pages either.
            if send.send(made).is_ok()
                && let Some(prepare) = prepare
            {
                prepare();
            }
        };
        // A small stack: the thread only creates (and maps) a file, and until rotation
        // takes the segment, its stack stays reserved.
        let spawned = std::thread::Builder::new()
            .name(format!("fairq-journal-next-{}", self.name))
            .stack_size(64 * 1024)
            .spawn(helper);
        match spawned {
            Ok(handle) => {
                w.next = Some(NextSegment {
                    seg,
                    path,
                    creating: Creating::Thread { handle, created },
                })
            }
            // Rotation creates it then.
            Err(e) => {
                tracing::debug!(queue = %self.name, error = %e, "no thread to create the next segment ahead")
            }
        }
    }

    /// The next segment created ahead, if it is `seg` and was created; waits for its helper.
    fn take_next(&self, w: &mut Writer, seg: u64) -> Option<Created> {
        let next = w.next.take()?;
        match next.creating.join() {
            Ok(Ok(created)) if next.seg == seg => Some(created),
            Ok(Ok(created)) => {
                discard_map(&self.name, created);
                None
            }
            Ok(Err(e)) => {
                tracing::warn!(queue = %self.name, error = %e, "creating the next segment ahead failed; creating it now");
                None
            }
            Err(_) => {
                tracing::error!(queue = %self.name, "the thread creating the next segment panicked");
                None
            }
        }
    }

    /// Waits for a segment being created ahead (closing, deleting, dropping) and for its
    /// helper thread's end: no helper touches the queue's files once its handle let go of
    /// them. (The helper of the writer's own segment may still be preparing that map's
    /// pages; that touches no file's length or bytes, and fails quietly on pages a close
    /// cut away.) Returns its path if it may exist.
    pub(crate) fn finish_next(&self, w: &mut Writer) -> Option<PathBuf> {
        let next = w.next.take()?;
        if let Ok(Ok(created)) = next.creating.finish() {
            discard_map(&self.name, created);
        }
        Some(next.path)
    }

    /// Waits until everything before `target` is durable; the first waiter syncs for all.
    pub(crate) fn wait_durable(&self, target: Pos) -> Result<(), JournalError> {
        let mut s = lock(&self.sync);
        loop {
            if let Some(reason) = &s.poisoned {
                return Err(JournalError::Poisoned {
                    reason: reason.clone(),
                });
            }
            if s.synced >= target {
                return Ok(());
            }
            if s.syncing {
                s.waiting += 1;
                s = self.sync_cv.wait(s).unwrap_or_else(|p| p.into_inner());
                s.waiting -= 1;
                continue;
            }
            s.syncing = true;
            drop(s);
            let result = self.sync_writer();
            s = lock(&self.sync);
            s.syncing = false;
            if s.waiting > 0 {
                self.sync_cv.notify_all();
            }
            if let Err(e) = result {
                drop(s);
                return Err(e);
            }
        }
    }

    /// Syncs the writer's current segment and publishes what it covers.
    pub(crate) fn sync_writer(&self) -> Result<(), JournalError> {
        let (file, upto, sealed) = {
            let mut w = proto::lock(&self.writer);
            // A sealed segment's map is given up, and its file cut back, before the sync
            // makes its length durable (`mapped.rs`).
            w.finish_unmapping();
            // Copied, not taken: a second caller meanwhile (`sync()` beside the periodic
            // flusher) must not return before these are durable, so it syncs them too.
            (w.file().clone(), w.end(), w.unsynced_sealed.clone())
        };
        // Syncing through a new descriptor makes the file's data durable all the same.
        let result = sealed
            .iter()
            .try_for_each(
                |&seg| match self.storage().open_append(&self.segment_path(seg)) {
                    Ok(f) => f.sync_data(),
                    // Already retired: nothing left to make durable.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(e),
                },
            )
            .and_then(|()| file.sync_data());
        match result {
            Ok(()) => {
                if !sealed.is_empty() {
                    proto::lock(&self.writer)
                        .unsynced_sealed
                        .retain(|s| !sealed.contains(s));
                }
                self.mark_synced(upto);
                self.publish(upto);
                Ok(())
            }
            Err(e) => Err(self.poison(format!("fdatasync failed: {e}"))),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop_flusher();
        let mut w = proto::lock(&self.writer);
        self.finish_next(&mut w);
        if let Err(e) = w.unmap() {
            // Recovery cuts the unused end off at the next open.
            tracing::warn!(queue = %self.name, error = %e, "could not cut the mapped segment back to its records");
        }
    }
}

/// Creates a segment file with its header and makes it and its directory entry durable. A
/// file it created but could not finish is removed again (best effort: a crash leaves an
/// empty or torn last segment, which recovery removes).
/// Creates segment `seg_id` of queue `queue` (header synced, directory entry synced), then
/// records it in the queue's tail marker (see `tail.rs`).
pub(crate) fn create_segment(
    storage: &dyn Storage,
    dir: &Path,
    queue: &str,
    seg_id: u64,
    prev_unsynced: bool,
    mode: u32,
) -> Result<Arc<dyn WriteFile>, JournalError> {
    let path = &dir.join(segment_name(queue, seg_id));
    let io = |e| JournalError::io(path, e);
    let file: Arc<dyn WriteFile> = Arc::from(storage.create(path, mode).map_err(io)?);
    let finished = init_segment(storage, dir, path, file.as_ref(), seg_id, prev_unsynced);
    if finished.is_err() {
        let _ = storage.remove_file(path);
    }
    finished?;
    record_tail(storage, dir, queue, seg_id, mode);
    Ok(file)
}

/// Writes a new segment's header and syncs it and the directory.
fn init_segment(
    storage: &dyn Storage,
    dir: &Path,
    path: &Path,
    file: &dyn WriteFile,
    seg_id: u64,
    prev_unsynced: bool,
) -> Result<(), JournalError> {
    let io = |e| JournalError::io(path, e);
    let mut header = Vec::new();
    encode_segment_header(
        &SegmentHeader {
            segment_id: seg_id,
            prev_unsynced,
        },
        &mut header,
    );
    write_all(file, &header).map_err(io)?;
    file.sync_data().map_err(io)?;
    storage.sync_dir(dir).map_err(|e| JournalError::io(dir, e))
}
