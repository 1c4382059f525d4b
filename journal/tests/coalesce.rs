//! Concurrent puts share one write: while one put (the leader) is in its write system call,
//! the puts that arrive queue their records and the leader writes them all at once. A gate
//! in the storage holds the leader inside its write, so the tests decide exactly who queues.
//!
//! Under `Never` and `Periodic` a put that meets no other put writes under the writer's
//! lock; puts start queueing once they have met (one found the lock taken). The tests under
//! these policies first make puts meet (`crowd`), and two tests check the switch itself.
//! They ask for shared writes (`Coalesce::On`), which `Coalesce::Auto` leaves off on a
//! machine with one or two processors; two tests check `Coalesce::Off`.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fairq_journal::sim::{SimDisk, SimFaults};
use fairq_journal::storage::Storage;
use fairq_journal::{Coalesce, ItemId, JournalConfig, JournalError, JournaledQueue, SyncPolicy};

mod gate;

use gate::{gated_disk, Gate};

struct Setup {
    disk: SimDisk,
    gate: Arc<Gate>,
    q: JournaledQueue,
}

/// A queue whose puts share writes whatever the machine (`Coalesce::On`), crowded already
/// under `Never` and `Periodic`.
fn setup(sync: SyncPolicy) -> Setup {
    let s = setup_with(sync, Coalesce::On);
    if !sync.is_durable_on_put() {
        crowd(&s);
    }
    s
}

fn setup_with(sync: SyncPolicy, coalesce: Coalesce) -> Setup {
    let disk = SimDisk::new(7);
    let gate = Arc::new(Gate::default());
    let config = JournalConfig {
        sync,
        coalesce,
        storage: Arc::new(gated_disk(&disk, &gate)),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open("/q", "q", config).unwrap();
    q.reader("r").unwrap();
    Setup { disk, gate, q }
}

/// Makes puts meet until the second of two puts queues behind the first, held in its
/// write; returns the rounds it took. The items put on the way are committed.
fn crowd(s: &Setup) -> usize {
    for round in 1..=5 {
        let queued = meet(s);
        drain(&s.q);
        if queued {
            return round;
        }
    }
    panic!("puts never queued behind a leader");
}

/// One put held in its write and a second put: whether the second one queued its record
/// (it has its id, so the reader counts it) within a second, instead of waiting for the
/// writer's lock until the first one is done.
fn meet(s: &Setup) -> bool {
    let r = s.q.reader("r").unwrap();
    let before = r.len();
    s.gate.close_writes();
    std::thread::scope(|scope| {
        scope.spawn(|| s.q.put(b"first").unwrap());
        s.gate.await_writes_held(1);
        scope.spawn(|| s.q.put(b"second").unwrap());
        let deadline = Instant::now() + Duration::from_secs(1);
        let queued = loop {
            if r.len() == before + 2 {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            std::thread::yield_now();
        };
        s.gate.open_writes();
        queued
    })
}

/// Waits (yielding, with a deadline) until `f` holds.
fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// A leader held in its write, then `followers` more puts that queue behind it; returns the
/// leader's and the followers' results once the gate opens.
#[allow(clippy::type_complexity)]
fn leader_and_followers(
    s: &Setup,
    followers: u8,
    before_open: impl FnOnce(),
) -> (
    Result<ItemId, JournalError>,
    Vec<Result<ItemId, JournalError>>,
) {
    let r = s.q.reader("r").unwrap();
    s.gate.close_writes();
    std::thread::scope(|scope| {
        let leader = scope.spawn(|| s.q.put(b"leader"));
        s.gate.await_writes_held(1);
        let rest: Vec<_> = (0..followers)
            .map(|i| {
                let q = s.q.clone();
                scope.spawn(move || q.put(&[b'f', i]))
            })
            .collect();
        // Every follower has queued its record (and is counted) before the gate opens.
        until("the followers to queue", || {
            r.len() == 1 + u64::from(followers)
        });
        before_open();
        s.gate.open_writes();
        let leader = leader.join().unwrap();
        let rest = rest.into_iter().map(|h| h.join().unwrap()).collect();
        (leader, rest)
    })
}

fn drain(q: &JournaledQueue) -> Vec<(ItemId, Vec<u8>)> {
    let r = q.reader("r").unwrap();
    let mut out = Vec::new();
    while let Some(item) = r.get().unwrap() {
        r.commit(item.id).unwrap();
        out.push((item.id, item.data.to_vec()));
    }
    out
}

#[test]
fn puts_that_arrive_during_a_write_share_the_next_one() {
    let s = setup(SyncPolicy::Never);
    let before = s.gate.writes();
    let (leader, followers) = leader_and_followers(&s, 5, || {});
    let leader = leader.unwrap();
    let mut ids: Vec<ItemId> = followers.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        s.gate.writes() - before,
        2,
        "the leader's write and one batch"
    );
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 5);
    assert_eq!(ids[0].0, leader.0 + 1, "ids follow the order puts entered");
    assert_eq!(ids[4].0, leader.0 + 5);
    let got = drain(&s.q);
    assert_eq!(got.len(), 6);
    assert_eq!(got[0], (leader, b"leader".to_vec()));
    for (id, data) in &got[1..] {
        assert_eq!(data[0], b'f');
        assert!(ids.contains(id));
    }
}

