//! The management features: peek, expiry into a sink, expiry sweeps with a limit, the
//! queue's maximum age, removing readers, listing queues, per-reader counters and dead
//! letters.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::files;
use fairq_journal::{
    FullPolicy, Item, JournalConfig, JournalError, JournaledQueue, ManualClock, PutOptions, Reader,
    ReaderConfig, Sink, SyncPolicy,
};

mod faulty;

use fairq_journal::sim::SimDisk;
use fairq_journal::storage::Storage;
use faulty::{Faulty, Op};

const START: u64 = 1_700_000_000_000;

fn at(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn setup() -> (tempfile::TempDir, ManualClock, JournalConfig) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(at(START));
    let config = JournalConfig {
        sync: SyncPolicy::Always,
        checkpoint_interval: Duration::ZERO,
        clock: Arc::new(clock.clone()),
        ..JournalConfig::default()
    };
    (dir, clock, config)
}

fn expiring(ms: u64) -> PutOptions {
    PutOptions {
        expires_at: Some(at(ms)),
    }
}

fn drain(r: &Reader) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(item) = r.get().unwrap() {
        r.commit(item.id).unwrap();
        out.push(item.data.to_vec());
    }
    out
}

/// A sink that records what it is given, and fails while `fail` is set.
#[derive(Clone, Default)]
struct Recorder {
    got: Arc<Mutex<Vec<Item>>>,
    fail: Arc<Mutex<bool>>,
}

impl Recorder {
    fn sink(&self) -> Sink {
        let me = self.clone();
        Sink::callback(move |item| {
            if *me.fail.lock().unwrap() {
                return Err("downstream unavailable".into());
            }
            me.got.lock().unwrap().push(item.clone());
            Ok(())
        })
    }

    fn data(&self) -> Vec<Vec<u8>> {
        self.got
            .lock()
            .unwrap()
            .iter()
            .map(|i| i.data.to_vec())
            .collect()
    }
}

#[test]
fn peek_shows_what_get_delivers_without_opening_it() {
    let (dir, _clock, config) = setup();
    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    let r = q.reader("r").unwrap();
    assert_eq!(r.peek().unwrap(), None);
    q.put(b"a").unwrap();
    q.put(b"b").unwrap();
    let seen = r.peek().unwrap().unwrap();
    assert_eq!(&seen.data[..], b"a");
    assert_eq!(
        r.peek().unwrap().unwrap(),
        seen,
        "peeking twice sees the same item"
    );
    assert_eq!((r.len(), r.open_reads()), (2, 0));
    let a = r.get().unwrap().unwrap();
    assert_eq!(a, seen);
    assert_eq!(&r.peek().unwrap().unwrap().data[..], b"b");
    // An aborted item is next again, with its error count.
    r.abort(a.id).unwrap();
    let again = r.peek().unwrap().unwrap();
    assert_eq!((again.id, again.error_count), (a.id, 1));
    assert!(matches!(r.commit(a.id), Err(JournalError::NotOpen(_))));
    let s = r.stats().unwrap();
    assert_eq!((s.get_hits, s.get_misses, s.opened), (1, 0, 1));
}

#[test]
fn expires_at_and_max_age_share_one_inclusive_boundary() {
    let (dir, clock, config) = setup();
    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    let by_time = q.reader("by-time").unwrap();
    let by_age = q
        .reader_with(
            "by-age",
            ReaderConfig {
                max_age: Some(Duration::from_millis(1000)),
                ..ReaderConfig::default()
            },
        )
        .unwrap();
    q.put_with(b"x", expiring(START + 1000)).unwrap();
    clock.set(at(START + 999));
    assert!(by_time.peek().unwrap().is_some(), "1 ms before expires_at");
    assert!(by_age.peek().unwrap().is_some(), "1 ms before max_age");
    clock.set(at(START + 1000));
    assert_eq!(by_time.get().unwrap(), None, "at expires_at: expired");
    assert_eq!(
        by_age.get().unwrap(),
        None,
        "at added_at + max_age: expired"
    );
    assert_eq!(by_time.stats().unwrap().expired, 1);
    assert_eq!(by_age.stats().unwrap().expired, 1);
}

