//! Behaviour of the queue and its readers on the real file system and the simulated disk.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use fairq_journal::sim::{SimDisk, SimFaults};
use fairq_journal::storage::Storage;
use fairq_journal::{
    FullPolicy, ItemId, JournalConfig, JournalError, JournaledQueue, ManualClock, PutOptions,
    ReaderConfig, SyncPolicy,
};

mod gate;

fn cfg() -> JournalConfig {
    JournalConfig {
        checkpoint_interval: Duration::ZERO,
        ..JournalConfig::default()
    }
}

fn drain(r: &fairq_journal::Reader) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(item) = r.get().unwrap() {
        r.commit(item.id).unwrap();
        out.push(item.data.to_vec());
    }
    out
}

fn segments(dir: &Path, queue: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(&format!("{queue}.")) && n.ends_with(".seg"))
        .collect();
    v.sort();
    v
}

#[test]
fn put_get_commit_in_order_and_persist_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let ids: Vec<ItemId> = (0..10u8).map(|i| q.put(&[i]).unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let r = q.reader("").unwrap();
    assert_eq!(r.len(), 10);
    for i in 0..4u8 {
        let item = r.get().unwrap().unwrap();
        assert_eq!(item.data, vec![i]);
        assert_eq!(item.error_count, 0);
        r.commit(item.id).unwrap();
    }
    q.close().unwrap();
    assert!(matches!(r.get(), Err(JournalError::Closed)));

    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("").unwrap();
    assert_eq!(r.len(), 6);
    let rest = drain(&r);
    assert_eq!(rest, (4..10u8).map(|i| vec![i]).collect::<Vec<_>>());
    let next = q.put(b"new").unwrap();
    assert!(next > ids[9], "ids continue after reopen");
}

#[test]
fn abort_returns_item_first_with_error_count() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("").unwrap();
    q.put(b"a").unwrap();
    q.put(b"b").unwrap();
    let a = r.get().unwrap().unwrap();
    let b = r.get().unwrap().unwrap();
    assert_eq!(r.open_reads(), 2);
    r.abort(b.id).unwrap();
    r.abort(a.id).unwrap();
    assert!(matches!(r.abort(a.id), Err(JournalError::NotOpen(_))));
    let a2 = r.get().unwrap().unwrap();
    assert_eq!((a2.id, a2.error_count, &a2.data[..]), (a.id, 1, &b"a"[..]));
    r.abort(a2.id).unwrap();
    let a3 = r.get().unwrap().unwrap();
    assert_eq!((a3.id, a3.error_count), (a.id, 2));
    let b2 = r.get().unwrap().unwrap();
    assert_eq!((b2.id, b2.error_count), (b.id, 1));
    assert!(r.get().unwrap().is_none());
    assert!(matches!(
        r.commit(ItemId(999)),
        Err(JournalError::NotOpen(_))
    ));
}

#[test]
fn out_of_order_commits_are_remembered_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("w").unwrap();
    for i in 0..5u8 {
        q.put(&[i]).unwrap();
    }
    let items: Vec<_> = (0..5).map(|_| r.get().unwrap().unwrap()).collect();
    // Commit 1 and 3; 0, 2 and 4 stay open when the process "dies" (no close).
    r.commit(items[1].id).unwrap();
    r.commit(items[3].id).unwrap();
    drop((r, q));
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("w").unwrap();
    assert_eq!(drain(&r), vec![vec![0], vec![2], vec![4]]);
}

#[test]
fn fan_out_readers_and_default_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let default = q.reader("").unwrap();
    q.put(b"1").unwrap();
    q.put(b"2").unwrap();
    let first = default.get().unwrap().unwrap();
    default.commit(first.id).unwrap();
    // The first named reader takes over the default reader's position.
    let a = q.reader("a").unwrap();
    assert_eq!(a.len(), 1);
    assert!(matches!(q.reader(""), Err(JournalError::NoDefaultReader)));
    // A later reader starts at the tail.
    let b = q.reader("b").unwrap();
    assert_eq!(b.len(), 0);
    q.put(b"3").unwrap();
    assert_eq!(drain(&a), vec![b"2".to_vec(), b"3".to_vec()]);
    assert_eq!(drain(&b), vec![b"3".to_vec()]);
    assert_eq!(default.len(), 0, "the old default handle now reads as `a`");
    let mut names = q.reader_names();
    names.sort();
    assert_eq!(names, vec!["a".to_string(), "b".to_string()]);
    q.close().unwrap();

    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let mut names = q.reader_names();
    names.sort();
    assert_eq!(names, vec!["a".to_string(), "b".to_string()]);
    assert!(
        !dir.path().join("q.cp").exists(),
        "default checkpoint removed"
    );
    q.put(b"4").unwrap();
    assert_eq!(drain(&q.reader("a").unwrap()), vec![b"4".to_vec()]);
    assert_eq!(drain(&q.reader("b").unwrap()), vec![b"4".to_vec()]);
}

#[test]
fn bad_names_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["", "a.b", "a/b", "with space", "ü"] {
        assert!(matches!(
            JournaledQueue::open(dir.path(), bad, cfg()),
            Err(JournalError::InvalidName { .. })
        ));
    }
    let q = JournaledQueue::open(dir.path(), "ok:name_1-2", cfg()).unwrap();
    assert!(matches!(
        q.reader("r.x"),
        Err(JournalError::InvalidName { .. })
    ));
}

