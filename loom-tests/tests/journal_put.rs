//! Models of concurrent puts on the journal (`fairq-journal/src/append.rs`): puts elect a
//! leader on the writer mutex, queue their records behind it and wait on a condition
//! variable until a leader has written (and under `Always` synced) them; under `Never` a
//! follower first spins on the leader's atomic step-down mark and returns without the lock
//! when the leader kept no failed batch. Under `Never` and `Periodic` a put that meets no
//! other put writes under the writer mutex (under mapped writes every put stores there); one that finds the mutex taken marks the queue
//! crowded, and leaders then write outside it. Under loom a queue starts crowded and calms
//! down after one leader that met nobody, so the models cover both ways and the switches
//! between them; with `Coalesce::Off` nobody leads and every put writes under the mutex.
//! The models run the
//! real put path on the simulated disk; loom permutes every access to the writer mutex and
//! its condition variable (the disk's own lock is not part of the protocol). A follower left
//! without a leader, or a lost wake-up, leaves a thread waiting forever, which loom reports
//! as a deadlock; the assertions check that every put is written exactly once, in id order.
#![cfg(loom)]

mod common;

use common::model;
use fairq_journal::sim::{SimDisk, SimFaults};
use fairq_journal::storage::Storage;
use fairq_journal::{Coalesce, ItemId, JournalConfig, JournalError, JournaledQueue, SyncPolicy};
use loom::thread;
use std::path::Path;

fn queue(sync: SyncPolicy) -> JournaledQueue {
    queue_with(sync, false, Coalesce::Auto)
}

/// Under loom `Coalesce::Auto` shares writes whatever the machine, so that the models
/// explore leaders and followers.
fn queue_with(sync: SyncPolicy, mapped_writes: bool, coalesce: Coalesce) -> JournaledQueue {
    let disk = SimDisk::new(1);
    let config = JournalConfig {
        sync,
        mapped_writes,
        coalesce,
        ..JournalConfig::on_sim(&disk)
    };
    JournaledQueue::open("/q", "q", config).unwrap()
}

fn drain(q: &JournaledQueue, reader: &str) -> Vec<(ItemId, Vec<u8>)> {
    let r = q.reader(reader).unwrap();
    let mut out = Vec::new();
    while let Some(item) = r.get().unwrap() {
        r.commit(item.id).unwrap();
        out.push((item.id, item.data.to_vec()));
    }
    out
}

fn three_puts(sync: SyncPolicy, mapped_writes: bool, coalesce: Coalesce) {
    model(move || {
        let q = queue_with(sync, mapped_writes, coalesce);
        q.reader("r").unwrap();
        let others: Vec<_> = [&b"a"[..], b"b"]
            .into_iter()
            .map(|data| {
                let q = q.clone();
                thread::spawn(move || (q.put(data).unwrap(), data.to_vec()))
            })
            .collect();
        let mut put = vec![(q.put(b"c").unwrap(), b"c".to_vec())];
        put.extend(others.into_iter().map(|h| h.join().unwrap()));
        put.sort();
        assert_eq!(put[1].0 .0, put[0].0 .0 + 1, "ids are consecutive");
        assert_eq!(put[2].0 .0, put[0].0 .0 + 2, "ids are consecutive");
        // The put totals are stored (not added atomically) under the writer's lock: no put
        // is lost from a reader's waiting count.
        assert_eq!(q.reader("r").unwrap().len(), 3, "every put counted once");
        assert_eq!(drain(&q, "r"), put, "each put written once, in id order");
    });
}

#[test]
fn concurrent_puts_never_each_written_once() {
    three_puts(SyncPolicy::Never, false, Coalesce::Auto);
}

#[test]
fn concurrent_puts_always_each_written_and_synced_once() {
    three_puts(SyncPolicy::Always, false, Coalesce::Auto);
}

/// Puts that take turns (`Coalesce::Off`) each write under the writer mutex; one that finds
/// it taken waits in it, and none queues behind another.
#[test]
fn concurrent_puts_taking_turns_each_written_once() {
    three_puts(SyncPolicy::Never, false, Coalesce::Off);
}

/// Under mapped writes (the simulated disk maps its files) every put stores its record under
/// the writer mutex, crowded or not, and no leader ever writes outside it.
#[test]
fn concurrent_mapped_puts_each_stored_once() {
    three_puts(SyncPolicy::Never, true, Coalesce::Auto);
}

/// A reader created while a put is in flight starts exactly after the items written before
/// it: it waits for the writer to be idle, so no put is half in and half out.
#[test]
fn a_new_reader_does_not_split_a_put_in_flight() {
    model(|| {
        let q = queue(SyncPolicy::Never);
        q.reader("first").unwrap();
        let putter = {
            let q = q.clone();
            thread::spawn(move || q.put(b"x").unwrap())
        };
        let late = q.reader("late").unwrap();
        let id = putter.join().unwrap();
        let seen = late.len();
        let got = drain(&q, "late");
        assert_eq!(got.len() as u64, seen);
        assert!(got.is_empty() || got == vec![(id, b"x".to_vec())]);
        assert_eq!(drain(&q, "first"), vec![(id, b"x".to_vec())]);
    });
}