#[test]
fn expired_items_move_to_another_queue_or_a_callback() {
    let (dir, clock, config) = setup();
    let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
    let late = JournaledQueue::open(dir.path(), "late", config.clone()).unwrap();
    let to_queue = q.reader("to-queue").unwrap();
    let to_callback = q.reader("to-callback").unwrap();
    let dropping = q.reader("dropping").unwrap();
    to_queue.set_expired_sink(Some(Sink::queue(&late)));
    let rec = Recorder::default();
    to_callback.set_expired_sink(Some(rec.sink()));
    q.put_with(b"old-1", expiring(START + 10)).unwrap();
    q.put(b"keeps").unwrap();
    q.put_with(b"old-2", expiring(START + 10)).unwrap();
    clock.advance(Duration::from_millis(10));
    for r in [&to_queue, &to_callback, &dropping] {
        assert_eq!(drain(r), vec![b"keeps".to_vec()]);
        assert_eq!(r.stats().unwrap().expired, 2);
    }
    assert_eq!(rec.data(), vec![b"old-1".to_vec(), b"old-2".to_vec()]);
    // Moved without their expiry: they do not expire again in the other queue.
    let late_r = late.reader("").unwrap();
    let first = late_r.get().unwrap().unwrap();
    assert_eq!((&first.data[..], first.expires_at), (&b"old-1"[..], None));
    assert_eq!(&late_r.get().unwrap().unwrap().data[..], b"old-2");
}

#[test]
fn a_failing_expiry_sink_keeps_the_item_and_says_so() {
    let (dir, clock, config) = setup();
    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    let r = q.reader("r").unwrap();
    let rec = Recorder::default();
    r.set_expired_sink(Some(rec.sink()));
    q.put_with(b"old", expiring(START + 1)).unwrap();
    q.put(b"new").unwrap();
    clock.advance(Duration::from_millis(1));
    *rec.fail.lock().unwrap() = true;
    match r.get() {
        Err(JournalError::Sink {
            reader,
            item,
            source,
        }) => {
            assert_eq!(reader, "r");
            assert_eq!(item.0, 1);
            assert!(source.to_string().contains("downstream"), "{source}");
        }
        other => panic!("expected the sink's failure, got {other:?}"),
    }
    assert_eq!(r.len(), 2, "nothing was lost");
    assert_eq!(r.stats().unwrap().expired, 0);
    *rec.fail.lock().unwrap() = false;
    assert_eq!(drain(&r), vec![b"new".to_vec()]);
    assert_eq!(rec.data(), vec![b"old".to_vec()]);
}

#[test]
fn an_expired_item_in_flight_to_its_sink_survives_a_crash() {
    // The sink took the item, then the process died before the reader's checkpoint: the
    // item goes to the sink again (at least once), it is never lost.
    let (dir, clock, config) = setup();
    let config = JournalConfig {
        checkpoint_interval: Duration::from_secs(3600),
        ..config
    };
    let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
    let r = q.reader("r").unwrap();
    r.checkpoint().unwrap();
    let late = JournaledQueue::open(dir.path(), "late", config.clone()).unwrap();
    r.set_expired_sink(Some(Sink::queue(&late)));
    q.put_with(b"old", expiring(START + 1)).unwrap();
    clock.advance(Duration::from_millis(1));
    assert_eq!(r.get().unwrap(), None);
    drop((r, q, late)); // a crash: no checkpoint since the item moved
    let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
    let late = JournaledQueue::open(dir.path(), "late", config).unwrap();
    let r = q.reader("r").unwrap();
    r.set_expired_sink(Some(Sink::queue(&late)));
    assert_eq!(r.get().unwrap(), None);
    let copies = drain(&late.reader("").unwrap());
    assert_eq!(copies, vec![b"old".to_vec(), b"old".to_vec()]);
}

