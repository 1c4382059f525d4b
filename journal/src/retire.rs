//! Checkpoints and retirement: writing a reader's checkpoint crash-atomically, and deleting
//! or archiving the sealed segments every reader's durable checkpoint has passed.

use std::sync::atomic::Ordering;

use crate::checkpoint::{checkpoint_too_large, encode_checkpoint, Checkpoint};
use crate::files::segment_name;
use crate::next::duration_ms;
use crate::reader_state::ReaderShared;
use crate::state::{Inner, Sealed};
use crate::storage::{create_dir_durably, replace_atomically};
use crate::sync::{lock, read_lock};
use crate::JournalError;

impl Inner {
    /// Deletes (or archives) the sealed segments older than every reader's durable head
    /// segment. Segments go oldest first, so what is left is always a contiguous run.
    ///
    /// The victims leave the index while they are retired, so that two collections never
    /// retire the same segment; one that could not be retired goes back into it with those
    /// after it, and the next collection tries again.
    pub(crate) fn collect_segments(&self) -> Result<(), JournalError> {
        if self.read_only {
            return Ok(());
        }
        let keep_from = read_lock(&self.readers)
            .iter()
            .map(|r| r.durable_segment.load(Ordering::SeqCst))
            .min()
            .unwrap_or(0);
        let victims: Vec<(u64, Sealed)> = {
            let mut idx = lock(&self.index);
            let victims: Vec<(u64, Sealed)> = idx
                .segs
                .iter()
                .filter(|(id, _)| **id < keep_from)
                .filter_map(|(id, s)| s.map(|s| (*id, s)))
                .collect();
            for (id, _) in &victims {
                idx.segs.remove(id);
            }
            victims
        };
        if victims.is_empty() {
            return Ok(());
        }
        self.chunks.forget_before(keep_from);
        for (i, &(seg, _)) in victims.iter().enumerate() {
            if let Err(e) = self.retire(seg) {
                let mut idx = lock(&self.index);
                for &(id, sealed) in &victims[i..] {
                    idx.segs.insert(id, Some(sealed));
                }
                return Err(JournalError::io(self.segment_path(seg), e));
            }
            tracing::debug!(queue = %self.name, segment = seg, "segment retired");
        }
        self.storage()
            .sync_dir(&self.dir)
            .map_err(|e| JournalError::io(&self.dir, e))
    }

    /// Deletes or archives one sealed segment. A segment already gone (an earlier try
    /// removed or moved it, then failed) counts as retired.
    fn retire(&self, seg: u64) -> std::io::Result<()> {
        let storage = self.storage();
        let path = self.segment_path(seg);
        let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
        let Some(archive) = &self.config.archive_dir else {
            return match storage.remove_file(&path) {
                Err(e) if !gone(&e) => Err(e),
                _ => Ok(()),
            };
        };
        let to = match self.archive_name(archive, seg) {
            // The archive is made when first needed, its entry synced into its parent.
            Err(e) if gone(&e) => {
                create_dir_durably(storage, archive, self.config.dir_mode)?;
                self.archive_name(archive, seg)?
            }
            taken => taken?,
        };
        if let Err(e) = storage.rename(&path, &to) {
            // The name taken for it is given back.
            let _ = storage.remove_file(&to);
            if !gone(&e) {
                return Err(e);
            }
        }
        // Also after a rename of an earlier try whose sync failed.
        storage.sync_dir(archive)
    }
}

impl Inner {
    /// A name in `archive` for segment `seg` that no archived file has: the segment's own
    /// name, or, when a queue of the same name archived a segment with this id before (a
    /// queue deleted and made again, or another folder's queue sharing the archive), that
    /// name with the first free `.1`, `.2`, ... after it. The name is taken by creating an
    /// empty file, which the rename then replaces, so two queues never pick the same one.
    fn archive_name(
        &self,
        archive: &std::path::Path,
        seg: u64,
    ) -> std::io::Result<std::path::PathBuf> {
        let base = segment_name(&self.name, seg);
        for n in 0..=u64::MAX {
            let to = if n == 0 {
                archive.join(&base)
            } else {
                archive.join(format!("{base}.{n}"))
            };
            match self.storage().create(&to, self.config.file_mode) {
                Ok(_) => return Ok(to),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "every archive name for the segment is taken",
        ))
    }
}

/// Writes the reader's checkpoint. With `force`, writes even if nothing changed.
pub(crate) fn write_checkpoint(
    inner: &Inner,
    shared: &ReaderShared,
    force: bool,
) -> Result<(), JournalError> {
    if inner.read_only {
        return Ok(());
    }
    let cp = lock(&shared.cp);
    if shared.removed.load(Ordering::Acquire) {
        // Its checkpoint was removed (`remove_reader`, `delete`) under this lock, and must
        // not come back.
        return Err(if inner.closed.load(Ordering::Acquire) {
            JournalError::Closed
        } else {
            JournalError::ReaderRemoved(shared.name())
        });
    }
    let now = inner.config.clock.coarse_now_ms();
    let data = {
        let mut st = lock(&shared.state);
        if !force && !st.dirty {
            return Ok(());
        }
        st.dirty = false;
        st.checkpoint_due_ms = now.saturating_add(duration_ms(inner.config.checkpoint_interval));
        st.checkpoint_data()
    };
    let data = Checkpoint {
        tail_segment: inner.tail_segment(),
        ..data
    };
    let written = match checkpoint_too_large(&data) {
        Some(reason) => Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            reason,
        )),
        None => replace_atomically(
            inner.storage(),
            &cp.path,
            &encode_checkpoint(&data),
            inner.config.file_mode,
        ),
    };
    if let Err(e) = written {
        let mut st = lock(&shared.state);
        st.dirty = true;
        st.checkpoint_due_ms = 0;
        return Err(JournalError::io(&cp.path, e));
    }
    shared
        .durable_segment
        .fetch_max(data.head_segment, Ordering::SeqCst);
    Ok(())
}
