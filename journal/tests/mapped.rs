//! Mapped writes (`JournalConfig::mapped_writes`) on the real file system: records stored
//! into a map read back as written ones do, across rotation, a record too large for the map,
//! a clean close, a crash (a copy of the files as the page cache holds them) and a reopen.
//! The kill -9 harness (`kill9.rs`) runs them under a real SIGKILL as well.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use fairq_journal::format::{decode_record, SEGMENT_HEADER_LEN};
use fairq_journal::sim::{ForwardWrite, SimDisk, WrapFiles};
use fairq_journal::storage::{FsStorage, Prefault, Storage, WriteFile, WriteMap};
use fairq_journal::{JournalConfig, JournalError, JournaledQueue, SyncPolicy, TailCause};

const SEGMENT: u64 = 64 * 1024;
/// What the journal maps past the segment size (`MAP_SLACK` in `mapped.rs`).
const SLACK: u64 = 64 * 1024;

fn mapped(sync: SyncPolicy) -> JournalConfig {
    JournalConfig {
        sync,
        segment_size: SEGMENT,
        mapped_writes: true,
        ..JournalConfig::default()
    }
}

/// Item `i`: its number, then a run of bytes of a length that varies with it.
fn item(i: u64) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.extend((0..(i * 131) % 3000).map(|b| (b as u8) ^ (i as u8)));
    v
}

/// The queue's segment files, sorted by name, with their lengths.
fn segments(dir: &Path) -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Every byte of the file after its header is a valid record: nothing was left past them.
fn assert_only_records(path: &Path) {
    assert_only_records_within(path, u64::MAX);
}

/// [`assert_only_records`] for the file's first `len` bytes: its length when the folder was
/// listed. The helper that creates the segment after the writer's may take a segment
/// listed with its header alone to the map's length, zeros, before the file is read.
fn assert_only_records_within(path: &Path, len: u64) {
    let mut data = std::fs::read(path).unwrap();
    data.truncate(usize::try_from(len).unwrap_or(usize::MAX));
    let mut off = SEGMENT_HEADER_LEN;
    while off < data.len() {
        let (_, n) = decode_record(&data[off..])
            .unwrap_or_else(|e| panic!("{} at {off}: {e}", path.display()));
        off += n;
    }
}

fn drain(q: &JournaledQueue, reader: &str) -> Vec<(u64, Vec<u8>)> {
    let r = q.reader(reader).unwrap();
    let mut out = Vec::new();
    while let Some(it) = r.get().unwrap() {
        out.push((it.id.0, it.data.to_vec()));
        r.commit(it.id).unwrap();
    }
    out
}

fn assert_items(got: &[(u64, Vec<u8>)], ids: std::ops::Range<u64>) {
    assert_eq!(got.len() as u64, ids.end - ids.start, "item count");
    for ((id, data), i) in got.iter().zip(ids) {
        assert_eq!(*id, i + 1, "ids in put order");
        assert_eq!(data, &item(i), "item {i} intact");
    }
}

#[test]
fn mapped_puts_read_back_across_rotation_and_a_clean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "m", mapped(SyncPolicy::Never)).unwrap();
    let reader = q.reader("a").unwrap();
    // A reader that reads nothing keeps every segment from being retired.
    q.reader("b").unwrap();
    for i in 0..200 {
        q.put(&item(i)).unwrap();
        // A reader sees a stored record as soon as its put returned.
        let got = reader.get().unwrap().expect("the item just put");
        assert_eq!(&got.data[..], &item(i)[..]);
        reader.abort(got.id).unwrap();
        reader.commit(reader.get().unwrap().unwrap().id).unwrap();
    }
    // The segment being written is mapped: its file is allocated to the map's length, and
    // so is the one created ahead of it, if any. The sealed ones hold nothing but their
    // records once a sync waited for the last one to be cut back (done in the background).
    q.sync().unwrap();
    let segs = segments(dir.path());
    assert!(segs.len() >= 3, "rotated: {segs:?}");
    let (at_map_length, others): (Vec<_>, Vec<_>) =
        segs.iter().partition(|(_, len)| *len == SEGMENT + SLACK);
    assert!(
        (1..=2).contains(&at_map_length.len())
            && at_map_length
                .iter()
                .all(|m| segs[segs.len() - 2..].contains(m)),
        "the writer's segment, and the next one, are mapped: {segs:?}"
    );
    for (name, len) in others {
        assert!(*len < SEGMENT + 4000, "{name} is {len} bytes");
        assert_only_records_within(&dir.path().join(name), *len);
    }
    for i in 200..300 {
        q.put(&item(i)).unwrap();
    }
    q.close().unwrap();
    for (name, _) in segments(dir.path()) {
        assert_only_records(&dir.path().join(name));
    }
    // Reopened both ways, the items put after the reader's commits are there.
    let q = JournaledQueue::open(dir.path(), "m", mapped(SyncPolicy::Never)).unwrap();
    assert!(q.recovery_report().is_clean(), "{:?}", q.recovery_report());
    assert_items(&drain(&q, "a"), 200..300);
    assert_items(&drain(&q, "b"), 0..300);
    q.close().unwrap();
}