#[test]
fn the_expiry_sweep_takes_at_most_its_limit_from_the_front() {
    let (dir, clock, config) = setup();
    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    let a = q.reader("a").unwrap();
    let b = q.reader("b").unwrap();
    let rec = Recorder::default();
    a.set_expired_sink(Some(rec.sink()));
    for i in 0..5u8 {
        q.put_with(&[i], expiring(START + 5)).unwrap();
    }
    q.put(b"fresh").unwrap();
    q.put_with(b"behind", expiring(START + 5)).unwrap();
    clock.advance(Duration::from_millis(5));
    assert_eq!(a.discard_expired(3).unwrap(), 3);
    assert_eq!(rec.data(), vec![vec![0], vec![1], vec![2]]);
    assert_eq!(a.len(), 4);
    // The sweep stops at the first live item; the expired one behind it waits for `get`.
    assert_eq!(a.discard_expired(100).unwrap(), 2);
    assert_eq!(a.len(), 2);
    assert_eq!(q.discard_expired(4).unwrap(), 4, "reader b's sweep");
    assert_eq!(q.discard_expired(4).unwrap(), 1, "then b's fifth");
    assert_eq!(drain(&a), vec![b"fresh".to_vec()]);
    assert_eq!(a.stats().unwrap().expired, 6);
    assert_eq!(drain(&b), vec![b"fresh".to_vec()]);
}

#[test]
fn a_queue_is_ready_to_expire_when_old_enough_and_empty() {
    let (dir, clock, config) = setup();
    let config = JournalConfig {
        max_queue_age: Some(Duration::from_secs(60)),
        ..config
    };
    let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
    let other = JournaledQueue::open(dir.path(), "other", config.clone()).unwrap();
    other.put(b"stays").unwrap();
    let r = q.reader("r").unwrap();
    q.put(b"x").unwrap();
    clock.advance(Duration::from_secs(59));
    assert!(!q.is_ready_for_expiration(), "too young");
    clock.advance(Duration::from_secs(1));
    assert!(!q.is_ready_for_expiration(), "an item waits");
    let item = r.get().unwrap().unwrap();
    assert!(!q.is_ready_for_expiration(), "an open read");
    r.commit(item.id).unwrap();
    assert!(q.is_ready_for_expiration());
    q.delete().unwrap();
    assert!(matches!(q.put(b"y"), Err(JournalError::Closed)));
    let names = JournaledQueue::list_queues(dir.path(), &config).unwrap();
    assert_eq!(names, vec!["other".to_string()]);
    assert_eq!(drain(&other.reader("").unwrap()), vec![b"stays".to_vec()]);
    // Without a maximum age a queue never expires.
    let (dir2, clock2, config2) = setup();
    let q2 = JournaledQueue::open(dir2.path(), "q", config2).unwrap();
    clock2.advance(Duration::from_secs(1 << 30));
    assert!(!q2.is_ready_for_expiration());
}

#[test]
fn removing_a_reader_forgets_it_and_frees_its_segments() {
    let (dir, _clock, config) = setup();
    let config = JournalConfig {
        segment_size: 60,
        ..config
    };
    let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
    let fast = q.reader("fast").unwrap();
    let slow = q.reader("slow").unwrap();
    for i in 0..6u8 {
        q.put(&[i; 30]).unwrap();
    }
    assert_eq!(drain(&fast).len(), 6);
    fast.checkpoint().unwrap();
    let segs = |d: &Path| files(d).iter().filter(|f| f.ends_with(".seg")).count();
    assert!(segs(dir.path()) >= 6, "the slow reader keeps them");
    assert!(matches!(
        q.remove_reader("nobody"),
        Err(JournalError::NoSuchReader(_))
    ));
    q.remove_reader("slow").unwrap();
    assert!(matches!(slow.get(), Err(JournalError::ReaderRemoved(_))));
    assert!(!files(dir.path()).contains(&"q.cp.slow".to_string()));
    assert!(segs(dir.path()) <= 2, "{:?}", files(dir.path()));
    assert!(matches!(
        q.remove_reader("fast"),
        Err(JournalError::LastReader(_))
    ));
    q.close().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    assert_eq!(q.reader_names(), vec!["fast".to_string()]);
    // A new reader of the same name starts afresh at the tail.
    q.put(b"later").unwrap();
    let slow = q.reader("slow").unwrap();
    assert_eq!(slow.len(), 0);
}