#[test]
fn under_always_one_sync_covers_the_leader_and_its_followers() {
    // `Coalesce` covers `Never` and `Periodic` only: under `Always` puts share writes and
    // syncs even when told to take turns.
    for coalesce in [Coalesce::On, Coalesce::Off] {
        let s = setup_with(SyncPolicy::Always, coalesce);
        let syncs = s.disk.sync_count();
        let (leader, followers) = leader_and_followers(&s, 3, || {});
        leader.unwrap();
        for f in followers {
            f.unwrap();
        }
        assert_eq!(s.disk.sync_count() - syncs, 1, "{coalesce:?}");
        assert_eq!(drain(&s.q).len(), 4, "{coalesce:?}");
    }
}

#[test]
fn a_batch_that_finds_the_disk_full_fails_its_puts_and_nothing_else() {
    let s = setup(SyncPolicy::Never);
    let used: u64 = s
        .disk
        .list_dir(Path::new("/q"))
        .unwrap()
        .iter()
        .map(|e| {
            s.disk
                .read_all(&Path::new("/q").join(&e.name))
                .unwrap()
                .len() as u64
        })
        .sum();
    let (leader, followers) = leader_and_followers(&s, 3, || {
        // Room for the leader's record (36 + 6 bytes) only.
        s.disk.set_faults(SimFaults {
            capacity: Some(used + 42),
            ..SimFaults::default()
        });
    });
    let leader = leader.unwrap();
    for f in followers {
        match f {
            Err(JournalError::Io { source, .. }) => {
                assert_eq!(source.kind(), io::ErrorKind::StorageFull)
            }
            other => panic!("expected a full disk, got {other:?}"),
        }
    }
    s.disk.set_faults(SimFaults::default());
    // Not poisoned: the next put works, and its id skips the failed ones.
    let next = s.q.put(b"after").unwrap();
    assert_eq!(next.0, leader.0 + 4);
    let got: Vec<Vec<u8>> = drain(&s.q).into_iter().map(|(_, d)| d).collect();
    assert_eq!(got, vec![b"leader".to_vec(), b"after".to_vec()]);
    assert_eq!(s.q.reader("r").unwrap().len(), 0);
}

#[test]
fn a_batch_whose_write_fails_poisons_the_queue_and_fails_its_puts() {
    let s = setup(SyncPolicy::Never);
    let (leader, followers) = leader_and_followers(&s, 2, || {
        s.disk.set_faults(SimFaults {
            write_error_per_mille: 1000,
            ..SimFaults::default()
        });
    });
    // The leader's own write failed too (the fault was set before the gate opened).
    assert!(leader.is_err());
    for f in followers {
        assert!(matches!(f, Err(JournalError::Poisoned { .. })), "{f:?}");
    }
    s.disk.set_faults(SimFaults::default());
    assert!(matches!(s.q.put(b"x"), Err(JournalError::Poisoned { .. })));
}

#[test]
fn a_lone_put_writes_under_the_lock_until_puts_meet() {
    let s = setup_with(SyncPolicy::Never, Coalesce::On);
    // On a fresh queue the first put holds the writer's lock through its write: the second
    // put cannot queue, it waits for the lock (and so marks the queue crowded).
    assert!(!meet(&s), "the second put queued behind a lone put");
    drain(&s.q);
    // Now puts have met: the next leader writes outside the lock and the second put queues
    // (at once, unless the second put above was so late that it found the lock free).
    assert!(crowd(&s) <= 2, "puts that met still do not queue");
}

