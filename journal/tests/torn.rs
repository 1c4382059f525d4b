//! Recovery from torn tails and damaged bytes on the real file system.

use std::path::{Path, PathBuf};

use std::sync::{Arc, Mutex};

use fairq_journal::format::{RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use fairq_journal::{
    JournalConfig, JournalError, JournaledQueue, RecoveryReport, SyncPolicy, TailCause,
};

fn cfg(segment_size: u64) -> JournalConfig {
    JournalConfig {
        sync: SyncPolicy::Always,
        segment_size,
        ..JournalConfig::default()
    }
}

const SIZES: [usize; 6] = [0, 1, 17, 64, 3, 200];

fn payload(i: usize) -> Vec<u8> {
    (0..SIZES[i]).map(|b| (b * 7 + i) as u8).collect()
}

/// A queue directory holding `SIZES.len()` items, and the segment files in order.
fn build(segment_size: u64) -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(segment_size)).unwrap();
    for i in 0..SIZES.len() {
        q.put(&payload(i)).unwrap();
    }
    drop(q); // like a crash: no checkpoint, the default reader starts from the oldest item
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    segs.sort();
    (dir, segs)
}

fn copy_dir(from: &Path) -> tempfile::TempDir {
    let to = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, to.path().join(p.file_name().unwrap())).unwrap();
    }
    to
}

fn read_all(dir: &Path) -> Result<Vec<Vec<u8>>, JournalError> {
    read_all_reporting(dir).map(|(items, _)| items)
}

/// The items of the queue and what opening it repaired.
fn read_all_reporting(dir: &Path) -> Result<(Vec<Vec<u8>>, RecoveryReport), JournalError> {
    let q = JournaledQueue::open(dir, "q", cfg(1 << 20))?;
    let report = q.recovery_report().clone();
    let r = q.reader("").unwrap();
    let mut out = Vec::new();
    while let Some(it) = r.get().unwrap() {
        r.commit(it.id).unwrap();
        out.push(it.data.to_vec());
    }
    Ok((out, report))
}

/// Offsets at which each record of a single-segment journal ends.
fn record_ends() -> Vec<usize> {
    let mut at = SEGMENT_HEADER_LEN;
    SIZES
        .iter()
        .map(|s| {
            at += RECORD_HEADER_LEN + s;
            at
        })
        .collect()
}

#[test]
fn truncation_at_every_byte_offset_keeps_exactly_the_complete_records() {
    let (dir, segs) = build(1 << 20);
    assert_eq!(segs.len(), 1);
    let full = std::fs::read(&segs[0]).unwrap();
    let ends = record_ends();
    assert_eq!(*ends.last().unwrap(), full.len());
    let name = segs[0].file_name().unwrap().to_owned();
    // Every cut from inside the header of the segment to the end of the file.
    for cut in 0..=full.len() {
        let copy = copy_dir(dir.path());
        std::fs::write(copy.path().join(&name), &full[..cut]).unwrap();
        let (got, report) =
            read_all_reporting(copy.path()).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let complete = ends.iter().filter(|&&e| e <= cut).count();
        let expected: Vec<Vec<u8>> = (0..complete).map(payload).collect();
        assert_eq!(got, expected, "cut at {cut}");
        // Every cut inside a record is reported as an incomplete tail with what it dropped.
        let valid_end = std::iter::once(SEGMENT_HEADER_LEN)
            .chain(ends.iter().copied())
            .filter(|&e| e <= cut)
            .max()
            .unwrap_or(0);
        if cut < SEGMENT_HEADER_LEN {
            assert_eq!(report.removed_segments.len(), 1, "cut {cut}: {report:?}");
        } else if cut > valid_end {
            assert_eq!(report.tails.len(), 1, "cut {cut}: {report:?}");
            let t = &report.tails[0];
            assert_eq!(t.cause, TailCause::Incomplete, "cut {cut}");
            assert_eq!(t.offset as usize, valid_end, "cut {cut}");
            assert_eq!(t.dropped_bytes as usize, cut - valid_end, "cut {cut}");
            assert!(t.truncated);
            assert!(!report.dropped_a_complete_record());
        } else {
            assert!(report.tails.is_empty(), "cut {cut}: {report:?}");
        }
        // The torn tail was cut off, so a later put lands after the last complete record.
        let q = JournaledQueue::open(copy.path(), "q", cfg(1 << 20)).unwrap();
        q.put(b"after").unwrap();
        drop(q);
        let again = read_all(copy.path()).unwrap();
        assert_eq!(
            again.last().map(Vec::as_slice),
            Some(&b"after"[..]),
            "cut {cut}"
        );
    }
}