#[test]
fn queues_in_a_folder_are_listed_by_name() {
    let (dir, _clock, config) = setup();
    assert!(JournaledQueue::list_queues(dir.path(), &config)
        .unwrap()
        .is_empty());
    for name in ["b", "a:x", "c-1"] {
        let q = JournaledQueue::open(dir.path(), name, config.clone()).unwrap();
        q.reader("r").unwrap();
        q.close().unwrap();
    }
    std::fs::write(dir.path().join("README"), b"x").unwrap();
    std::fs::create_dir(dir.path().join("archive")).unwrap();
    assert_eq!(
        JournaledQueue::list_queues(dir.path(), &config).unwrap(),
        vec!["a:x".to_string(), "b".to_string(), "c-1".to_string()]
    );
    assert!(matches!(
        JournaledQueue::list_queues(dir.path().join("missing"), &config),
        Err(JournalError::Io { .. })
    ));
}

#[test]
fn counters_count_what_each_reader_did() {
    let (dir, clock, config) = setup();
    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    let r = q
        .reader_with(
            "r",
            ReaderConfig {
                max_items: Some(3),
                full_policy: FullPolicy::DropOldest,
                ..ReaderConfig::default()
            },
        )
        .unwrap();
    let idle = q.reader("idle").unwrap();
    q.put(b"1").unwrap();
    clock.advance(Duration::from_secs(5));
    q.put(b"2").unwrap();
    assert_eq!(r.stats().unwrap().oldest_age, Some(Duration::from_secs(5)));
    q.put_with(b"3", expiring(START + 6000)).unwrap();
    q.put(b"4").unwrap(); // drops "1" from r (max 3 items)
    clock.advance(Duration::from_secs(1)); // "3" expires
    let two = r.get().unwrap().unwrap();
    assert_eq!(&two.data[..], b"2");
    r.abort(two.id).unwrap();
    let two = r.get().unwrap().unwrap();
    r.commit(two.id).unwrap();
    let four = r.get().unwrap().unwrap(); // skips the expired "3"
    assert_eq!(&four.data[..], b"4");
    assert_eq!(r.get().unwrap(), None);
    let s = r.stats().unwrap();
    assert_eq!(s.puts, 4);
    assert_eq!((s.get_hits, s.get_misses), (3, 1));
    assert_eq!((s.opened, s.aborted, s.committed), (3, 1, 1));
    assert_eq!((s.expired, s.discarded, s.dead_lettered), (1, 1, 0));
    assert_eq!((s.items, s.bytes, s.open_reads), (0, 0, 1));
    assert_eq!(s.oldest_age, None);
    let s = idle.stats().unwrap();
    assert_eq!((s.puts, s.items, s.get_hits), (4, 4, 0));
    assert_eq!(s.oldest_age, Some(Duration::from_secs(6)));
}

#[test]
fn an_item_aborted_too_often_goes_to_the_error_sink() {
    let (dir, _clock, config) = setup();
    let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
    let dead = JournaledQueue::open(dir.path(), "q-dead", config.clone()).unwrap();
    let limited = ReaderConfig {
        max_errors: Some(2),
        ..ReaderConfig::default()
    };
    let r = q.reader_with("r", limited).unwrap();
    let quiet = q.reader_with("quiet", limited).unwrap();
    r.set_error_sink(Some(Sink::queue(&dead)));
    q.put(b"poison").unwrap();
    q.put(b"fine").unwrap();
    for reader in [&r, &quiet] {
        for round in 0..3 {
            let item = reader.get().unwrap().unwrap();
            assert_eq!((&item.data[..], item.error_count), (&b"poison"[..], round));
            reader.abort(item.id).unwrap();
        }
        // The third abort (over max_errors = 2) took it out of the way.
        assert_eq!(drain(reader), vec![b"fine".to_vec()]);
    }
    assert_eq!(r.stats().unwrap().dead_lettered, 1);
    assert_eq!(
        quiet.stats().unwrap().discarded,
        1,
        "no error sink: dropped"
    );
    assert_eq!(drain(&dead.reader("").unwrap()), vec![b"poison".to_vec()]);
}

#[test]
fn a_failing_error_sink_returns_the_item_to_the_front() {
    let (dir, _clock, config) = setup();
    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    let r = q
        .reader_with(
            "r",
            ReaderConfig {
                max_errors: Some(0),
                ..ReaderConfig::default()
            },
        )
        .unwrap();
    let rec = Recorder::default();
    r.set_error_sink(Some(rec.sink()));
    *rec.fail.lock().unwrap() = true;
    q.put(b"job").unwrap();
    let item = r.get().unwrap().unwrap();
    assert!(matches!(r.abort(item.id), Err(JournalError::Sink { .. })));
    let again = r.get().unwrap().unwrap();
    assert_eq!((again.id, again.error_count), (item.id, 1));
    *rec.fail.lock().unwrap() = false;
    r.abort(again.id).unwrap();
    assert_eq!(r.get().unwrap(), None);
    let got = rec.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!((&got[0].data[..], got[0].error_count), (&b"job"[..], 2));
}