#[test]
fn a_crowded_queue_goes_back_to_writing_under_the_lock_after_many_lone_puts() {
    // Set up crowded: the puts met.
    let s = setup(SyncPolicy::Never);
    // Enough leaders in a row that met nobody (1,024) clear the mark.
    for _ in 0..1100 {
        s.q.put(b"alone").unwrap();
    }
    drain(&s.q);
    assert!(!meet(&s), "a lone put still writes outside the lock");
    drain(&s.q);
}

#[test]
fn puts_that_take_turns_never_queue_behind_a_write() {
    for sync in [
        SyncPolicy::Never,
        SyncPolicy::Periodic(Duration::from_secs(3600)),
    ] {
        let s = setup_with(sync, Coalesce::Off);
        // Puts meet twice (each time the second one finds the lock taken), and the second
        // one still waits for the lock rather than queueing behind the first one's write.
        for _ in 0..2 {
            let before = s.gate.writes();
            assert!(!meet(&s), "{sync:?}: a put queued behind another's write");
            assert_eq!(s.gate.writes() - before, 2, "{sync:?}: one write per put");
            let got: Vec<Vec<u8>> = drain(&s.q).into_iter().map(|(_, d)| d).collect();
            assert_eq!(got, vec![b"first".to_vec(), b"second".to_vec()], "{sync:?}");
        }
    }
}

#[test]
fn put_many_writes_its_items_in_one_call_with_consecutive_ids() {
    let s = setup(SyncPolicy::Group);
    let before = s.gate.writes();
    let items: Vec<Vec<u8>> = (0..600u32).map(|i| i.to_le_bytes().to_vec()).collect();
    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    let ids = s.q.put_many(&refs).unwrap();
    assert!(
        s.gate.writes() - before <= 3,
        "600 records in a few writev calls"
    );
    assert!(ids.windows(2).all(|w| w[1].0 == w[0].0 + 1));
    let got = drain(&s.q);
    assert_eq!(got.len(), 600);
    for ((id, data), (want_id, want)) in got.iter().zip(ids.iter().zip(&items)) {
        assert_eq!((id, data), (want_id, want));
    }
    assert!(s.q.put_many(&[]).unwrap().is_empty());
}

#[test]
fn concurrent_puts_under_faults_and_a_power_loss_lose_no_acknowledged_item() {
    for seed in 0..12u64 {
        let disk = SimDisk::new(seed);
        let config = JournalConfig {
            sync: if seed % 2 == 0 {
                SyncPolicy::Group
            } else {
                SyncPolicy::Always
            },
            segment_size: 2000,
            ..JournalConfig::on_sim(&disk)
        };
        let q = JournaledQueue::open("/q", "q", config.clone()).unwrap();
        q.reader("r").unwrap();
        disk.set_faults(SimFaults {
            short_writes: true,
            write_error_per_mille: 2,
            sync_error_per_mille: 2,
            ..SimFaults::default()
        });
        let acked: Vec<Vec<u8>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4u8)
                .map(|t| {
                    let q = q.clone();
                    scope.spawn(move || {
                        let mut mine = Vec::new();
                        for i in 0..150u16 {
                            let data = [&[t][..], &i.to_le_bytes()[..], &[7u8; 20][..]].concat();
                            if q.put(&data).is_ok() {
                                mine.push(data);
                            }
                        }
                        mine
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        drop(q);
        disk.set_faults(SimFaults::default());
        disk.crash();
        let q = JournaledQueue::open("/q", "q", config).unwrap();
        let got: Vec<Vec<u8>> = drain(&q).into_iter().map(|(_, d)| d).collect();
        for a in &acked {
            assert!(got.contains(a), "seed {seed}: acknowledged {a:?} lost");
        }
        for g in &got {
            assert!(g.len() == 23 && g[0] < 4, "seed {seed}: never put: {g:?}");
        }
        // Each thread's items keep their order.
        for t in 0..4u8 {
            let seq: Vec<u16> = got
                .iter()
                .filter(|g| g[0] == t)
                .map(|g| u16::from_le_bytes([g[1], g[2]]))
                .collect();
            assert!(seq.windows(2).all(|w| w[0] < w[1]), "seed {seed}: {seq:?}");
        }
    }
}