/// A full disk fails the batches that do not fit, whoever leads them: a follower that spins
/// must not return success for a batch its leader failed (the leader's `failures_kept` mark
/// sends it to look under the lock). Every put that succeeded is read back, in id order,
/// and no put that failed is.
#[test]
fn spinning_followers_see_their_batch_fail_on_a_full_disk() {
    model(|| {
        let disk = SimDisk::new(1);
        let config = JournalConfig {
            sync: SyncPolicy::Never,
            ..JournalConfig::on_sim(&disk)
        };
        let q = JournaledQueue::open("/q", "q", config).unwrap();
        q.reader("r").unwrap();
        let used: u64 = disk
            .list_dir(Path::new("/q"))
            .unwrap()
            .iter()
            .map(|e| disk.read_all(&Path::new("/q").join(&e.name)).unwrap().len() as u64)
            .sum();
        // Room for one record of one byte (36 + 1): the first write fits, later ones fail.
        disk.set_faults(SimFaults {
            capacity: Some(used + 37),
            ..SimFaults::default()
        });
        let other = {
            let q = q.clone();
            thread::spawn(move || (q.put(b"a"), b"a".to_vec()))
        };
        let mine = (q.put(b"b"), b"b".to_vec());
        let theirs = other.join().unwrap();
        disk.set_faults(SimFaults::default());
        let mut ok = Vec::new();
        for (result, data) in [mine, theirs] {
            match result {
                Ok(id) => ok.push((id, data)),
                Err(JournalError::Io { source, .. }) => {
                    assert_eq!(source.kind(), std::io::ErrorKind::StorageFull)
                }
                Err(e) => panic!("expected a full disk, got {e}"),
            }
        }
        ok.sort();
        assert!(!ok.is_empty(), "the first write fits");
        assert_eq!(drain(&q, "r"), ok, "exactly the acknowledged puts are read");
    });
}

/// A segment file whose writes find the disk full once `room` writes went through.
#[derive(Debug)]
struct FillingFile(
    Box<dyn fairq_journal::storage::WriteFile>,
    std::sync::Arc<std::sync::atomic::AtomicIsize>,
);

impl FillingFile {
    fn take_room(&self) -> std::io::Result<()> {
        if self.1.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) > 0 {
            Ok(())
        } else {
            Err(std::io::ErrorKind::StorageFull.into())
        }
    }
}

impl fairq_journal::sim::ForwardWrite for FillingFile {
    fn inner(&self) -> &dyn fairq_journal::storage::WriteFile {
        self.0.as_ref()
    }
    fn write(&self, buf: &[u8]) -> std::io::Result<usize> {
        self.take_room()?;
        self.0.write(buf)
    }
    fn write_vectored(&self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        self.take_room()?;
        self.0.write_vectored(bufs)
    }
}

/// A reader created while a batch fails on a full disk starts from put totals that no
/// longer count the failed puts: it waits until each of them has taken its count back,
/// which a follower does only when it takes the lock again after its leader stepped down.
/// Its length then always matches what it reads.
#[test]
fn a_new_reader_never_counts_a_put_that_failed() {
    model(|| {
        let disk = SimDisk::new(1);
        // Segment writes only: the new reader's checkpoint and the registry still fit.
        let room = std::sync::Arc::new(std::sync::atomic::AtomicIsize::new(isize::MAX));
        let storage = {
            let room = room.clone();
            fairq_journal::sim::WrapFiles::new(disk.clone()).write_files(move |path, f| {
                if path.extension().is_some_and(|e| e == "seg") {
                    Box::new(FillingFile(f, room.clone()))
                } else {
                    f
                }
            })
        };
        let config = JournalConfig {
            sync: SyncPolicy::Never,
            storage: std::sync::Arc::new(storage),
            ..JournalConfig::on_sim(&disk)
        };
        let q = JournaledQueue::open("/q", "q", config).unwrap();
        q.reader("r").unwrap();
        // The first write fits, later ones find the disk full.
        room.store(1, std::sync::atomic::Ordering::SeqCst);
        let putters: Vec<_> = [b"a", b"b"]
            .into_iter()
            .map(|d| {
                let q = q.clone();
                thread::spawn(move || q.put(d).is_ok())
            })
            .collect();
        let late = q.reader("late").unwrap();
        let ok = putters
            .into_iter()
            .map(|t| t.join().unwrap())
            .filter(|&ok| ok)
            .count() as u64;
        room.store(isize::MAX, std::sync::atomic::Ordering::SeqCst);
        let seen = late.len();
        assert!(seen <= ok, "the late reader counts {seen} of {ok} puts");
        assert_eq!(drain(&q, "late").len() as u64, seen);
    });
}
