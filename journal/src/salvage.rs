//! Salvage: reading every intact record of a queue whose files a normal open refuses.
//!
//! Opening a queue never skips damage: a record that fails its checksum in the middle of a
//! segment, a missing segment or a damaged segment header stops [`JournaledQueue::open`]
//! with an error naming the file and offset, because what lies there may have been
//! acknowledged. [`salvage`] is for the operator who has to go on anyway: it reads the
//! segment files without changing anything, hands over every record whose checksum holds,
//! in id order, and lists every stretch of bytes it could not read. After a damaged stretch
//! it looks for the next valid record byte by byte (a record is taken only if its checksum
//! holds and its id is past the last one handed over). What to do with the items (put
//! them into a new queue, or rebuild a store from them, as `fairq-file` does) is up to the
//! caller. Every intact item is handed over, also those that readers had already finished
//! but whose segment was not yet deleted; [`reader_positions`] reads where each reader
//! stood (the reader registry and the checkpoints, also without changing them), so that
//! the caller can leave out the items every reader had finished.
//!
//! [`JournaledQueue::open`]: crate::JournaledQueue::open

mod positions;

use std::path::{Path, PathBuf};

use crate::files::{parse_segment_name, segment_name};
use crate::format::{decode_segment_header, record_after, Rejected, SEGMENT_HEADER_LEN};
use crate::storage::{EntryKind, Storage};
use crate::{ItemId, JournalError};

pub use positions::{reader_positions, ReaderPosition, ReaderPositions, SavedPosition};

/// A stretch of a queue's files that [`salvage`] could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The segment file.
    pub path: PathBuf,
    /// Where the stretch starts in it.
    pub offset: u64,
    /// How many bytes it spans (0 for a missing file).
    pub len: u64,
    /// What was wrong.
    pub reason: String,
    /// The stretch ends the newest segment: the remains of an interrupted append, as a
    /// crash leaves them, rather than damage (a normal open cuts it off too).
    pub torn_tail: bool,
}

/// What [`salvage`] read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SalvageReport {
    /// Segment files read.
    pub segments: u64,
    /// Intact items handed over.
    pub items: u64,
    /// Their payload bytes.
    pub bytes: u64,
    /// Every stretch that could not be read, in file order.
    pub damage: Vec<Damage>,
}

impl SalvageReport {
    /// Whether anything other than a torn tail was found.
    ///
    /// ```
    /// use fairq_journal::salvage::SalvageReport;
    /// assert!(!SalvageReport::default().damaged());
    /// ```
    pub fn damaged(&self) -> bool {
        self.damage.iter().any(|d| !d.torn_tail)
    }
}

/// Reads every intact item of queue `queue` in `dir` through `storage` and hands each to
/// `each` (its id and payload), in id order. Changes nothing. Fails only when the folder
/// cannot be listed or a segment file cannot be read; damage inside the files goes into the
/// report.
///
/// ```
/// use fairq_journal::salvage::salvage;
/// use fairq_journal::storage::FsStorage;
/// use fairq_journal::{JournalConfig, JournaledQueue};
/// let dir = tempfile::tempdir().unwrap();
/// let q = JournaledQueue::open(dir.path(), "q", JournalConfig::default()).unwrap();
/// q.put(b"one").unwrap();
/// q.put(b"two").unwrap();
/// q.close().unwrap();
///
/// let mut items = Vec::new();
/// let report = salvage(dir.path(), "q", &FsStorage, &mut |_, data| items.push(data.to_vec()))
///     .unwrap();
/// assert_eq!(items, [b"one".to_vec(), b"two".to_vec()]);
/// assert_eq!(report.items, 2);
/// assert!(!report.damaged());
/// ```
pub fn salvage(
    dir: &Path,
    queue: &str,
    storage: &dyn Storage,
    each: &mut dyn FnMut(ItemId, &[u8]),
) -> Result<SalvageReport, JournalError> {
    let mut segs: Vec<u64> = storage
        .list_dir(dir)
        .map_err(|e| JournalError::io(dir, e))?
        .into_iter()
        .filter(|e| e.kind == EntryKind::File)
        .filter_map(|e| parse_segment_name(queue, &e.name))
        .collect();
    segs.sort_unstable();
    let mut report = SalvageReport::default();
    let mut last_id: Option<u64> = None;
    let mut prev_seg: Option<u64> = None;
    let read = |seg: u64| {
        let path = dir.join(segment_name(queue, seg));
        storage
            .read_all(&path)
            .map_err(|e| JournalError::io(&path, e))
    };
    // Each segment is read once, one ahead: whether a segment's unreadable end is a torn
    // tail depends on the header of the one after it.
    let mut ahead = match segs.first() {
        Some(&first) => Some(read(first)?),
        None => None,
    };
    for (i, &seg) in segs.iter().enumerate() {
        let path = dir.join(segment_name(queue, seg));
        if let Some(prev) = prev_seg {
            for missing in prev + 1..seg {
                report.damage.push(Damage {
                    path: dir.join(segment_name(queue, missing)),
                    offset: 0,
                    len: 0,
                    reason: "missing segment file".into(),
                    torn_tail: false,
                });
            }
        }
        prev_seg = Some(seg);
        let bytes = ahead.take().unwrap_or_default();
        let next = segs.get(i + 1).copied();
        if let Some(next) = next {
            ahead = Some(read(next)?);
        }
        report.segments += 1;
        let mut reader = SegmentReader {
            path: &path,
            bytes: &bytes,
            newest: next.is_none(),
            end_may_be_torn: end_may_be_torn(seg, next, ahead.as_deref(), segs.len() - i),
            report: &mut report,
        };
        reader.read(&mut last_id, each);
    }
    Ok(report)
}