#[test]
fn the_readme_management_example_runs() -> Result<(), JournalError> {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let jobs = JournaledQueue::open(dir, "jobs", JournalConfig::default())?;
    let dead = JournaledQueue::open(dir, "jobs-dead", JournalConfig::default())?;
    let late = JournaledQueue::open(dir, "jobs-late", JournalConfig::default())?;
    let workers = jobs.reader_with(
        "workers",
        ReaderConfig {
            max_age: Some(Duration::from_secs(3600)),
            max_errors: Some(5),
            ..ReaderConfig::default()
        },
    )?;
    workers.set_expired_sink(Some(Sink::queue(&late)));
    workers.set_error_sink(Some(Sink::queue(&dead)));
    jobs.put(b"job")?;
    let next = workers.peek()?.expect("an item");
    assert_eq!(&next.data[..], b"job");
    jobs.discard_expired(1000)?;
    let s = workers.stats()?;
    assert_eq!((s.items, s.dead_lettered), (1, 0));
    assert!(s.oldest_age.is_some());
    assert_eq!(
        JournaledQueue::list_queues(dir, &JournalConfig::default())?,
        vec!["jobs", "jobs-dead", "jobs-late"]
    );
    Ok(())
}

/// The names of the files of queue `q` in `dir` on `disk`.
fn files_of_q(disk: &SimDisk, dir: &str) -> Vec<String> {
    let mut v: Vec<String> = disk
        .list_dir(Path::new(dir))
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n.starts_with("q."))
        .collect();
    v.sort();
    v
}

#[test]
fn a_segment_whose_retirement_failed_is_retired_later_and_deleting_leaves_nothing() {
    let disk = SimDisk::new(11);
    let storage = Faulty::new(&disk);
    let config = JournalConfig {
        sync: SyncPolicy::Always,
        segment_size: 60,
        checkpoint_interval: Duration::ZERO,
        storage: Arc::new(storage.clone()),
        ..JournalConfig::default()
    };
    let seg = |id: u64| format!("q.{id:020}.seg");
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    let r = q.reader("r").unwrap();
    for i in 0..6u8 {
        q.put(&[i; 30]).unwrap();
    }
    let first = Path::new("/j").join(seg(1));
    storage.refuse(move |op| matches!(op, Op::Remove(p) if *p == first));
    assert_eq!(drain(&r).len(), 6);
    assert!(files_of_q(&disk, "/j").contains(&seg(1)));
    storage.refuse_nothing();
    // The next collection tries again.
    r.checkpoint().unwrap();
    let left = files_of_q(&disk, "/j");
    assert!(
        !left.contains(&seg(1)) && !left.contains(&seg(5)),
        "{left:?}"
    );

    // A segment that could not be retired, and the temporary file of a checkpoint that
    // failed, are deleted with the queue.
    for i in 0..4u8 {
        q.put(&[i; 30]).unwrap();
    }
    let oldest = left.iter().find(|n| n.ends_with(".seg")).unwrap().clone();
    let stuck = Path::new("/j").join(&oldest);
    storage.refuse(move |op| matches!(op, Op::Remove(p) if *p == stuck));
    assert_eq!(drain(&r).len(), 4);
    storage.refuse(|op| matches!(op, Op::Rename { .. }));
    assert!(r.checkpoint().is_err());
    let left = files_of_q(&disk, "/j");
    assert!(left.contains(&oldest), "{left:?}");
    assert!(left.contains(&"q.cp.r.tmp".to_string()), "{left:?}");
    storage.refuse_nothing();
    q.delete().unwrap();
    assert_eq!(files_of_q(&disk, "/j"), Vec::<String>::new());
    assert!(JournaledQueue::list_queues("/j", &config)
        .unwrap()
        .is_empty());
}