#[test]
fn garbage_after_the_last_record_is_truncated() {
    let (dir, segs) = build(1 << 20);
    for garbage in [
        vec![0u8; 100],
        vec![0xFF; 7],
        (0..=255).collect::<Vec<u8>>(),
    ] {
        let copy = copy_dir(dir.path());
        let p = copy.path().join(segs[0].file_name().unwrap());
        let mut bytes = std::fs::read(&p).unwrap();
        let len = bytes.len();
        bytes.extend_from_slice(&garbage);
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(read_all(copy.path()).unwrap().len(), SIZES.len());
        drop(JournaledQueue::open(copy.path(), "q", cfg(1 << 20)).unwrap());
        assert_eq!(std::fs::metadata(&p).unwrap().len() as usize, len);
    }
}

#[test]
fn bit_flips_in_the_last_record_look_torn_and_elsewhere_are_reported() {
    let (dir, segs) = build(1 << 20);
    let name = segs[0].file_name().unwrap().to_owned();
    let full = std::fs::read(&segs[0]).unwrap();
    let ends = record_ends();
    let last_start = ends[ends.len() - 2];
    for byte in 0..full.len() {
        let copy = copy_dir(dir.path());
        let mut b = full.clone();
        b[byte] ^= 1 << (byte % 8);
        std::fs::write(copy.path().join(&name), &b).unwrap();
        let result = read_all(copy.path());
        if byte >= last_start {
            // Damage in the last record is cut off like a torn write, but a complete record
            // that fails its checksum is reported apart: it may have been acknowledged.
            let copy2 = copy_dir(dir.path());
            std::fs::write(copy2.path().join(&name), &b).unwrap();
            let (items, report) = read_all_reporting(copy2.path()).unwrap();
            assert_eq!(items.len(), SIZES.len() - 1, "byte {byte}");
            assert_eq!(result.unwrap().len(), SIZES.len() - 1, "byte {byte}");
            let t = &report.tails[0];
            assert_eq!(t.offset as usize, last_start, "byte {byte}");
            assert_eq!(t.dropped_bytes as usize, full.len() - last_start);
            if byte >= last_start + 4 {
                // The length field is intact, so the record is complete: not a torn write.
                assert!(
                    matches!(t.cause, TailCause::Damaged { .. }),
                    "byte {byte}: {:?}",
                    t.cause
                );
                assert!(report.dropped_a_complete_record());
            }
        } else {
            // Damage followed by valid records is corruption, reported with file and offset.
            match result {
                Err(JournalError::Corrupt { path, offset, .. }) => {
                    assert_eq!(path.file_name().unwrap(), name.as_os_str());
                    let record_start = if byte < SEGMENT_HEADER_LEN {
                        0
                    } else {
                        *std::iter::once(&SEGMENT_HEADER_LEN)
                            .chain(ends.iter())
                            .rfind(|&&e| e <= byte)
                            .unwrap()
                    };
                    assert_eq!(offset as usize, record_start, "byte {byte}");
                }
                other => panic!("byte {byte}: expected corruption, got {other:?}"),
            }
        }
    }
}

#[test]
fn any_damage_to_a_sealed_segment_is_reported() {
    // Small segments: every item gets its own segment.
    let (dir, segs) = build(60);
    assert!(segs.len() >= 4, "{segs:?}");
    let sealed = &segs[1];
    let full = std::fs::read(sealed).unwrap();
    for byte in 0..full.len() {
        let copy = copy_dir(dir.path());
        let mut b = full.clone();
        b[byte] ^= 0x80;
        std::fs::write(copy.path().join(sealed.file_name().unwrap()), &b).unwrap();
        match read_all(copy.path()) {
            Err(JournalError::Corrupt { path, .. }) => {
                assert_eq!(path.file_name(), sealed.file_name(), "byte {byte}")
            }
            other => panic!("byte {byte}: expected corruption, got {other:?}"),
        }
    }
    // A sealed segment cut short is corruption too, not a torn tail.
    let copy = copy_dir(dir.path());
    std::fs::write(
        copy.path().join(sealed.file_name().unwrap()),
        &full[..full.len() - 1],
    )
    .unwrap();
    assert!(matches!(
        read_all(copy.path()),
        Err(JournalError::Corrupt { .. })
    ));
}

/// Collects the events logged while a closure runs (a minimal `tracing` subscriber).
mod capture {
    use super::*;
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    #[derive(Default, Clone)]
    pub struct Log(pub Arc<Mutex<Vec<(Level, String)>>>);

    struct Fields(String);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!("{}={:?} ", field.name(), value));
        }
    }

    impl Subscriber for Log {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut f = Fields(String::new());
            event.record(&mut f);
            self.0
                .lock()
                .unwrap()
                .push((*event.metadata().level(), f.0));
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}