#[test]
fn oversized_items_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(
        dir.path(),
        "q",
        JournalConfig {
            max_item_size: 4,
            ..cfg()
        },
    )
    .unwrap();
    assert!(q.put(b"1234").is_ok());
    assert!(matches!(
        q.put(b"12345"),
        Err(JournalError::ItemTooLarge { size: 5, max: 4 })
    ));
}

#[test]
fn expired_and_aged_items_are_skipped_and_committed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_000_000));
    let config = JournalConfig {
        clock: Arc::new(clock.clone()),
        ..cfg()
    };
    let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
    let r = q.reader("").unwrap();
    let soon = clock.now_plus(Duration::from_secs(10));
    q.put_with(
        b"expires",
        PutOptions {
            expires_at: Some(soon),
        },
    )
    .unwrap();
    q.put(b"stays").unwrap();
    let item = r.get().unwrap().unwrap();
    assert_eq!(item.expires_at, Some(soon));
    r.abort(item.id).unwrap();
    clock.advance(Duration::from_secs(10));
    assert_eq!(&r.get().unwrap().unwrap().data[..], b"stays");

    // max_age on a reader.
    let aged = q
        .reader_with(
            "aged",
            ReaderConfig {
                max_age: Some(Duration::from_secs(5)),
                ..Default::default()
            },
        )
        .unwrap();
    q.put(b"old").unwrap();
    clock.advance(Duration::from_secs(6));
    q.put(b"fresh").unwrap();
    assert_eq!(drain(&aged), vec![b"fresh".to_vec()]);
}

trait PlusExt {
    fn now_plus(&self, d: Duration) -> std::time::SystemTime;
}
impl PlusExt for ManualClock {
    fn now_plus(&self, d: Duration) -> std::time::SystemTime {
        fairq_journal::Clock::now(self) + d
    }
}

#[test]
fn limits_refuse_or_drop_oldest() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let strict = q
        .reader_with(
            "strict",
            ReaderConfig {
                max_items: Some(2),
                ..Default::default()
            },
        )
        .unwrap();
    q.put(b"1").unwrap();
    q.put(b"2").unwrap();
    assert!(matches!(q.put(b"3"), Err(JournalError::Full { reader }) if reader == "strict"));
    let one = strict.get().unwrap().unwrap();
    q.put(b"3").unwrap(); // an open read does not count
    strict.commit(one.id).unwrap();
    assert_eq!(drain(&strict), vec![b"2".to_vec(), b"3".to_vec()]);

    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let lossy = q
        .reader_with(
            "lossy",
            ReaderConfig {
                max_bytes: Some(6),
                full_policy: FullPolicy::DropOldest,
                ..Default::default()
            },
        )
        .unwrap();
    for w in ["aa", "bb", "cc", "dd", "ee"] {
        q.put(w.as_bytes()).unwrap();
    }
    assert_eq!(lossy.bytes(), 6);
    let first = lossy.get().unwrap().unwrap();
    lossy.abort(first.id).unwrap();
    q.put(b"ff").unwrap(); // drops the aborted "cc" first
    assert_eq!(
        drain(&lossy),
        vec![b"dd".to_vec(), b"ee".to_vec(), b"ff".to_vec()]
    );
}

#[test]
fn segments_rotate_and_are_deleted_only_after_every_reader_passed() {
    let dir = tempfile::tempdir().unwrap();
    let config = JournalConfig {
        segment_size: 200,
        ..cfg()
    };
    let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
    let fast = q.reader("fast").unwrap();
    let slow = q.reader("slow").unwrap();
    for i in 0..20u8 {
        q.put(&[i; 50]).unwrap();
    }
    let before = segments(dir.path(), "q");
    assert!(before.len() >= 5, "{before:?}");
    assert_eq!(drain(&fast).len(), 20);
    fast.checkpoint().unwrap();
    assert_eq!(segments(dir.path(), "q"), before, "slow still needs them");
    for _ in 0..10 {
        let it = slow.get().unwrap().unwrap();
        slow.commit(it.id).unwrap();
    }
    slow.checkpoint().unwrap();
    let mid = segments(dir.path(), "q");
    assert!(mid.len() < before.len() && mid.len() > 1, "{mid:?}");
    assert_eq!(drain(&slow).len(), 10);
    q.close().unwrap();
    assert_eq!(
        segments(dir.path(), "q").len(),
        1,
        "only the writer's segment is left"
    );

    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    assert_eq!(q.reader("slow").unwrap().len(), 0);
    assert_eq!(q.reader("fast").unwrap().len(), 0);
}