#[test]
fn a_segment_whose_archiving_failed_is_archived_later_under_its_own_name() {
    let disk = SimDisk::new(12);
    let storage = Faulty::new(&disk);
    let config = JournalConfig {
        sync: SyncPolicy::Always,
        segment_size: 60,
        checkpoint_interval: Duration::ZERO,
        archive_dir: Some("/archive".into()),
        storage: Arc::new(storage.clone()),
        ..JournalConfig::default()
    };
    let seg = |id: u64| format!("q.{id:020}.seg");
    let archived = || files_of_q(&disk, "/archive");
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    let r = q.reader("r").unwrap();
    for i in 0..3u8 {
        q.put(&[i; 30]).unwrap();
    }
    // The move of segment 1 fails: it stays, and the name taken for it in the archive is
    // given back.
    let first = Path::new("/j").join(seg(1));
    storage.refuse(move |op| matches!(op, Op::Rename { from, .. } if *from == first));
    assert_eq!(drain(&r).len(), 3);
    assert!(files_of_q(&disk, "/j").contains(&seg(1)));
    assert_eq!(archived(), Vec::<String>::new());
    // Then the move goes through but the archive's sync fails: the next try finds the
    // segment moved already.
    storage.refuse(|op| matches!(op, Op::SyncDir(d) if *d == Path::new("/archive")));
    assert!(r.checkpoint().is_err());
    assert_eq!(archived(), vec![seg(1)]);
    storage.refuse_nothing();
    r.checkpoint().unwrap();
    assert_eq!(archived(), vec![seg(1), seg(2), seg(3)]);
    let left = files_of_q(&disk, "/j");
    assert!(left.iter().all(|n| n > &seg(3)), "{left:?}");
}

#[test]
fn a_crash_while_a_queue_is_deleted_forgets_no_reader() {
    // A power loss after each storage operation of `delete`, on a file system that keeps
    // removals in order (the folder is synced after each): the queue opens again, with
    // both readers until every item is gone, and while every segment is left each reader
    // gets at least what it had not finished.
    let seg_files = |disk: &SimDisk| {
        files_of_q(disk, "/j")
            .into_iter()
            .filter(|n| n.ends_with(".seg"))
            .count()
    };
    for k in 0.. {
        let disk = SimDisk::new(20 + k);
        let storage = Faulty::new(&disk);
        let config = JournalConfig {
            sync: SyncPolicy::Always,
            segment_size: 60,
            checkpoint_interval: Duration::ZERO,
            storage: Arc::new(storage.clone()),
            ..JournalConfig::default()
        };
        let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
        let a = q.reader("a").unwrap();
        let b = q.reader("b").unwrap();
        for i in 0..6u8 {
            q.put(&[i; 30]).unwrap();
        }
        for (r, n) in [(&a, 2), (&b, 4)] {
            for _ in 0..n {
                let item = r.get().unwrap().unwrap();
                r.commit(item.id).unwrap();
            }
            r.checkpoint().unwrap();
        }
        let segs = seg_files(&disk);
        storage.sync_after_remove(true);
        disk.schedule_crash(k);
        let deleted = q.delete();
        drop((a, b, q));
        let crashed = disk.is_dead();
        disk.restart();
        storage.sync_after_remove(false);
        if !crashed {
            deleted.unwrap();
            assert_eq!(files_of_q(&disk, "/j"), Vec::<String>::new());
            assert!(k > 6, "delete took {k} storage operations");
            break;
        }
        let all_there = seg_files(&disk) == segs;
        let q = JournaledQueue::open("/j", "q", config)
            .unwrap_or_else(|e| panic!("crash after {k} operations: {e}"));
        let names = q.reader_names();
        if names == vec![String::new()] {
            assert!(
                !all_there,
                "crash after {k} operations: the readers are forgotten"
            );
            assert!(
                q.reader("").unwrap().is_empty(),
                "crash after {k} operations"
            );
            continue;
        }
        assert_eq!(
            names,
            vec!["a".to_string(), "b".to_string()],
            "crash after {k}"
        );
        if all_there {
            for (name, from) in [("a", 2u8), ("b", 4)] {
                let got: Vec<u8> = drain(&q.reader(name).unwrap())
                    .iter()
                    .map(|d| d[0])
                    .collect();
                for i in from..6 {
                    assert!(
                        got.contains(&i),
                        "crash after {k}: {name} lost {i}: {got:?}"
                    );
                }
            }
        }
    }
}

