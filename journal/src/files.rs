//! File names of a queue inside its directory.
//!
//! For a queue `q`: segments are `q.<20-digit segment id>.seg`, the default reader's
//! checkpoint is `q.cp`, a named reader `r`'s checkpoint is `q.cp.r`, and the reader registry
//! is `q.readers`, `q.tail` names the newest segment created, and `q.lock` keeps a second
//! handle from opening the queue. Temporary files end in `.tmp`. Names cannot contain `.`, so the files of two
//! queues sharing a directory never collide.

use std::path::{Path, PathBuf};

pub(crate) fn segment_name(queue: &str, seg_id: u64) -> String {
    format!("{queue}.{seg_id:020}.seg")
}

pub(crate) fn parse_segment_name(queue: &str, file: &str) -> Option<u64> {
    let rest = file.strip_prefix(queue)?.strip_prefix('.')?;
    let digits = rest.strip_suffix(".seg")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

pub(crate) fn checkpoint_path(dir: &Path, queue: &str, reader: &str) -> PathBuf {
    if reader.is_empty() {
        dir.join(format!("{queue}.cp"))
    } else {
        dir.join(format!("{queue}.cp.{reader}"))
    }
}

/// The reader name of a checkpoint file of `queue`, if `file` is one.
pub(crate) fn parse_checkpoint_name<'a>(queue: &str, file: &'a str) -> Option<&'a str> {
    let rest = file.strip_prefix(queue)?.strip_prefix(".cp")?;
    if rest.is_empty() {
        Some("")
    } else {
        let r = rest.strip_prefix('.')?;
        (!r.is_empty() && !r.contains('.')).then_some(r)
    }
}

pub(crate) fn lock_path(dir: &Path, queue: &str) -> PathBuf {
    dir.join(format!("{queue}.lock"))
}

pub(crate) fn registry_path(dir: &Path, queue: &str) -> PathBuf {
    dir.join(format!("{queue}.readers"))
}

pub(crate) fn tail_path(dir: &Path, queue: &str) -> PathBuf {
    dir.join(format!("{queue}.tail"))
}

pub(crate) fn is_temp_of(queue: &str, file: &str) -> bool {
    file.ends_with(".tmp")
        && file
            .strip_prefix(queue)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// Whether `file` is one of the files of `queue` (segment, checkpoint, registry, tail
/// marker, lock or a temporary file): the entries the queue relies on and must find as regular files.
pub(crate) fn belongs_to(queue: &str, file: &str) -> bool {
    parse_segment_name(queue, file).is_some()
        || parse_checkpoint_name(queue, file).is_some()
        || is_temp_of(queue, file)
        || file
            .strip_prefix(queue)
            .is_some_and(|rest| rest == ".lock" || rest == ".readers" || rest == ".tail")
}

/// The queue a file belongs to, if it is one of a queue's files.
pub(crate) fn queue_of(file: &str) -> Option<&str> {
    let (name, _) = file.split_once('.')?;
    (crate::name::validate_name(name).is_ok() && belongs_to(name, file)).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_do_not_cross_queues() {
        assert_eq!(parse_segment_name("q", &segment_name("q", 42)), Some(42));
        assert_eq!(parse_segment_name("q", &segment_name("q:x", 42)), None);
        assert_eq!(
            parse_segment_name("q", "q.00000000000000000042.seg.tmp"),
            None
        );
        assert_eq!(parse_checkpoint_name("q", "q.cp"), Some(""));
        assert_eq!(parse_checkpoint_name("q", "q.cp.r-1"), Some("r-1"));
        assert_eq!(parse_checkpoint_name("q", "q.cp.r.tmp"), None);
        assert_eq!(parse_checkpoint_name("q", "qq.cp"), None);
        assert!(is_temp_of("q", "q.cp.r.tmp"));
        assert!(!is_temp_of("q", "qq.cp.tmp"));
        for mine in [
            "q.lock",
            "q.readers",
            "q.tail",
            "q.tail.tmp",
            "q.cp",
            "q.cp.r",
            "q.readers.tmp",
            &segment_name("q", 3),
        ] {
            assert!(belongs_to("q", mine), "{mine}");
        }
        for other in [
            "qq.lock",
            "q.lockx",
            "qq.tail",
            "archive",
            "q",
            "q.00001.seg",
            "other.cp",
        ] {
            assert!(!belongs_to("q", other), "{other}");
        }
    }
}
