//! Reading every segment of a queue when it is opened: checking each record, finding where
//! each reader resumes, and cutting off (or, read-only, ignoring) a torn tail.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io;
use std::path::Path;

use crate::files::segment_name;
use crate::format::{
    decode_record, decode_segment_header, record_after, DecodeError, Rejected, SEGMENT_HEADER_LEN,
};
use crate::pos::Pos;
use crate::report::{RecoveryReport, TailCause, TailRepair};
use crate::state::Sealed;
use crate::storage::Storage;
use crate::JournalError;

/// What opening learns about one reader before its state is built.
pub(crate) struct Restored {
    pub(crate) name: String,
    /// Every id below it is finished.
    pub(crate) head: u64,
    /// The oldest segment the checkpoint says the reader needs (0: unknown).
    pub(crate) head_segment: u64,
    /// The newest segment when the checkpoint was written (0: unknown).
    pub(crate) tail_segment: u64,
    /// Whether the checkpoint was read (a reader without one restarts from the oldest item).
    pub(crate) has_checkpoint: bool,
    pub(crate) done: BTreeSet<u64>,
    pub(crate) errors: BTreeMap<u64, u32>,
    /// The first record at or after the head.
    pub(crate) cursor: Option<Pos>,
    pub(crate) items: u64,
    pub(crate) bytes: u64,
}

/// The last segment file, if it holds a valid header.
pub(crate) struct LastSegment {
    pub(crate) id: u64,
    /// Length of its valid part.
    pub(crate) len: u64,
    pub(crate) has_records: bool,
}

/// What the scan of every segment found.
#[derive(Default)]
pub(crate) struct Scan {
    pub(crate) sealed: BTreeMap<u64, Sealed>,
    pub(crate) last: Option<LastSegment>,
    /// A last segment with a torn header, removed (or, read-only, ignored).
    pub(crate) torn_last: Option<u64>,
    pub(crate) first_id: Option<u64>,
    pub(crate) last_id: Option<u64>,
    /// Segments sealed without a sync, as the next segment's header says: what they hold
    /// may still be only in the page cache, so the next sync of the journal covers them.
    pub(crate) unsynced_sealed: Vec<u64>,
}

fn corrupt(path: &Path, offset: usize, reason: impl Into<String>) -> JournalError {
    JournalError::corrupt(path, offset as u64, reason)
}

/// The longest a new segment whose header write was torn by a crash can be: its header plus
/// the rest of one file system block of garbage or zeros.
pub(crate) const TORN_NEW_SEGMENT_MAX: usize = 4096;

/// What a later record must be to count as evidence of damage after a bad one
/// ([`valid_record_after`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Evidence {
    /// Any intact record with a higher id. The rule wherever the bytes after the bad spot are
    /// not all inside one record: a record there is one the journal wrote after it, which may
    /// have been acknowledged, so the bad spot is damage, never a tail to cut off.
    Any,
    /// A chain of intact records running to the end. The rule after a record whose intact
    /// header announces more bytes than the file holds (the shape of a torn write): every
    /// byte after it lies inside its announced length, so a record found there may be part
    /// of its payload (an item may carry another journal's records); only records that run on
    /// to the end, as those written after a damaged length field would, count.
    RunningToTheEnd,
}

/// Whether a record that counts as evidence of damage (`evidence`) starts anywhere at or
/// after `from`, its id above `prev`. For [`Evidence::RunningToTheEnd`], it must start a
/// chain of valid records that runs to the end of `data`, or to a stretch of nothing but
/// zeros: each record intact, its id above the one before it, each starting where the one
/// before ends.
fn valid_record_after(data: &[u8], from: usize, prev: Option<u64>, evidence: Evidence) -> bool {
    // A record starts with its nonzero length: none starts in zeros, such as the unused
    // end of a segment allocated for mapped writes (`mapped.rs`), megabytes long.
    let zeros_from = |at: usize| {
        data.get(at..)
            .is_none_or(|rest| rest.iter().all(|&b| b == 0))
    };
    if zeros_from(from) {
        return false;
    }
    // The fixed fields and the id are tested before the checksum (`record_after`): inside a
    // torn large item, most offsets' first four bytes (user payload) announce a length that
    // fits, and checksumming it at every offset would take time quadratic in the torn bytes.
    if evidence == Evidence::Any {
        return (from..data.len()).any(|p| record_after(&data[p..], prev).is_ok());
    }
    // Starts of records on a chain already followed that does not run to the end. A chain
    // followed from any of them is that same chain (each id is compared with the one
    // before it only), so no record is checksummed twice.
    let mut dead = HashSet::new();
    for start in from..data.len() {
        if dead.contains(&start) {
            continue;
        }
        let (mut at, mut last) = (start, prev);
        while let Ok((rec, n)) = record_after(&data[at..], last) {
            dead.insert(at);
            at += n;
            last = Some(rec.id);
            if zeros_from(at) {
                return true;
            }
        }
    }
    false
}