#[test]
fn a_record_larger_than_the_map_is_written_and_the_segment_goes_on_unmapped() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "m", mapped(SyncPolicy::Never)).unwrap();
    let big = vec![0x5Au8; (SEGMENT + SLACK) as usize];
    q.put(&item(0)).unwrap();
    q.put(&big).unwrap();
    q.put(&item(2)).unwrap();
    let many = [&item(3)[..], &item(4)[..], &big[..]];
    q.put_many(&many).unwrap();
    q.close().unwrap();
    for (name, _) in segments(dir.path()) {
        assert_only_records(&dir.path().join(name));
    }
    let q = JournaledQueue::open(dir.path(), "m", mapped(SyncPolicy::Never)).unwrap();
    let got = drain(&q, "");
    let expect: Vec<Vec<u8>> = vec![item(0), big.clone(), item(2), item(3), item(4), big];
    assert_eq!(got.into_iter().map(|(_, d)| d).collect::<Vec<_>>(), expect);
    q.close().unwrap();
}

/// A crash leaves the writer's segment as long as its map, zeros after the records; what
/// was stored is in the page cache, so a copy of the files taken while the queue is open is
/// what the disk holds after a kill -9. Opening the copy keeps every item and cuts the zeros.
#[test]
fn after_a_crash_recovery_keeps_every_stored_record_and_cuts_the_zeros() {
    let dir = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(
        dir.path(),
        "m",
        mapped(SyncPolicy::Periodic(Duration::from_secs(3600))),
    )
    .unwrap();
    for i in 0..150 {
        q.put(&item(i)).unwrap();
    }
    common::crash_copy(dir.path(), copy.path());
    let last = segments(copy.path())
        .into_iter()
        .find(|(_, len)| *len == SEGMENT + SLACK)
        .expect("the crash left the writer's segment as long as its map");
    let reopened = JournaledQueue::open(copy.path(), "m", mapped(SyncPolicy::Never)).unwrap();
    let report = reopened.recovery_report().clone();
    let tail = report
        .tails
        .iter()
        .find(|t| t.path.ends_with(&last.0))
        .expect("the zeros were cut");
    assert_eq!(tail.cause, TailCause::Incomplete);
    assert!(tail.truncated);
    assert_eq!(tail.offset + tail.dropped_bytes, SEGMENT + SLACK);
    assert_only_records(&copy.path().join(&last.0));
    assert_items(&drain(&reopened, ""), 0..150);
    reopened.close().unwrap();
    q.close().unwrap();
}

#[test]
fn mapped_writes_refuse_policies_that_sync_every_put() {
    for sync in [SyncPolicy::Always, SyncPolicy::Group] {
        let dir = tempfile::tempdir().unwrap();
        match JournaledQueue::open(dir.path(), "m", mapped(sync)) {
            Err(JournalError::InvalidConfig { reason }) => {
                assert!(reason.contains("mapped_writes"), "{reason}")
            }
            other => panic!("{sync:?}: expected InvalidConfig, got {other:?}"),
        }
    }
}

/// On the simulated disk, which maps too: what a sync covered survives a power failure,
/// and of what was stored after it, at most what was put before the rest.
#[test]
fn a_sync_makes_stored_records_survive_a_power_failure() {
    let disk = SimDisk::new(7);
    let cfg = JournalConfig {
        mapped_writes: true,
        sync: SyncPolicy::Never,
        segment_size: SEGMENT,
        ..JournalConfig::on_sim(&disk)
    };
    let q = JournaledQueue::open("/q", "m", cfg.clone()).unwrap();
    for i in 0..100 {
        q.put(&item(i)).unwrap();
    }
    let lengths: Vec<u64> = (1..=12)
        .filter_map(|seg| {
            disk.read_all(&Path::new("/q").join(format!("m.{seg:020}.seg")))
                .ok()
        })
        .map(|d| d.len() as u64)
        .collect();
    assert!(
        lengths.contains(&(SEGMENT + SLACK)),
        "the writer's segment is mapped: {lengths:?}"
    );
    q.sync().unwrap();
    for i in 100..120 {
        q.put(&item(i)).unwrap();
    }
    disk.crash();
    drop(q);
    let q = JournaledQueue::open("/q", "m", cfg).unwrap();
    let got = drain(&q, "");
    assert!(got.len() >= 100, "{} items survived", got.len());
    assert_items(&got, 0..got.len() as u64);
    q.close().unwrap();
}

/// Where the preparation of a map's pages waits, once the test closes it, until the test
/// opens it again. A preparation on the thread that puts (the one that set the gate) does
/// not wait but is counted: it would have made a put wait for a preparation.
#[derive(Debug, Default)]
struct Gate {
    closed: Mutex<Option<std::thread::ThreadId>>,
    opened: Condvar,
    /// Preparations that waited at the gate.
    waited: AtomicUsize,
    /// Preparations run by the putting thread while the gate was closed.
    on_the_putting_thread: AtomicUsize,
    /// A helper still waited after two minutes: the test hung (a put waiting for it).
    hung: AtomicBool,
}