/// A clock that holds the next call made on the thread that armed it, until released.
#[derive(Debug)]
struct HeldClock {
    time: ManualClock,
    /// The armed thread, whether it is held now, whether it was released.
    state: Mutex<(Option<std::thread::ThreadId>, bool, bool)>,
    cv: std::sync::Condvar,
}

impl HeldClock {
    fn hold_here(&self) {
        let mut s = self.state.lock().unwrap();
        if s.0 != Some(std::thread::current().id()) {
            return;
        }
        s.0 = None;
        s.1 = true;
        self.cv.notify_all();
        let mut s = self.cv.wait_while(s, |s| !s.2).unwrap();
        s.1 = false;
    }
}

impl fairq_journal::Clock for HeldClock {
    fn now(&self) -> SystemTime {
        self.hold_here();
        self.time.now()
    }
}

#[test]
fn a_commit_that_raced_the_deletion_does_not_bring_its_checkpoint_back() {
    let disk = SimDisk::new(13);
    let clock = Arc::new(HeldClock {
        time: ManualClock::new(at(START)),
        state: Mutex::new((None, false, false)),
        cv: std::sync::Condvar::new(),
    });
    let config = JournalConfig {
        checkpoint_interval: Duration::ZERO,
        clock: clock.clone(),
        ..JournalConfig::on_sim(&disk)
    };
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    let r = q.reader("r").unwrap();
    q.put(b"x").unwrap();
    let item = r.get().unwrap().unwrap();
    // The commit passes its check that the queue is open, then is held at its first
    // reading of the clock while the queue is deleted.
    let committer = {
        let clock = clock.clone();
        std::thread::spawn(move || {
            clock.state.lock().unwrap().0 = Some(std::thread::current().id());
            r.commit(item.id)
        })
    };
    drop(
        clock
            .cv
            .wait_while(clock.state.lock().unwrap(), |s| !s.1)
            .unwrap(),
    );
    q.delete().unwrap();
    clock.state.lock().unwrap().2 = true;
    clock.cv.notify_all();
    // The commit itself was made; its checkpoint is not written.
    committer.join().unwrap().unwrap();
    assert_eq!(files_of_q(&disk, "/j"), Vec::<String>::new());
    assert!(JournaledQueue::list_queues("/j", &config)
        .unwrap()
        .is_empty());
}

#[test]
fn a_folder_the_queue_creates_is_synced_into_its_parent() {
    // The queue's folder and the archive are created when missing; a new folder's entry
    // is only durable once the folder holding it is synced (top down), or a power loss
    // could take it away with every file synced into it.
    let disk = SimDisk::new(14);
    let storage = Faulty::new(&disk);
    let synced = Arc::new(Mutex::new(Vec::<std::path::PathBuf>::new()));
    let log = synced.clone();
    storage.refuse(move |op| {
        if let Op::SyncDir(d) = op {
            log.lock().unwrap().push(d.to_path_buf());
        }
        false
    });
    let taken = || std::mem::take(&mut *synced.lock().unwrap());
    let config = JournalConfig {
        sync: SyncPolicy::Always,
        segment_size: 60,
        checkpoint_interval: Duration::ZERO,
        archive_dir: Some("/archive/q".into()),
        storage: Arc::new(storage.clone()),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open("/data/queues", "q", config.clone()).unwrap();
    let s = taken();
    assert_eq!(s[..2], [Path::new("/"), Path::new("/data")], "{s:?}");
    let r = q.reader("r").unwrap();
    for i in 0..3u8 {
        q.put(&[i; 30]).unwrap();
    }
    taken();
    assert_eq!(drain(&r).len(), 3);
    let s = taken();
    let at = |d: &str| s.iter().position(|p| p == Path::new(d));
    assert!(at("/").unwrap() < at("/archive").unwrap(), "{s:?}");
    assert!(at("/archive").unwrap() < at("/archive/q").unwrap(), "{s:?}");
    // Folders that exist are not synced again.
    q.close().unwrap();
    let q = JournaledQueue::open("/data/queues", "q", config).unwrap();
    q.put(b"x").unwrap();
    let s = taken();
    assert!(
        s.iter()
            .all(|d| d == Path::new("/data/queues") || d == Path::new("/archive/q")),
        "{s:?}"
    );
}