#[test]
fn cutting_a_tail_logs_the_file_offset_and_bytes_dropped() {
    let (dir, segs) = build(1 << 20);
    let name = segs[0].file_name().unwrap().to_owned();
    let full = std::fs::read(&segs[0]).unwrap();
    let ends = record_ends();
    let last_start = ends[ends.len() - 2];
    // A record cut short: a warning. A complete record with a flipped payload bit: an error.
    for (bytes, level, words) in [
        (
            full[..full.len() - 5].to_vec(),
            tracing::Level::WARN,
            "torn tail",
        ),
        (
            {
                let mut b = full.clone();
                b[last_start + RECORD_HEADER_LEN] ^= 1;
                b
            },
            tracing::Level::ERROR,
            "acknowledged",
        ),
    ] {
        let copy = copy_dir(dir.path());
        std::fs::write(copy.path().join(&name), &bytes).unwrap();
        let log = capture::Log::default();
        tracing::subscriber::with_default(log.clone(), || {
            drop(JournaledQueue::open(copy.path(), "q", cfg(1 << 20)).unwrap());
        });
        let events = log.0.lock().unwrap().clone();
        let (lvl, fields) = events
            .iter()
            .find(|(_, f)| f.contains(words))
            .unwrap_or_else(|| panic!("no {words:?} event in {events:?}"));
        assert_eq!(*lvl, level);
        assert!(fields.contains(&format!("offset={last_start}")), "{fields}");
        assert!(
            fields.contains(&format!("dropped_bytes={}", bytes.len() - last_start)),
            "{fields}"
        );
        assert!(
            fields.contains(&name.to_string_lossy().to_string()),
            "{fields}"
        );
    }
}

/// An item whose payload carries an encoded journal record with a higher id (a queue
/// forwarding another journal's records, say) is torn by a crash after that inner record.
/// The inner record is followed by the rest of the payload, not by records running to the
/// end of the file, so the bad record is a torn tail and is cut off. A broken open takes
/// the inner record for an intact record after damage and refuses the queue as corrupt.
#[test]
fn a_torn_item_carrying_an_encoded_record_is_cut_off_as_a_torn_tail() {
    use fairq_journal::format::{encode_record, Record, RecordKind};
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg(1 << 20)).unwrap();
    q.put(b"before").unwrap();
    let mut inner = Vec::new();
    encode_record(
        &Record {
            kind: RecordKind::Item,
            id: 1000,
            added_at_ms: 1,
            expires_at_ms: None,
            payload: b"forwarded",
        },
        &mut inner,
    );
    let mut payload = vec![0xAB; 64];
    payload.extend_from_slice(&inner);
    payload.extend_from_slice(&[0xCD; 64]);
    q.put(&payload).unwrap();
    drop(q);
    let seg = dir.path().join("q.00000000000000000001.seg");
    let len = std::fs::metadata(&seg).unwrap().len();
    // The last 32 bytes of the put never reached the disk.
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(len - 32).unwrap();
    drop(f);
    let (items, report) = read_all_reporting(dir.path()).unwrap();
    assert_eq!(items, [b"before".to_vec()]);
    assert_eq!(report.tails.len(), 1, "{report:?}");
    assert_eq!(report.tails[0].cause, TailCause::Incomplete);
    assert_eq!(
        report.tails[0].offset as usize,
        SEGMENT_HEADER_LEN + RECORD_HEADER_LEN + b"before".len()
    );
}

/// Damage to a whole record inside the last segment (a flipped payload byte), intact records
/// after it, then a torn write: a whole record failing its checksum is not the shape of a
/// torn write, and records the journal wrote after it follow, which may have been
/// acknowledged. Opening refuses the segment as corrupt, with the damaged record's offset,
/// and changes nothing on disk (salvage recovers the records on either side). A broken open
/// cuts the segment at the damage, dropping the acknowledged records after it.
#[test]
fn damage_followed_by_records_and_a_torn_write_is_reported_and_nothing_is_cut() {
    let (dir, segs) = build(1 << 20);
    let ends = record_ends();
    let mut b = std::fs::read(&segs[0]).unwrap();
    // A payload byte of the fourth record flipped; the fifth intact; the sixth torn.
    let fourth = ends[2];
    b[fourth + RECORD_HEADER_LEN] ^= 0x10;
    b.truncate(b.len() - 10);
    std::fs::write(&segs[0], &b).unwrap();
    match read_all_reporting(dir.path()) {
        Err(JournalError::Corrupt { offset, .. }) => assert_eq!(offset as usize, fourth),
        other => panic!("expected corruption at {fourth}, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(&segs[0]).unwrap(),
        b,
        "the segment is left as it was"
    );
}