#[test]
fn a_max_item_size_beyond_what_a_record_can_hold_is_refused() {
    // A record's length is a 32-bit field: a larger item's length would wrap and the item,
    // acknowledged, would read back as damage.
    use fairq_journal::format::MAX_PAYLOAD_LEN;
    for size in [MAX_PAYLOAD_LEN + 1, usize::MAX] {
        let dir = tempfile::tempdir().unwrap();
        let config = JournalConfig {
            max_item_size: size,
            ..cfg()
        };
        match JournaledQueue::open(dir.path(), "q", config) {
            Err(JournalError::InvalidConfig { reason }) => {
                assert!(
                    reason.contains(&format!("max_item_size {size}")),
                    "{reason}"
                )
            }
            other => panic!("max_item_size {size}: expected InvalidConfig, got {other:?}"),
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let config = JournalConfig {
        max_item_size: MAX_PAYLOAD_LEN,
        ..cfg()
    };
    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    q.put(b"fits").unwrap();
}

#[test]
fn a_segment_size_that_holds_no_record_is_refused() {
    // A segment's header takes 28 bytes: a segment_size up to that left every new segment
    // full at once, and the first put rotated for ever, creating empty segments.
    use fairq_journal::format::SEGMENT_HEADER_LEN;
    for size in [0, 1, SEGMENT_HEADER_LEN as u64] {
        let dir = tempfile::tempdir().unwrap();
        let config = JournalConfig {
            segment_size: size,
            ..cfg()
        };
        match JournaledQueue::open(dir.path(), "q", config) {
            Err(JournalError::InvalidConfig { reason }) => {
                assert!(reason.contains(&format!("segment_size {size}")), "{reason}")
            }
            other => panic!("segment_size {size}: expected InvalidConfig, got {other:?}"),
        }
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "files made"
        );
    }
    // One byte more holds a record per segment: slow, but it works.
    let dir = tempfile::tempdir().unwrap();
    let config = JournalConfig {
        segment_size: SEGMENT_HEADER_LEN as u64 + 1,
        ..cfg()
    };
    let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
    for i in 0..3u8 {
        q.put(&[i; 10]).unwrap();
    }
    assert_eq!(
        segments(dir.path(), "q").len(),
        4,
        "one record per segment, then a new one"
    );
    let r = q.reader("").unwrap();
    assert_eq!(drain(&r), vec![vec![0; 10], vec![1; 10], vec![2; 10]]);
}

#[test]
fn archived_segments_move_to_the_archive_dir() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let config = JournalConfig {
        segment_size: 100,
        archive_dir: Some(archive.clone()),
        ..cfg()
    };
    let q = JournaledQueue::open(dir.path().join("live"), "q", config).unwrap();
    let r = q.reader("").unwrap();
    for i in 0..6u8 {
        q.put(&[i; 70]).unwrap();
    }
    assert_eq!(drain(&r).len(), 6);
    r.checkpoint().unwrap();
    let archived = segments(&archive, "q");
    assert_eq!(archived.len(), 6, "{archived:?}");
    assert_eq!(segments(&dir.path().join("live"), "q").len(), 1);
}

#[test]
fn an_archived_segment_is_never_replaced() {
    // Two folders' queues named alike share one archive: their segments have the same
    // names, and neither may overwrite what the other archived.
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let config = JournalConfig {
        segment_size: 100,
        archive_dir: Some(archive.clone()),
        ..cfg()
    };
    for (folder, base) in [("one", 0u8), ("two", 100u8)] {
        let q = JournaledQueue::open(dir.path().join(folder), "q", config.clone()).unwrap();
        let r = q.reader("").unwrap();
        for i in 0..3u8 {
            q.put(&[base + i; 70]).unwrap();
        }
        assert_eq!(drain(&r).len(), 3);
        r.checkpoint().unwrap();
        q.close().unwrap();
    }
    let mut found: Vec<u8> = Vec::new();
    for entry in std::fs::read_dir(&archive).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        for b in [0u8, 1, 2, 100, 101, 102] {
            if bytes.windows(70).any(|w| w.iter().all(|&x| x == b)) {
                found.push(b);
            }
        }
    }
    found.sort_unstable();
    assert_eq!(found, vec![0, 1, 2, 100, 101, 102]);
}

#[test]
fn missing_or_damaged_checkpoint_restarts_from_oldest_item() {
    for damage in ["remove", "garble"] {
        let dir = tempfile::tempdir().unwrap();
        let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
        let r = q.reader("r").unwrap();
        for i in 0..5u8 {
            q.put(&[i]).unwrap();
        }
        for _ in 0..3 {
            let it = r.get().unwrap().unwrap();
            r.commit(it.id).unwrap();
        }
        q.close().unwrap();
        let cp = dir.path().join("q.cp.r");
        if damage == "remove" {
            std::fs::remove_file(&cp).unwrap();
        } else {
            std::fs::write(&cp, b"FAIRQCKP garbage").unwrap();
        }
        let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
        let r = q.reader("r").unwrap();
        assert_eq!(
            r.len(),
            5,
            "{damage}: replays from the oldest item, not the tail"
        );
        assert_eq!(drain(&r)[0], vec![0]);
    }
}

#[test]
fn get_timeout_wakes_on_put_from_another_thread() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("").unwrap();
    assert!(r.get_timeout(Duration::ZERO).unwrap().is_none());
    let q2 = q.clone();
    let t = std::thread::spawn(move || q2.put(b"hi").unwrap());
    let got = r.get_timeout(Duration::from_secs(60)).unwrap();
    t.join().unwrap();
    assert_eq!(&got.unwrap().data[..], b"hi");
}

