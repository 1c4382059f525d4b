//! The writer reserves disk space ahead of itself (`WriteFile::reserve`): every segment is
//! reserved in contiguous stretches that stay ahead of its end, up to the segment size and
//! no further; a read-only open reserves nothing; a file system that cannot reserve space is
//! asked once; and a reservation changes neither a segment's length nor what recovery finds
//! in it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fairq_journal::sim::{ForwardWrite, SimDisk, WrapFiles};
use fairq_journal::storage::{FsStorage, Storage, WriteFile};
use fairq_journal::{JournalConfig, JournaledQueue, SyncPolicy};

const SEGMENT: u64 = 300 << 10;

fn cfg(disk: &SimDisk, sync: SyncPolicy) -> JournalConfig {
    JournalConfig {
        sync,
        segment_size: SEGMENT,
        checkpoint_interval: Duration::ZERO,
        ..JournalConfig::on_sim(disk)
    }
}

fn segments(disk: &SimDisk, dir: &Path) -> Vec<PathBuf> {
    let mut segs: Vec<PathBuf> = disk
        .list_dir(dir)
        .unwrap()
        .into_iter()
        .filter(|e| e.name.ends_with(".seg"))
        .map(|e| dir.join(e.name))
        .collect();
    segs.sort();
    segs
}

/// The reservations made in `path`, checked to be contiguous; returns where they start
/// and end (`None` if there were none).
fn reserved(disk: &SimDisk, path: &Path) -> Option<(u64, u64)> {
    let mut span: Option<(u64, u64)> = None;
    for (p, offset, len) in disk.reservations() {
        if p != path {
            continue;
        }
        assert!(len > 0, "an empty reservation in {}", path.display());
        span = Some(match span {
            None => (offset, offset + len),
            Some((start, end)) => {
                assert_eq!(
                    offset,
                    end,
                    "reservations of {} leave a gap or overlap",
                    path.display()
                );
                (start, offset + len)
            }
        });
    }
    span
}

fn len(disk: &SimDisk, path: &Path) -> u64 {
    disk.read_all(path).unwrap().len() as u64
}

#[test]
fn the_writer_stays_ahead_of_itself_in_every_segment() {
    for sync in [SyncPolicy::Never, SyncPolicy::Always] {
        let disk = SimDisk::new(7);
        let q = JournaledQueue::open("/q", "q", cfg(&disk, sync)).unwrap();
        let item = [0x5Au8; 1000];
        let mut rotations = 0;
        let mut last_segment = PathBuf::new();
        for _ in 0..800 {
            q.put(&item).unwrap();
            let segs = segments(&disk, Path::new("/q"));
            // Under Never the next segment may exist already (created ahead, still empty).
            let writer = segs
                .iter()
                .rev()
                .find(|p| len(&disk, p) > 28)
                .expect("a segment with records")
                .clone();
            if writer != last_segment {
                rotations += 1;
                last_segment = writer.clone();
            }
            let (start, end) = reserved(&disk, &writer).expect("the writer's segment is reserved");
            let written = len(&disk, &writer);
            assert!(
                start <= written,
                "{sync:?}: the reservation starts past the records"
            );
            assert!(end <= SEGMENT, "{sync:?}: reserved past the segment size");
            assert!(
                written < end || end == SEGMENT,
                "{sync:?}: the writer at {written} is not behind its reservation ({end})"
            );
        }
        assert!(
            rotations >= 3,
            "{sync:?}: only {rotations} segments written"
        );
        // Every sealed segment was reserved to its end.
        let segs = segments(&disk, Path::new("/q"));
        for sealed in &segs[..segs.len() - 2] {
            let (_, end) = reserved(&disk, sealed).expect("a sealed segment was reserved");
            assert_eq!(
                end,
                SEGMENT,
                "{sync:?}: {} not reserved to its end",
                sealed.display()
            );
        }
        q.close().unwrap();
    }
}

