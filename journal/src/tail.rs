//! The tail marker: the newest segment the queue's writer may have used.
//!
//! Checkpoints name the segments their readers still need, and segment ids must be
//! contiguous, so recovery notices a segment missing at the front or in the middle. A
//! segment created after the last checkpoint and then lost (deleted by hand, gone with a
//! damaged disk) left no such trace: the queue opened without it, dropped the items it held
//! and handed their ids out again. So each new segment is recorded in `q.tail` once its
//! header and directory entry are on disk (replaced atomically: a crash leaves the old value
//! or the new one), and opening refuses a queue whose marker names a segment newer than
//! every segment file present.
//!
//! The marker only ever names a segment that was complete on disk before the marker was
//! written, so no crash makes it name a missing file. A marker that could not be written
//! stays at an older segment, which only weakens the check. A queue without a marker (written
//! before markers existed) checks nothing until it is opened for writing, which records the
//! writer's segment.

use std::path::Path;

use crate::checkpoint::{decode_tail, encode_tail};
use crate::files::{segment_name, tail_path};
use crate::storage::{read_if_present, replace_atomically, Storage};
use crate::JournalError;

/// Records `seg` as the queue's newest segment. A marker that cannot be written (a full
/// disk) is logged and left as it was: an older marker weakens the check but never makes it
/// refuse a sound queue, while failing the write that needed the segment would lose more.
pub(crate) fn record_tail(storage: &dyn Storage, dir: &Path, queue: &str, seg: u64, mode: u32) {
    if let Err(e) = write_tail(storage, dir, queue, seg, mode) {
        tracing::warn!(
            queue,
            segment = seg,
            error = %e,
            "the tail marker was not updated: losing the newest segments goes unnoticed until it is"
        );
    }
}

fn write_tail(
    storage: &dyn Storage,
    dir: &Path,
    queue: &str,
    seg: u64,
    mode: u32,
) -> Result<(), JournalError> {
    let path = tail_path(dir, queue);
    replace_atomically(storage, &path, &encode_tail(seg), mode)
        .map_err(|e| JournalError::io(&path, e))
}

/// The segment the queue's marker names; `None` without a marker.
pub(crate) fn read_tail(
    storage: &dyn Storage,
    dir: &Path,
    queue: &str,
) -> Result<Option<u64>, JournalError> {
    let path = tail_path(dir, queue);
    let Some(bytes) = read_if_present(storage, &path).map_err(|e| JournalError::io(&path, e))?
    else {
        return Ok(None);
    };
    decode_tail(&bytes)
        .map(Some)
        .map_err(|e| JournalError::corrupt(&path, 0, format!("the tail marker is damaged: {e}")))
}

/// Refuses to open when the marker names a segment newer than every segment in `present`
/// (every segment file of the queue, sorted); the error names the first missing file.
pub(crate) fn check_tail(
    dir: &Path,
    queue: &str,
    marker: Option<u64>,
    present: &[u64],
) -> Result<(), JournalError> {
    let Some(tail) = marker else {
        return Ok(());
    };
    let newest = present.last().copied();
    if newest.is_some_and(|n| n >= tail) {
        return Ok(());
    }
    let left = newest.map_or_else(
        || "no segment file is left".to_string(),
        |n| format!("the newest left is {n}"),
    );
    // The first of the missing ones.
    let first = newest.map_or(tail, |n| n + 1);
    Err(JournalError::corrupt(
        &dir.join(segment_name(queue, first)),
        0,
        format!(
            "the segment file is missing: segment {tail} was created ({left}); the items it \
             held would be lost"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn only_a_marker_past_every_segment_refuses() {
        let dir = PathBuf::from("/d");
        assert!(check_tail(&dir, "q", None, &[]).is_ok());
        assert!(check_tail(&dir, "q", Some(3), &[2, 3]).is_ok());
        // An empty segment created ahead of the marker's.
        assert!(check_tail(&dir, "q", Some(3), &[2, 3, 4]).is_ok());
        let err = check_tail(&dir, "q", Some(5), &[2, 3]).unwrap_err();
        match err {
            JournalError::Corrupt { path, reason, .. } => {
                assert_eq!(path, dir.join(segment_name("q", 4)));
                assert!(reason.contains("segment 5 was created (the newest left is 3)"));
            }
            other => panic!("{other:?}"),
        }
        let err = check_tail(&dir, "q", Some(1), &[]).unwrap_err();
        assert!(err.to_string().contains("no segment file is left"), "{err}");
    }
}