/// A segment missing between two that exist is always damage: segments are retired oldest
/// first, and the writer creates them one id at a time.
pub(crate) fn check_contiguous(
    dir: &Path,
    queue: &str,
    seg_ids: &[u64],
) -> Result<(), JournalError> {
    for w in seg_ids.windows(2) {
        if w[1] != w[0] + 1 {
            let missing = w[0] + 1;
            return Err(corrupt(
                &dir.join(segment_name(queue, missing)),
                0,
                format!(
                    "the segment file is missing (segments {} and {} exist); the items it held would be lost",
                    w[0], w[1]
                ),
            ));
        }
    }
    Ok(())
}

/// Reads every segment in `seg_ids` (sorted), counting each reader's waiting items.
pub(crate) fn scan(
    storage: &dyn Storage,
    dir: &Path,
    queue: &str,
    seg_ids: &[u64],
    readers: &mut [Restored],
    read_only: bool,
    report: &mut RecoveryReport,
) -> Result<Scan, JournalError> {
    let io_err = |p: &Path| {
        let p = p.to_path_buf();
        move |e: io::Error| JournalError::io(p, e)
    };
    let mut out = Scan::default();
    for (i, &seg) in seg_ids.iter().enumerate() {
        let is_last = i + 1 == seg_ids.len();
        let path = dir.join(segment_name(queue, seg));
        let data = storage.read_all(&path).map_err(io_err(&path))?;
        match decode_segment_header(&data) {
            Ok(h) if h.segment_id == seg => {
                if h.prev_unsynced && i > 0 {
                    out.unsynced_sealed.push(seg_ids[i - 1]);
                }
            }
            Ok(h) => {
                return Err(corrupt(
                    &path,
                    0,
                    format!(
                        "header names segment {} but the file is segment {seg}",
                        h.segment_id
                    ),
                ))
            }
            Err(e) => {
                // A segment's header is synced before anything is appended to it, so a crash
                // can tear the header of a new last segment only while the file holds nothing
                // else (at most a torn block: garbage or zeros up to a file system block): a
                // longer file with a bad header is damage, never removed.
                if is_last
                    && data.len() <= TORN_NEW_SEGMENT_MAX
                    && !valid_record_after(&data, 0, out.last_id, Evidence::Any)
                {
                    // Created just before a crash: nothing in it was ever acknowledged.
                    tracing::warn!(path = %path.display(), error = %e, read_only, "removing a segment with a torn header");
                    if !read_only {
                        storage.remove_file(&path).map_err(io_err(&path))?;
                        storage.sync_dir(dir).map_err(io_err(dir))?;
                    }
                    report.removed_segments.push(path);
                    out.torn_last = Some(seg);
                    break;
                }
                return Err(corrupt(&path, 0, format!("segment header: {e}")));
            }
        }
        let mut off = SEGMENT_HEADER_LEN;
        let mut has_records = false;
        while off < data.len() {
            match decode_record(&data[off..]) {
                // The journal never gives out the last id (the next one would not exist).
                Ok((rec, _)) if rec.id == u64::MAX => {
                    return Err(corrupt(
                        &path,
                        off,
                        format!("item id {} is out of range", rec.id),
                    ));
                }
                Ok((rec, n)) if out.last_id.is_none_or(|p| rec.id > p) => {
                    let pos = Pos {
                        seg,
                        off: off as u64,
                    };
                    let len = rec.payload.len() as u64;
                    for r in readers.iter_mut() {
                        if rec.id >= r.head {
                            r.cursor.get_or_insert(pos);
                            if !r.done.contains(&rec.id) {
                                r.items += 1;
                                r.bytes += len;
                            }
                        }
                    }
                    out.first_id.get_or_insert(rec.id);
                    out.last_id = Some(rec.id);
                    has_records = true;
                    off += n;
                }
                Ok((rec, _)) => {
                    return Err(corrupt(
                        &path,
                        off,
                        format!(
                            "item id {} does not follow item id {}",
                            rec.id,
                            out.last_id.unwrap_or(0)
                        ),
                    ))
                }
                Err(e) => {
                    // The last segment's end may be torn by a crash; so may the end of a
                    // segment that was sealed without a sync (the next header says so), and
                    // the end of the one before a last segment whose header is torn (the
                    // crash came while that one was being created, so this one was still
                    // the last written).
                    let may_be_torn = is_last
                        || seg_ids.get(i + 1).is_some_and(|&next| {
                            let p = dir.join(segment_name(queue, next));
                            let next_is_last = i + 2 == seg_ids.len();
                            match storage.read_all(&p) {
                                Ok(d) => match decode_segment_header(&d) {
                                    Ok(h) => h.prev_unsynced,
                                    // Only a block-sized file is a torn new segment.
                                    Err(_) => next_is_last && d.len() <= TORN_NEW_SEGMENT_MAX,
                                },
                                Err(_) => false,
                            }
                        });
                    // Nothing but zeros from here (the unused end of a mapped segment,
                    // megabytes long) holds no record: tested once, the search skipped.
                    let zeros = data[off..].iter().all(|&b| b == 0);
                    // A record whose intact header runs past the end has the shape of a torn
                    // write; a whole record failing its checksum does not.
                    let evidence = match record_after(&data[off..], out.last_id) {
                        Err(Rejected::Decode(DecodeError::Incomplete { .. })) => {
                            Evidence::RunningToTheEnd
                        }
                        _ => Evidence::Any,
                    };
                    if !may_be_torn
                        || (!zeros && valid_record_after(&data, off + 1, out.last_id, evidence))
                    {
                        return Err(corrupt(&path, off, e.to_string()));
                    }
                    cut_tail(
                        storage,
                        &path,
                        off,
                        data.len(),
                        &e,
                        zeros,
                        read_only,
                        report,
                    )?;
                    break;
                }
            }
        }
        if is_last {
            out.last = Some(LastSegment {
                id: seg,
                len: off as u64,
                has_records,
            });
        } else {
            out.sealed.insert(seg, Sealed { len: off as u64 });
        }
    }
    Ok(out)
}