#[test]
fn readers_and_writers_work_across_threads() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("").unwrap();
    let writers: Vec<_> = (0..4u8)
        .map(|t| {
            let q = q.clone();
            std::thread::spawn(move || {
                for i in 0..50u8 {
                    q.put(&[t, i]).unwrap();
                }
            })
        })
        .collect();
    let consumers: Vec<_> = (0..2)
        .map(|_| {
            let r = r.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                while let Some(item) = r.get_timeout(Duration::from_secs(5)).unwrap() {
                    r.commit(item.id).unwrap();
                    got.push(item.data.to_vec());
                    if got.len() == 200 {
                        break;
                    }
                }
                got
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut all: Vec<Vec<u8>> = consumers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    all.sort();
    let mut expected: Vec<Vec<u8>> = (0..4u8)
        .flat_map(|t| (0..50u8).map(move |i| vec![t, i]))
        .collect();
    expected.sort();
    assert_eq!(all, expected);
}

/// Readers waiting at the writers' heels while segments rotate every few puts, under every
/// sync policy: how far they may read (a segment and an offset, published without a lock
/// within a segment) never pairs one segment with another's offset, so every reader gets
/// every item, in order and intact.
#[test]
fn readers_at_the_writers_heels_read_every_item_across_rotations() {
    for sync in [
        SyncPolicy::Never,
        SyncPolicy::Periodic(Duration::from_millis(1)),
        SyncPolicy::Always,
        SyncPolicy::Group,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = JournalConfig {
            sync,
            // About eight puts a segment.
            segment_size: 1 << 10,
            ..cfg()
        };
        let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
        let (writers, per_writer) = (2u32, 150u32);
        let readers: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|name| {
                let r = q.reader(name).unwrap();
                std::thread::spawn(move || {
                    let mut last = [None::<u32>; 2];
                    let mut got = 0;
                    while got < writers * per_writer {
                        let item = r
                            .get_timeout(Duration::from_secs(60))
                            .unwrap()
                            .expect("an item within the minute");
                        let data = &item.data[..];
                        assert_eq!(data.len(), 100, "{sync:?}");
                        let (w, i) = (
                            data[0] as usize,
                            u32::from_le_bytes(data[1..5].try_into().unwrap()),
                        );
                        assert!(
                            data[5..].iter().all(|&b| b == w as u8 ^ i as u8),
                            "{sync:?}"
                        );
                        assert_eq!(
                            last[w].map_or(0, |l| l + 1),
                            i,
                            "{sync:?}: writer {w} out of order"
                        );
                        last[w] = Some(i);
                        r.commit(item.id).unwrap();
                        got += 1;
                    }
                })
            })
            .collect();
        let puts: Vec<_> = (0..writers)
            .map(|w| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..per_writer {
                        let mut data = vec![w as u8 ^ i as u8; 100];
                        data[0] = w as u8;
                        data[1..5].copy_from_slice(&i.to_le_bytes());
                        q.put(&data).unwrap();
                    }
                })
            })
            .collect();
        for p in puts {
            p.join().unwrap();
        }
        for r in readers {
            r.join().unwrap();
        }
        assert!(q.reader("a").unwrap().get().unwrap().is_none());
    }
}

/// On the real file system, `put_many` of more records than one `writev` takes (two slices
/// each, up to 512 slices a call) and puts larger than the copy limit (written from the
/// caller's slice) all come back, before and after a reopen.
#[test]
fn many_and_large_puts_round_trip_through_the_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<Vec<u8>> = (0..1_500u32)
        .map(|i| {
            let len = if i % 100 == 7 {
                9_000
            } else {
                (i % 300) as usize
            };
            (0..len).map(|j| (i as usize + j) as u8).collect()
        })
        .collect();
    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    let bigs: Vec<&Vec<u8>> = items.iter().filter(|d| d.len() > 4_096).take(3).collect();
    {
        let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
        q.reader("r").unwrap();
        let ids = q.put_many(&refs).unwrap();
        assert_eq!(ids.len(), items.len());
        for big in &bigs {
            q.put(big).unwrap();
        }
        q.close().unwrap();
    }
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let got = drain(&q.reader("r").unwrap());
    assert_eq!(bigs.len(), 3);
    assert_eq!(got.len(), items.len() + 3);
    assert_eq!(&got[..items.len()], &items[..]);
    assert_eq!(got[items.len()..].iter().collect::<Vec<_>>(), bigs);
}

#[test]
fn failed_sync_poisons_until_reopen() {
    let disk = SimDisk::new(9);
    let config = JournalConfig {
        sync: SyncPolicy::Group,
        ..JournalConfig::on_sim(&disk)
    };
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    let ok = q.put(b"durable").unwrap();
    disk.set_faults(SimFaults {
        sync_error_per_mille: 1000,
        ..SimFaults::default()
    });
    assert!(matches!(q.put(b"lost"), Err(JournalError::Poisoned { .. })));
    disk.set_faults(SimFaults::default());
    assert!(matches!(
        q.put(b"after"),
        Err(JournalError::Poisoned { .. })
    ));
    drop(q);
    disk.crash();
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    let r = q.reader("").unwrap();
    let first = r.get().unwrap().unwrap();
    assert_eq!((first.id, &first.data[..]), (ok, &b"durable"[..]));
    assert!(q.put(b"works again").is_ok());
}