#[test]
fn a_small_queue_reserves_little() {
    let disk = SimDisk::new(8);
    let q = JournaledQueue::open(
        "/q",
        "q",
        JournalConfig {
            segment_size: 16 << 20,
            ..cfg(&disk, SyncPolicy::Never)
        },
    )
    .unwrap();
    q.put(b"one small item").unwrap();
    let seg = segments(&disk, Path::new("/q")).remove(0);
    let (_, end) = reserved(&disk, &seg).unwrap();
    assert!(end <= 128 << 10, "a one-item queue reserved {end} bytes");
    q.close().unwrap();
}

#[test]
fn a_read_only_open_reserves_nothing() {
    let disk = SimDisk::new(9);
    let q = JournaledQueue::open("/q", "q", cfg(&disk, SyncPolicy::Always)).unwrap();
    for i in 0..50u8 {
        q.put(&[i; 1000]).unwrap();
    }
    q.close().unwrap();
    let before = disk.reservations().len();
    let ro = JournaledQueue::open_read_only("/q", "q", cfg(&disk, SyncPolicy::Always)).unwrap();
    let r = ro.reader("").unwrap();
    while let Some(item) = r.get().unwrap() {
        r.commit(item.id).unwrap();
    }
    assert_eq!(disk.reservations().len(), before);
}

/// On the real file system a reservation allocates space past the end of the file and
/// leaves its length alone: the file still ends at its last record, and a reopen (after a
/// drop, as after a crash) finds every item and cuts nothing off.
#[test]
fn reserved_space_is_not_part_of_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = JournalConfig {
        sync: SyncPolicy::Never,
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open(dir.path(), "q", cfg.clone()).unwrap();
    for i in 0..100u32 {
        q.put(&[i as u8; 1000]).unwrap();
    }
    drop(q);
    let seg = dir.path().join(format!("q.{:020}.seg", 1));
    let meta = std::fs::metadata(&seg).unwrap();
    assert_eq!(meta.len(), 28 + 100 * (36 + 1000));
    #[cfg(unix)]
    {
        // Where the file system can reserve space, the blocks go past the file's end by
        // at least half a stretch (32 KiB), more than rounding up to a block does.
        let probe = FsStorage.create(&dir.path().join("probe"), 0o600).unwrap();
        if probe.reserve(0, 4096).is_ok() {
            use std::os::unix::fs::MetadataExt;
            assert!(
                meta.blocks() * 512 >= meta.len() + (32 << 10),
                "{} blocks for {} bytes: nothing reserved",
                meta.blocks(),
                meta.len()
            );
        }
    }
    let q = JournaledQueue::open(dir.path(), "q", cfg).unwrap();
    assert!(q.recovery_report().tails.is_empty());
    let r = q.reader("").unwrap();
    for i in 0..100u32 {
        let item = r.get().unwrap().expect("every item is back");
        assert_eq!(&item.data[..], &[i as u8; 1000][..]);
        r.commit(item.id).unwrap();
    }
    assert!(r.get().unwrap().is_none());
    q.close().unwrap();
}

/// A file that cannot reserve space (as on a file system without `fallocate`), counting
/// how often it was asked.
#[derive(Debug)]
struct NoReserveFile(Box<dyn WriteFile>, Arc<AtomicUsize>);

impl ForwardWrite for NoReserveFile {
    fn inner(&self) -> &dyn WriteFile {
        self.0.as_ref()
    }
    fn reserve(&self, _offset: u64, _len: u64) -> io::Result<()> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no fallocate here",
        ))
    }
}

#[test]
fn a_file_system_that_cannot_reserve_is_asked_once() {
    let disk = SimDisk::new(10);
    let asked = Arc::new(AtomicUsize::new(0));
    let config = JournalConfig {
        storage: Arc::new({
            let asked = asked.clone();
            WrapFiles::new(disk.clone())
                .write_files(move |_, f| Box::new(NoReserveFile(f, asked.clone())))
        }),
        ..cfg(&disk, SyncPolicy::Never)
    };
    let q = JournaledQueue::open("/q", "q", config).unwrap();
    for i in 0..1000u32 {
        q.put(&[i as u8; 1000]).unwrap();
    }
    assert!(segments(&disk, Path::new("/q")).len() >= 3, "no rotation");
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    let r = q.reader("").unwrap();
    for i in 0..1000u32 {
        assert_eq!(&r.get().unwrap().unwrap().data[..], &[i as u8; 1000][..]);
    }
    q.close().unwrap();
}