impl Gate {
    fn set(&self, closed: bool) {
        *self.closed.lock().unwrap() = closed.then(|| std::thread::current().id());
        self.opened.notify_all();
    }

    fn pass(&self) {
        let closed = self.closed.lock().unwrap();
        match *closed {
            None => return,
            Some(putter) if putter == std::thread::current().id() => {
                self.on_the_putting_thread.fetch_add(1, Ordering::SeqCst);
                return;
            }
            Some(_) => {}
        }
        self.waited.fetch_add(1, Ordering::SeqCst);
        self.opened.notify_all();
        // A helper waits here until the test opens the gate, however long the puts take on
        // a loaded machine; the limit only turns a hang into a failure.
        let (closed, wait) = self
            .opened
            .wait_timeout_while(closed, Duration::from_secs(120), |closed| closed.is_some())
            .unwrap();
        drop(closed);
        if wait.timed_out() {
            self.hung.store(true, Ordering::SeqCst);
        }
    }

    /// Waits until `n` preparations wait at the gate (two minutes at most: then the
    /// assertion after it fails).
    fn wait_for_waiting(&self, n: usize) {
        let closed = self.closed.lock().unwrap();
        drop(
            self.opened
                .wait_timeout_while(closed, Duration::from_secs(120), |_| {
                    self.waited.load(Ordering::SeqCst) < n
                })
                .unwrap(),
        );
    }
}

/// Opens the gate when dropped, so that a failed assertion does not leave the queue's
/// drop waiting for a helper at the gate.
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// A segment file whose map prepares its pages only once through the gate.
#[derive(Debug)]
struct GatedFile {
    inner: Box<dyn WriteFile>,
    gate: Arc<Gate>,
}

impl ForwardWrite for GatedFile {
    fn inner(&self) -> &dyn WriteFile {
        self.inner.as_ref()
    }
    fn map(&self, len: u64) -> std::io::Result<Option<Box<dyn WriteMap>>> {
        Ok(self.inner.map(len)?.map(|inner| {
            Box::new(GatedMap {
                inner,
                gate: Arc::clone(&self.gate),
            }) as Box<dyn WriteMap>
        }))
    }
}

#[derive(Debug)]
struct GatedMap {
    inner: Box<dyn WriteMap>,
    gate: Arc<Gate>,
}

impl WriteMap for GatedMap {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn store(&mut self, offset: usize, parts: &[&[u8]]) {
        self.inner.store(offset, parts);
    }
    fn prefaulter(&self) -> Option<Prefault> {
        let (gate, prepare) = (Arc::clone(&self.gate), self.inner.prefaulter());
        Some(Box::new(move || {
            gate.pass();
            if let Some(prepare) = prepare {
                prepare();
            }
        }))
    }
}

#[test]
fn rotation_does_not_wait_for_the_next_segments_pages_to_be_prepared() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    let files = Arc::clone(&gate);
    let storage = WrapFiles::new(FsStorage).write_files(move |_, inner| {
        Box::new(GatedFile {
            inner,
            gate: Arc::clone(&files),
        })
    });
    let config = JournalConfig {
        storage: Arc::new(storage),
        ..mapped(SyncPolicy::Never)
    };
    // The segment the queue opens with is prepared on the opening thread, before the gate
    // closes; every segment created ahead after that waits at the gate.
    let q = JournaledQueue::open(dir.path(), "g", config.clone()).unwrap();
    q.reader("r").unwrap();
    gate.set(true);
    let _open = OpenOnDrop(Arc::clone(&gate));
    // About six segments' worth: each rotation takes a segment whose helper still waits.
    for i in 0..150 {
        q.put(&item(i)).unwrap();
    }
    assert!(
        segments(dir.path()).len() >= 4,
        "rotated: {:?}",
        segments(dir.path())
    );
    // The helpers of the segments rotated into reach the gate after handing their segment
    // over, each in its own time.
    gate.wait_for_waiting(3);
    assert!(
        gate.waited.load(Ordering::SeqCst) >= 3,
        "the helpers prepare pages after handing their segment over"
    );
    assert_eq!(
        gate.on_the_putting_thread.load(Ordering::SeqCst),
        0,
        "a put prepared a map's pages itself"
    );
    gate.set(false);
    // Preparing pages of maps given up meanwhile, and of files cut back, harms nothing.
    let read = drain(&q, "r");
    assert_items(&read, 0..150);
    q.close().unwrap();
    assert!(
        !gate.hung.load(Ordering::SeqCst),
        "a put waited for a preparation"
    );
    for (name, _) in segments(dir.path()) {
        assert_only_records(&dir.path().join(name));
    }
    let q = JournaledQueue::open(dir.path(), "g", config).unwrap();
    assert!(q.recovery_report().is_clean(), "{:?}", q.recovery_report());
    q.reader("again").unwrap();
    for i in 150..200 {
        q.put(&item(i)).unwrap();
    }
    assert_items(&drain(&q, "again"), 150..200);
    q.close().unwrap();
}