#[test]
fn enospc_fails_the_put_without_poisoning() {
    let disk = SimDisk::new(2);
    let config = JournalConfig::on_sim(&disk);
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    q.put(b"a").unwrap();
    let used: usize = disk
        .read_all(Path::new("/j/q.00000000000000000001.seg"))
        .unwrap()
        .len();
    disk.set_faults(SimFaults {
        capacity: Some(used as u64 + 10),
        ..SimFaults::default()
    });
    match q.put(&[7u8; 100]) {
        Err(JournalError::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::StorageFull)
        }
        other => panic!("expected ENOSPC, got {other:?}"),
    }
    disk.set_faults(SimFaults::default());
    q.put(b"b").unwrap();
    let r = q.reader("").unwrap();
    assert_eq!(drain(&r), vec![b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn a_full_disk_at_rotation_does_not_poison_the_queue() {
    // The put that fills a segment is written; the next segment's creation then finds the
    // disk full. The writer stays on the (oversized) segment and tries again later: the
    // queue works again once there is room, and nothing acknowledged is lost.
    for (sync, mapped_writes) in [
        (SyncPolicy::Never, false),
        (SyncPolicy::Never, true),
        (SyncPolicy::Group, false),
        (SyncPolicy::Always, false),
    ] {
        let disk = SimDisk::new(5);
        let config = JournalConfig {
            sync,
            mapped_writes,
            segment_size: 100,
            ..JournalConfig::on_sim(&disk)
        };
        let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
        q.put(b"a").unwrap();
        let used: u64 = disk
            .list_dir(Path::new("/j"))
            .unwrap()
            .iter()
            .map(|e| disk.read_all(&Path::new("/j").join(&e.name)).unwrap().len() as u64)
            .sum();
        // Room for the next record (36 + 60 bytes, which fills the segment) and not for
        // the next segment's header.
        disk.set_faults(SimFaults {
            capacity: Some(used + 96 + 10),
            ..SimFaults::default()
        });
        q.put(&[1u8; 60]).unwrap();
        let mut expected = vec![b"a".to_vec(), vec![1u8; 60]];
        // Mapped segments are created (and sized) ahead, so the disk may fill elsewhere.
        match q.put(b"no room") {
            Ok(_) if mapped_writes => expected.push(b"no room".to_vec()),
            Err(JournalError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::StorageFull => {}
            other => panic!("{sync:?}, mapped {mapped_writes}: {other:?}"),
        }
        disk.set_faults(SimFaults::default());
        q.put(b"b").unwrap();
        q.put(b"c").unwrap();
        expected.extend([b"b".to_vec(), b"c".to_vec()]);
        q.close().unwrap();
        disk.crash();
        let q = JournaledQueue::open("/j", "q", config).unwrap();
        assert_eq!(
            drain(&q.reader("").unwrap()),
            expected,
            "{sync:?}, mapped {mapped_writes}"
        );
    }
}

#[test]
fn group_commit_first_waiting_writer_syncs_for_everyone_waiting() {
    let gate = Arc::new(gate::Gate::default());
    let storage = gate::gated_disk(&SimDisk::new(3), &gate);
    let config = JournalConfig {
        sync: SyncPolicy::Group,
        storage: Arc::new(storage),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    let r = q.reader("").unwrap();
    let before = gate.syncs();
    gate.close_syncs();
    // The first put becomes the syncer and is held inside its fdatasync.
    let first = {
        let q = q.clone();
        std::thread::spawn(move || q.put(b"first").unwrap())
    };
    gate.await_syncs_held(1);
    // Three more puts arrive while that sync is in flight. The first of them leads the
    // writer and is held inside its write, so the other two queue behind it: once all three
    // have their ids, one batch is bound to hold them, and none of the three waits for a
    // sync before that batch is written whole. Without the write gate the third put could
    // start a batch of its own after the first sync, and need a sync of its own.
    gate.close_writes();
    let others: Vec<_> = (0..3)
        .map(|i| {
            let q = q.clone();
            std::thread::spawn(move || q.put(&[i]).unwrap())
        })
        .collect();
    gate.await_writes_held(1);
    // `len` counts a put once it has its id, which a follower gets as it queues its record.
    let give_up = std::time::Instant::now() + Duration::from_secs(30);
    while r.len() < 4 {
        assert!(
            std::time::Instant::now() < give_up,
            "the other puts never queued"
        );
        std::thread::yield_now();
    }
    gate.open_writes();
    gate.open_syncs();
    first.join().unwrap();
    for t in others {
        t.join().unwrap();
    }
    // One sync for the first put, one shared by the three that waited behind it.
    assert_eq!(r.len(), 4);
    assert_eq!(gate.syncs() - before, 2);
}

#[test]
fn periodic_and_never_policies_deliver_and_survive_clean_close() {
    for sync in [
        SyncPolicy::Never,
        SyncPolicy::Periodic(Duration::from_millis(5)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = JournalConfig { sync, ..cfg() };
        let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
        for i in 0..10u8 {
            q.put(&[i]).unwrap();
        }
        q.close().unwrap();
        let q = JournaledQueue::open(dir.path(), "q", config).unwrap();
        assert_eq!(q.reader("").unwrap().len(), 10, "{sync:?}");
    }
}

#[test]
fn items_larger_than_the_read_buffer_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("").unwrap();
    let sizes = [64 * 1024, 200_000, 1, 65_500, 3 << 20];
    let items: Vec<Vec<u8>> = sizes
        .iter()
        .map(|&n| (0..n).map(|i| (i % 251) as u8).collect())
        .collect();
    for it in &items {
        q.put(it).unwrap();
    }
    let first = r.get().unwrap().unwrap();
    r.abort(first.id).unwrap();
    assert_eq!(drain(&r), items);
    q.close().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    q.put(&items[1]).unwrap();
    assert_eq!(drain(&q.reader("").unwrap()), vec![items[1].clone()]);
}

/// A queue under `Never` on a simulated disk seeded with `seed`, holding 30 items of 40
/// bytes (`[i; 40]`) in segments of 120 bytes, most of them sealed without a sync.
fn sealed_without_sync(seed: u64) -> (SimDisk, JournalConfig, JournaledQueue) {
    let disk = SimDisk::new(seed);
    let config = JournalConfig {
        sync: SyncPolicy::Never,
        segment_size: 120,
        ..JournalConfig::on_sim(&disk)
    };
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    for i in 0..30u8 {
        q.put(&[i; 40]).unwrap();
    }
    (disk, config, q)
}

#[test]
fn never_policy_recovers_when_power_loss_tears_segments_sealed_without_sync() {
    let mut torn_seen = false;
    for seed in 0..40 {
        let (disk, config, q) = sealed_without_sync(seed);
        drop(q);
        disk.crash();
        // Open succeeds: the torn ends of unsynced sealed segments are cut off, not reported.
        let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
        let got = drain(&q.reader("").unwrap());
        assert!(got
            .iter()
            .all(|d| d.len() == 40 && d.iter().all(|&b| b == d[0])));
        let firsts: Vec<u8> = got.iter().map(|d| d[0]).collect();
        assert!(firsts.windows(2).all(|w| w[0] < w[1]), "{firsts:?}");
        torn_seen |= got.len() < 30;
        q.close().unwrap();
    }
    assert!(torn_seen, "the simulated power losses never lost anything");
}

#[test]
fn a_sync_after_reopening_covers_segments_an_earlier_run_sealed_without_sync() {
    // Under `Never` a rotation seals a segment without syncing it; the process then dies
    // (no close), leaving those puts in the page cache. `sync()` after reopening promises
    // every put so far is durable, including those.
    for seed in 0..20 {
        let (disk, config, q) = sealed_without_sync(seed);
        drop(q);
        let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
        q.sync().unwrap();
        drop(q);
        disk.crash();
        let q = JournaledQueue::open("/j", "q", config).unwrap();
        let got = drain(&q.reader("").unwrap());
        let firsts: Vec<u8> = got.iter().map(|d| d[0]).collect();
        assert_eq!(firsts, (0..30u8).collect::<Vec<_>>(), "seed {seed}");
        q.close().unwrap();
    }
}

#[test]
fn a_sync_after_reopening_covers_the_segment_before_a_next_one_left_empty_by_a_kill() {
    // As above, but the process dies while it creates the next segment: that file is left
    // empty or with a torn header, and the header that said its predecessor was sealed without a sync is gone with
    // it. Opening removes the empty file; the segment before it must still be made durable.
    for seed in 0..20 {
        let (disk, config, q) = sealed_without_sync(seed);
        drop(q);
        let mut segs: Vec<String> = disk
            .list_dir(Path::new("/j"))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .filter(|n| n.ends_with(".seg"))
            .collect();
        segs.sort();
        let newest = Path::new("/j").join(segs.last().unwrap());
        let before = disk.read_all(&newest).unwrap();
        assert_eq!(
            before.len(),
            28,
            "seed {seed}: the newest segment holds no record"
        );
        // Even seeds: the file was created and nothing written; odd ones: its header torn.
        let left = if seed % 2 == 0 { 0 } else { 11 };
        disk.open_append(&newest).unwrap().set_len(left).unwrap();
        let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
        assert_eq!(q.recovery_report().removed_segments, vec![newest.clone()]);
        q.sync().unwrap();
        drop(q);
        disk.crash();
        let q = JournaledQueue::open("/j", "q", config).unwrap();
        let got = drain(&q.reader("").unwrap());
        let firsts: Vec<u8> = got.iter().map(|d| d[0]).collect();
        assert_eq!(firsts, (0..30u8).collect::<Vec<_>>(), "seed {seed}");
        q.close().unwrap();
    }
}

#[test]
fn a_torn_sealed_segment_without_the_unsynced_flag_is_corruption() {
    let disk = SimDisk::new(4);
    let config = JournalConfig {
        sync: SyncPolicy::Group,
        segment_size: 120,
        ..JournalConfig::on_sim(&disk)
    };
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    for i in 0..6u8 {
        q.put(&[i; 40]).unwrap();
    }
    drop(q);
    let seg = Path::new("/j/q.00000000000000000001.seg");
    let bytes = disk.read_all(seg).unwrap();
    let f = disk.open_append(seg).unwrap();
    f.set_len(bytes.len() as u64 - 3).unwrap();
    assert!(matches!(
        JournaledQueue::open("/j", "q", config),
        Err(JournalError::Corrupt { path, .. }) if path == seg
    ));
}

#[test]
fn a_queue_cannot_be_opened_twice_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    assert!(matches!(
        JournaledQueue::open(dir.path(), "q", cfg()),
        Err(JournalError::Locked { .. })
    ));
    // Another queue in the same directory is independent.
    let other = JournaledQueue::open(dir.path(), "other", cfg()).unwrap();
    q.close().unwrap();
    let again = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    drop(again);
    drop(JournaledQueue::open(dir.path(), "q", cfg()).unwrap());
    drop(other);

    let disk = SimDisk::new(1);
    let q = JournaledQueue::open("/j", "q", JournalConfig::on_sim(&disk)).unwrap();
    assert!(matches!(
        JournaledQueue::open("/j", "q", JournalConfig::on_sim(&disk)),
        Err(JournalError::Locked { .. })
    ));
    drop(q);
    assert!(JournaledQueue::open("/j", "q", JournalConfig::on_sim(&disk)).is_ok());
}

#[test]
fn rotate_seals_a_non_empty_segment_only() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    q.rotate().unwrap();
    assert_eq!(segments(dir.path(), "q").len(), 1, "nothing to seal");
    q.put(b"a").unwrap();
    q.rotate().unwrap();
    q.rotate().unwrap();
    assert_eq!(segments(dir.path(), "q").len(), 2);
    q.put(b"b").unwrap();
    let r = q.reader("").unwrap();
    assert_eq!(drain(&r), vec![b"a".to_vec(), b"b".to_vec()]);
    r.checkpoint().unwrap();
    assert_eq!(
        segments(dir.path(), "q").len(),
        1,
        "the sealed segment was retired"
    );
}

#[test]
fn close_makes_segments_sealed_without_sync_durable() {
    for seed in 0..20 {
        let (disk, config, q) = sealed_without_sync(seed);
        q.close().unwrap();
        disk.crash();
        let q = JournaledQueue::open("/j", "q", config).unwrap();
        assert_eq!(drain(&q.reader("").unwrap()).len(), 30, "seed {seed}");
    }
}

#[test]
fn error_counts_survive_a_reopen_and_a_crash_after_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("w").unwrap();
    let a = q.put(b"a").unwrap();
    let b = q.put(b"b").unwrap();
    for _ in 0..3 {
        let item = r.get().unwrap().unwrap();
        assert_eq!(item.id, a);
        r.abort(a).unwrap();
    }
    let item_b = {
        let a_again = r.get().unwrap().unwrap();
        assert_eq!(a_again.error_count, 3);
        let item_b = r.get().unwrap().unwrap();
        r.abort(a_again.id).unwrap();
        item_b
    };
    r.abort(item_b.id).unwrap();
    q.close().unwrap();

    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("w").unwrap();
    let a2 = r.get().unwrap().unwrap();
    let b2 = r.get().unwrap().unwrap();
    assert_eq!((a2.id, a2.error_count), (a, 4));
    assert_eq!((b2.id, b2.error_count), (b, 1));
    r.abort(b2.id).unwrap(); // checkpointed at once (interval zero)
    drop((r, q)); // a crash: the checkpoint on disk carries the counts

    let q = JournaledQueue::open(dir.path(), "q", cfg()).unwrap();
    let r = q.reader("w").unwrap();
    assert_eq!(r.get().unwrap().unwrap().error_count, 4);
    assert_eq!(r.get().unwrap().unwrap().error_count, 2);
}

#[test]
fn the_next_segment_is_created_ahead_under_never_and_periodic_only() {
    let item = [7u8; 1000];
    for sync in [
        SyncPolicy::Never,
        SyncPolicy::Periodic(Duration::from_secs(3600)),
        SyncPolicy::Group,
        SyncPolicy::Always,
    ] {
        let ahead = !matches!(sync, SyncPolicy::Group | SyncPolicy::Always);
        let dir = tempfile::tempdir().unwrap();
        let config = JournalConfig {
            sync,
            segment_size: 4096,
            ..cfg()
        };
        let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
        // Past half of the first segment: the second is created ahead (close waits for it).
        for _ in 0..3 {
            q.put(&item).unwrap();
        }
        q.close().unwrap();
        let created = if ahead { 2 } else { 1 };
        assert_eq!(segments(dir.path(), "q").len(), created, "{sync:?}");

        // Reopened, the empty segment made ahead becomes the writer's; filling it rotates
        // into the one made ahead of it; a drop without close (a crash of the process)
        // loses nothing and the next open still checks out.
        let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
        assert!(q.recovery_report().is_clean(), "{sync:?}");
        for _ in 0..9 {
            q.put(&item).unwrap();
        }
        drop(q);
        let q = JournaledQueue::open(dir.path(), "q", config.clone()).unwrap();
        assert!(q.recovery_report().is_clean(), "{sync:?}");
        let r = q.reader("").unwrap();
        assert_eq!(drain(&r).len(), 12, "{sync:?}");
        let names = segments(dir.path(), "q");
        let ids: Vec<u64> = names.iter().map(|n| n[2..22].parse().unwrap()).collect();
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{names:?}");
        // Deleting removes every segment, the one made ahead included.
        q.delete().unwrap();
        assert!(segments(dir.path(), "q").is_empty(), "{sync:?}");
    }
}

/// Holds the syncs of one file while its door is closed (`state.0`), counting them
/// (`state.1`), and notes when a second `sync()` call returned (`state.2`).
#[derive(Debug, Default)]
struct OneFileDoor {
    state: std::sync::Mutex<(bool, usize, bool)>,
    cv: std::sync::Condvar,
}

#[derive(Debug)]
struct DoorFile(Box<dyn fairq_journal::storage::WriteFile>, Arc<OneFileDoor>);

impl fairq_journal::sim::ForwardWrite for DoorFile {
    fn inner(&self) -> &dyn fairq_journal::storage::WriteFile {
        self.0.as_ref()
    }
    fn sync_data(&self) -> std::io::Result<()> {
        let mut g = self.1.state.lock().unwrap();
        g.1 += 1;
        self.1.cv.notify_all();
        let mut g = self.1.cv.wait_while(g, |s| s.0).unwrap();
        g.1 -= 1;
        drop(g);
        self.0.sync_data()
    }
}

#[test]
fn sync_waits_for_a_sealed_segment_another_sync_is_still_syncing() {
    // Two callers of `sync()` at once (as `sync()` beside the periodic flusher): the second
    // must not return while the first is still making a sealed segment durable.
    let disk = SimDisk::new(8);
    let door = Arc::new(OneFileDoor::default());
    let sealed = Path::new("/j/q.00000000000000000001.seg");
    let storage = {
        let door = door.clone();
        fairq_journal::sim::WrapFiles::new(disk.clone()).write_files(move |path, f| {
            if path == sealed {
                Box::new(DoorFile(f, door.clone()))
            } else {
                f
            }
        })
    };
    let config = JournalConfig {
        sync: SyncPolicy::Never,
        segment_size: 120,
        storage: Arc::new(storage),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    for i in 0..3u8 {
        q.put(&[i; 40]).unwrap();
    }
    door.state.lock().unwrap().0 = true;
    let first = {
        let q = q.clone();
        std::thread::spawn(move || q.sync().unwrap())
    };
    let wait_for = |pred: &dyn Fn(&(bool, usize, bool)) -> bool| {
        let g = door.state.lock().unwrap();
        let (g, t) = door
            .cv
            .wait_timeout_while(g, Duration::from_secs(30), |s| !pred(s))
            .unwrap();
        assert!(!t.timed_out(), "stuck: {:?}", *g);
    };
    wait_for(&|s| s.1 == 1);
    let second = {
        let (q, door) = (q.clone(), door.clone());
        std::thread::spawn(move || {
            q.sync().unwrap();
            door.state.lock().unwrap().2 = true;
            door.cv.notify_all();
        })
    };
    // Either the second call returns (too early) or it too waits on the sealed segment.
    wait_for(&|s| s.2 || s.1 == 2);
    let returned_early = door.state.lock().unwrap().2;
    door.state.lock().unwrap().0 = false;
    door.cv.notify_all();
    first.join().unwrap();
    second.join().unwrap();
    assert!(
        !returned_early,
        "sync() returned while the sealed segment was still being synced"
    );
}

/// Fails every write into a checkpoint's temporary file while its flag is set.
#[derive(Debug)]
struct RefusedCheckpoint(
    Box<dyn fairq_journal::storage::WriteFile>,
    Arc<std::sync::atomic::AtomicBool>,
);

impl RefusedCheckpoint {
    fn refused(&self) -> std::io::Result<()> {
        if self.1.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(std::io::Error::other("checkpoint writes refused"));
        }
        Ok(())
    }
}

impl fairq_journal::sim::ForwardWrite for RefusedCheckpoint {
    fn inner(&self) -> &dyn fairq_journal::storage::WriteFile {
        self.0.as_ref()
    }
    fn write(&self, buf: &[u8]) -> std::io::Result<usize> {
        self.refused()?;
        self.0.write(buf)
    }
    fn write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        self.refused()?;
        self.0.write_vectored(bufs)
    }
}