/// Whether the end of segment `seg` may be torn by a crash, as opening judges it
/// (`scan.rs`): the newest segment's may; so may that of a segment sealed without a sync
/// (the next one's header says so), and that of the one before a newest segment whose
/// header a crash tore while creating it. `left` counts the segments from `seg` on.
fn end_may_be_torn(seg: u64, next: Option<u64>, next_bytes: Option<&[u8]>, left: usize) -> bool {
    match (next, next_bytes) {
        (None, _) => true,
        (Some(n), Some(b)) if n == seg + 1 => match decode_segment_header(b) {
            Ok(h) => h.prev_unsynced,
            Err(_) => left == 2 && b.len() <= crate::scan::TORN_NEW_SEGMENT_MAX,
        },
        _ => false,
    }
}

/// One segment file's bytes being salvaged.
struct SegmentReader<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    /// The queue's newest segment.
    newest: bool,
    /// An unreadable end of it is a torn tail, which opening cuts off too.
    end_may_be_torn: bool,
    report: &'a mut SalvageReport,
}

impl SegmentReader<'_> {
    fn read(&mut self, last_id: &mut Option<u64>, each: &mut dyn FnMut(ItemId, &[u8])) {
        let mut at = SEGMENT_HEADER_LEN;
        if let Err(e) = decode_segment_header(self.bytes) {
            // The records may still be there: look for them after where the header ends.
            // The newest segment cut short inside its header is a creation a crash
            // interrupted (opening reuses or removes it), not damage.
            let torn = self.newest && self.bytes.len() < SEGMENT_HEADER_LEN;
            self.damage(
                0,
                SEGMENT_HEADER_LEN.min(self.bytes.len()),
                format!("segment header: {e}"),
            );
            if let Some(last) = self.report.damage.last_mut() {
                last.torn_tail = torn;
            }
        }
        // Where an unreadable stretch began and why, while in one. The reason is the
        // first rejection's; the ones at later bytes of the stretch are not kept.
        let mut bad_since: Option<(usize, Rejected)> = None;
        let bytes = self.bytes;
        while at < bytes.len() {
            match record_after(&bytes[at..], *last_id) {
                Ok((record, len)) => {
                    let (id, payload) = (record.id, record.payload);
                    if let Some((start, reason)) = bad_since.take() {
                        self.damage(start, at - start, reason.to_string());
                    }
                    each(ItemId(id), payload);
                    self.report.items += 1;
                    self.report.bytes += payload.len() as u64;
                    *last_id = Some(id);
                    at += len;
                }
                Err(reason) => {
                    bad_since.get_or_insert((at, reason));
                    at += 1;
                }
            }
        }
        if let Some((start, reason)) = bad_since {
            let torn_tail = self.end_may_be_torn;
            self.report.damage.push(Damage {
                path: self.path.to_path_buf(),
                offset: start as u64,
                len: (self.bytes.len() - start) as u64,
                reason: reason.to_string(),
                torn_tail,
            });
        }
    }

    fn damage(&mut self, offset: usize, len: usize, reason: String) {
        self.report.damage.push(Damage {
            path: self.path.to_path_buf(),
            offset: offset as u64,
            len: len as u64,
            reason,
            torn_tail: false,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{encode_segment_header, item_record as record, SegmentHeader};
    use crate::sim::SimDisk;
    use crate::storage::Storage;

    /// `record` with the bits of `mask` flipped in its last byte (its payload's).
    fn flipped_last(mut record: Vec<u8>, mask: u8) -> Vec<u8> {
        if let Some(last) = record.last_mut() {
            *last ^= mask;
        }
        record
    }

    /// Segment `id` holding `records`.
    fn segment(id: u64, records: &[Vec<u8>]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_segment_header(
            &SegmentHeader {
                segment_id: id,
                prev_unsynced: false,
            },
            &mut out,
        );
        for r in records {
            out.extend_from_slice(r);
        }
        out
    }

    fn write(disk: &SimDisk, name: &str, bytes: &[u8]) {
        let f = disk.create(&Path::new("/q").join(name), 0o600).unwrap();
        f.write(bytes).unwrap();
    }

    fn run(disk: &SimDisk) -> (Vec<(u64, Vec<u8>)>, SalvageReport) {
        let mut items = Vec::new();
        let report = salvage(Path::new("/q"), "q", disk, &mut |id, data| {
            items.push((id.0, data.to_vec()))
        })
        .unwrap();
        (items, report)
    }

    #[test]
    fn garbage_between_records_is_skipped_and_reported() {
        let disk = SimDisk::new(1);
        disk.create_dir_all(Path::new("/q"), 0o700).unwrap();
        let mut seg = segment(1, &[record(1, b"a"), record(2, b"bb")]);
        // A damaged header: the records after it are still read.
        seg[0] ^= 0xFF;
        let bad_at = seg.len();
        // A record with a flipped payload byte, then plain garbage.
        seg.extend_from_slice(&flipped_last(record(3, b"ccc"), 0x40));
        seg.extend_from_slice(&[0xEE; 17]);
        let good_at = seg.len();
        seg.extend_from_slice(&record(4, b"dddd"));
        write(&disk, "q.00000000000000000001.seg", &seg);
        let (items, report) = run(&disk);
        assert_eq!(
            items,
            vec![
                (1, b"a".to_vec()),
                (2, b"bb".to_vec()),
                (4, b"dddd".to_vec())
            ]
        );
        assert_eq!(report.items, 3);
        assert_eq!(report.bytes, 7);
        assert_eq!(report.damage.len(), 2, "{report:?}");
        assert_eq!(report.damage[0].offset, 0);
        assert!(report.damage[0].reason.contains("segment header"));
        assert_eq!(report.damage[1].offset, bad_at as u64);
        assert_eq!(report.damage[1].len, (good_at - bad_at) as u64);
        assert!(report.damaged());
    }

    #[test]
    fn a_missing_segment_and_a_torn_tail_are_told_apart() {
        let disk = SimDisk::new(2);
        disk.create_dir_all(Path::new("/q"), 0o700).unwrap();
        write(
            &disk,
            "q.00000000000000000001.seg",
            &segment(1, &[record(1, b"x")]),
        );
        let mut last = segment(3, &[record(3, b"z")]);
        let torn_at = last.len();
        last.extend_from_slice(&record(4, b"cut short")[..20]);
        write(&disk, "q.00000000000000000003.seg", &last);
        let (items, report) = run(&disk);
        assert_eq!(items, vec![(1, b"x".to_vec()), (3, b"z".to_vec())]);
        assert_eq!(report.segments, 2);
        assert_eq!(report.damage.len(), 2, "{report:?}");
        assert_eq!(report.damage[0].reason, "missing segment file");
        assert!(report.damage[0]
            .path
            .ends_with("q.00000000000000000002.seg"));
        assert!(!report.damage[0].torn_tail);
        assert!(report.damaged());
        let tail = &report.damage[1];
        // A newest segment cut short inside its header is a torn creation.
        write(&disk, "q.00000000000000000004.seg", &segment(4, &[])[..10]);
        let (_, again) = run(&disk);
        let created = again.damage.last().unwrap();
        assert!(
            created.torn_tail && created.offset == 0 && created.len == 10,
            "{again:?}"
        );
        // With a newest segment torn in its creation, the one before was the last written
        // when the crash came: its cut-short end is a torn tail too, as opening judges it.
        assert!(again.damage[again.damage.len() - 2].torn_tail, "{again:?}");
        assert!(again.damage[0].reason == "missing segment file" && again.damaged());
        assert!(tail.torn_tail);
        assert_eq!(tail.offset, torn_at as u64);
        assert_eq!(tail.len, 20);
    }

    #[test]
    fn the_end_of_a_segment_sealed_without_sync_is_a_torn_tail() {
        // Under `Never` a rotation does not sync the sealed segment, and the next segment's
        // header says so: a crash may leave that segment's end torn (or, after mapped
        // writes, zeros), which opening cuts off as it does the newest segment's.
        for (flag, torn) in [(true, true), (false, false)] {
            let disk = SimDisk::new(4);
            disk.create_dir_all(Path::new("/q"), 0o700).unwrap();
            let mut first = segment(1, &[record(1, b"a")]);
            first.extend_from_slice(&[0u8; 64]);
            write(&disk, "q.00000000000000000001.seg", &first);
            let mut second = Vec::new();
            encode_segment_header(
                &SegmentHeader {
                    segment_id: 2,
                    prev_unsynced: flag,
                },
                &mut second,
            );
            second.extend_from_slice(&record(2, b"b"));
            write(&disk, "q.00000000000000000002.seg", &second);
            let (items, report) = run(&disk);
            assert_eq!(items, vec![(1, b"a".to_vec()), (2, b"b".to_vec())]);
            assert_eq!(report.damage.len(), 1, "{report:?}");
            assert_eq!(report.damage[0].torn_tail, torn, "{report:?}");
            assert_eq!(report.damaged(), !torn, "{report:?}");
        }
    }

    #[test]
    fn an_old_record_found_again_after_damage_is_not_handed_over_twice() {
        let disk = SimDisk::new(3);
        disk.create_dir_all(Path::new("/q"), 0o700).unwrap();
        let mut seg = segment(1, &[record(7, b"seven")]);
        seg.extend_from_slice(&[0xAB; 9]);
        // A stale copy of record 7 (as a reused file might hold), then record 8.
        seg.extend_from_slice(&record(7, b"seven"));
        seg.extend_from_slice(&record(8, b"eight"));
        write(&disk, "q.00000000000000000001.seg", &seg);
        let (items, report) = run(&disk);
        assert_eq!(items, vec![(7, b"seven".to_vec()), (8, b"eight".to_vec())]);
        // The garbage and the stale copy are one stretch.
        assert_eq!(report.damage.len(), 1, "{report:?}");
        assert_eq!(report.damage[0].len, 9 + record(7, b"seven").len() as u64);
    }

    #[test]
    fn a_stretch_is_reported_with_why_its_first_byte_was_rejected() {
        let disk = SimDisk::new(4);
        disk.create_dir_all(Path::new("/q"), 0o700).unwrap();
        // A stale copy right after the record it repeats, then garbage, then record 8.
        let mut seg = segment(1, &[record(7, b"seven"), record(7, b"seven")]);
        seg.extend_from_slice(&[0xAB; 9]);
        seg.extend_from_slice(&record(8, b"eight"));
        // A record whose payload is damaged, then garbage, then record 9.
        seg.extend_from_slice(&flipped_last(record(9, b"nine"), 0x01));
        seg.extend_from_slice(&[0xCD; 5]);
        seg.extend_from_slice(&record(9, b"nine"));
        write(&disk, "q.00000000000000000001.seg", &seg);
        let (items, report) = run(&disk);
        let ids: Vec<u64> = items.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [7, 8, 9]);
        assert_eq!(items[2].1, b"nine");
        assert_eq!(report.damage.len(), 2, "{report:?}");
        assert_eq!(report.damage[0].reason, "record 7 out of order (after 7)");
        assert!(
            report.damage[1].reason.starts_with("record: ")
                && report.damage[1].reason.contains("checksum"),
            "{report:?}"
        );
    }
}