/// Truncates a segment at `at` (unless read-only), and says so. `zeros`: nothing but zeros
/// follows the last record, as after a crash under mapped writes (the segment's unused
/// allocated end), which is logged as routine rather than as a torn write.
#[allow(clippy::too_many_arguments)]
fn cut_tail(
    storage: &dyn Storage,
    path: &Path,
    at: usize,
    file_len: usize,
    error: &DecodeError,
    zeros: bool,
    read_only: bool,
    report: &mut RecoveryReport,
) -> Result<(), JournalError> {
    let dropped = (file_len - at) as u64;
    let cause = match error {
        DecodeError::Incomplete { .. } | DecodeError::BadLength(_) => TailCause::Incomplete,
        other => TailCause::Damaged {
            reason: other.to_string(),
        },
    };
    match &cause {
        TailCause::Incomplete if zeros => tracing::info!(
            path = %path.display(), offset = at, dropped_bytes = dropped, read_only,
            "cutting off the zeros after the last record (a torn write, or the unused end of a mapped segment)"
        ),
        TailCause::Incomplete => tracing::warn!(
            path = %path.display(), offset = at, dropped_bytes = dropped, read_only,
            "cutting off a torn tail (the remains of a write interrupted by a crash)"
        ),
        _ => tracing::error!(
            path = %path.display(), offset = at, dropped_bytes = dropped, read_only, error = %error,
            "cutting off the last record: it is complete but fails its check, so it may be an acknowledged item"
        ),
    }
    if !read_only {
        let io = |e| JournalError::io(path, e);
        let f = storage.open_append(path).map_err(io)?;
        f.set_len(at as u64).map_err(io)?;
        f.sync_data().map_err(io)?;
    }
    report.tails.push(TailRepair {
        path: path.to_path_buf(),
        offset: at as u64,
        dropped_bytes: dropped,
        cause,
        truncated: !read_only,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crc::PAIR_BYTES;
    use crate::format::{item_record as record, Rejected, RECORD_HEADER_LEN};

    /// Bytes of record bodies checksummed while `f` runs.
    fn checksummed<T>(f: impl FnOnce() -> T) -> (T, u64) {
        let before = PAIR_BYTES.with(|n| n.get());
        let out = f();
        (out, PAIR_BYTES.with(|n| n.get()) - before)
    }

    /// A torn 16 KiB item whose payload is little-endian u32 values of 1024: at every
    /// fourth offset the first four bytes announce a length that fits in what follows. A
    /// broken search checksums those 1 KiB at each of them (some 3 MB here, growing with
    /// the torn bytes times the values: for a torn 16 MiB item, hours of opening);
    /// checked on the fixed fields first, it checksums nothing.
    #[test]
    fn the_search_past_a_torn_item_tests_fixed_fields_before_checksumming() {
        let payload = 1024u32.to_le_bytes().repeat((16 << 10) / 4);
        let mut data = record(1, b"before");
        let torn_at = data.len();
        data.extend_from_slice(&record(2, &payload));
        data.truncate(data.len() - payload.len() / 4);
        for evidence in [Evidence::Any, Evidence::RunningToTheEnd] {
            let (found, bytes) =
                checksummed(|| valid_record_after(&data, torn_at + 1, Some(1), evidence));
            assert!(!found);
            assert_eq!(
                bytes, 0,
                "checksummed {bytes} bytes looking past a torn item ({evidence:?})"
            );
        }
    }

    /// After a torn write (`Evidence::RunningToTheEnd`): a torn item whose payload holds an
    /// encoded record with a higher id: the record is followed by the rest of the payload,
    /// not by records running to the end. A broken search takes it for a valid record after
    /// damage (and opening refuses the queue as corrupt); records that do run to the end, or
    /// to zeros, still count. After a whole record that is bad (`Evidence::Any`), any intact
    /// record counts, the embedded one too.
    #[test]
    fn only_records_running_to_the_end_count_as_found_after_a_bad_one() {
        const END: Evidence = Evidence::RunningToTheEnd;
        let mut payload = vec![0xAB; 64];
        payload.extend_from_slice(&record(1000, b"forwarded"));
        payload.extend_from_slice(&[0xCD; 64]);
        let mut data = record(1, b"before");
        let bad_at = data.len();
        data.extend_from_slice(&record(2, &payload));
        data.truncate(data.len() - 32);
        assert!(!valid_record_after(&data, bad_at + 1, Some(1), END));
        assert!(valid_record_after(
            &data,
            bad_at + 1,
            Some(1),
            Evidence::Any
        ));
        // Damage (a flipped payload byte), then intact records to the end: found.
        let mut damaged = record(1, b"before");
        let mut second = record(2, b"second");
        *second.last_mut().unwrap() ^= 1;
        damaged.extend_from_slice(&second);
        damaged.extend_from_slice(&record(3, b"third"));
        damaged.extend_from_slice(&record(4, b"fourth"));
        assert!(valid_record_after(&damaged, bad_at + 1, Some(1), END));
        // ... or to zeros, as in a mapped segment.
        damaged.extend_from_slice(&[0; 100]);
        assert!(valid_record_after(&damaged, bad_at + 1, Some(1), END));
        // ... but not when the ids stop increasing (a stale copy of the first record), or
        // garbage follows them.
        let mut stale = damaged[..damaged.len() - 100].to_vec();
        stale.extend_from_slice(&record(1, b"before"));
        assert!(!valid_record_after(&stale, bad_at + 1, Some(1), END));
        let mut garbage = damaged[..damaged.len() - 100].to_vec();
        garbage.push(7);
        assert!(!valid_record_after(&garbage, bad_at + 1, Some(1), END));
    }

    /// What each cheap test rejects, before any checksum: a broken check reports a
    /// checksum mismatch (having checksummed) for each of these.
    #[test]
    fn record_after_rejects_on_fixed_fields_and_id_before_the_checksum() {
        let good = record(5, b"payload");
        let mut damaged = good.clone();
        // The checksum no longer matches: only a test that checksums finds that.
        *damaged.last_mut().unwrap() ^= 1;
        let cases: [(usize, u8); 5] = [(8, 2), (9, 2), (10, 1), (11, 1), (28, 1)];
        for (at, value) in cases {
            let mut b = damaged.clone();
            b[at] = value;
            let (r, bytes) = checksummed(|| record_after(&b, None));
            assert!(matches!(r, Err(Rejected::NotRecord)), "byte {at}: {r:?}");
            assert_eq!(bytes, 0, "byte {at}");
        }
        let (r, bytes) = checksummed(|| record_after(&damaged, Some(5)));
        assert!(
            matches!(r, Err(Rejected::OutOfOrder { id: 5, last: 5 })),
            "{r:?}"
        );
        assert_eq!(bytes, 0);
        let (r, bytes) = checksummed(|| record_after(&damaged, Some(4)));
        assert!(
            matches!(r, Err(Rejected::Decode(DecodeError::BadChecksum { .. }))),
            "{r:?}"
        );
        assert_eq!(bytes, (good.len() - 4) as u64);
        assert!(record_after(&good, Some(4)).is_ok());
        // Fewer bytes than a record header: the decoder says why.
        assert!(matches!(
            record_after(&good[..RECORD_HEADER_LEN - 1], None),
            Err(Rejected::Decode(DecodeError::Incomplete { .. }))
        ));
    }
}