/// A storage on `disk` whose checkpoint writes fail while the returned flag is set.
fn refusing_checkpoints(
    disk: &SimDisk,
) -> (
    fairq_journal::sim::WrapFiles,
    Arc<std::sync::atomic::AtomicBool>,
) {
    let refuse = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = refuse.clone();
    let storage = fairq_journal::sim::WrapFiles::new(disk.clone()).write_files(move |path, f| {
        let name = path.file_name().unwrap().to_string_lossy();
        if name.contains(".cp") && name.ends_with(".tmp") {
            Box::new(RefusedCheckpoint(f, flag.clone()))
        } else {
            f
        }
    });
    (storage, refuse)
}

#[test]
fn a_due_checkpoint_that_fails_does_not_fail_the_call_that_found_it_due() {
    // Each call below finds a checkpoint due (the interval is zero) and the checkpoint
    // fails. The call has taken its item or made its change by then: it must say so, not
    // return the checkpoint's error (an item taken would be stranded as an open read until
    // the queue is reopened, and the next get would hand out the one after it).
    let disk = SimDisk::new(9);
    let (storage, refuse) = refusing_checkpoints(&disk);
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(100));
    let config = JournalConfig {
        checkpoint_interval: Duration::ZERO,
        clock: Arc::new(clock.clone()),
        storage: Arc::new(storage),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    let r = q.reader("").unwrap();
    let soon = PutOptions {
        expires_at: Some(UNIX_EPOCH + Duration::from_secs(101)),
    };
    q.put(b"a").unwrap();
    q.put(b"b").unwrap();
    q.put_with(b"stale 1", soon).unwrap();
    q.put_with(b"stale 2", soon).unwrap();
    q.put(b"c").unwrap();
    refuse.store(true, std::sync::atomic::Ordering::SeqCst);

    let a = r.get().unwrap().unwrap();
    assert_eq!(&a.data[..], b"a");
    r.commit(a.id).unwrap();
    assert_eq!(r.open_reads(), 0, "the commit took effect");
    let b = r.get().unwrap().unwrap();
    assert_eq!(&b.data[..], b"b");
    assert_eq!(r.open_reads(), 1);
    r.commit(b.id).unwrap();
    clock.advance(Duration::from_secs(1));
    assert_eq!(r.discard_expired(10).unwrap(), 2);
    assert_eq!(&r.peek().unwrap().unwrap().data[..], b"c");
    let c = r.get_timeout(Duration::from_secs(1)).unwrap().unwrap();
    assert_eq!(&c.data[..], b"c");
    r.abort(c.id).unwrap();
    let again = r.get().unwrap().unwrap();
    assert_eq!((again.id, again.error_count), (c.id, 1));
    // Asked for, a checkpoint reports its failure.
    assert!(r.checkpoint().is_err());

    refuse.store(false, std::sync::atomic::Ordering::SeqCst);
    r.commit(again.id).unwrap();
    drop((r, q));
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    assert!(
        q.reader("").unwrap().get().unwrap().is_none(),
        "every commit reached the checkpoint once it could be written"
    );
}
