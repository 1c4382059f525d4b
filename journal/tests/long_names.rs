//! Queue and reader names that `validate_name` accepts but whose files the file system
//! would refuse (longer than 255 bytes): refused before anything is written, and a queue
//! left with such a reader by an earlier version still opens.

mod common;
mod faulty;

use std::sync::Arc;
use std::time::Duration;

use common::files;
use fairq_journal::checkpoint::encode_registry;
use fairq_journal::sim::SimDisk;
use fairq_journal::{JournalConfig, JournalError, JournaledQueue, SyncPolicy};
use faulty::{Faulty, Op};

fn cfg() -> JournalConfig {
    JournalConfig {
        sync: SyncPolicy::Always,
        ..Default::default()
    }
}

/// Both names pass `validate_name`, but `<queue>.cp.<reader>.tmp` is longer than 255
/// bytes. A broken implementation registers the reader, then fails writing its checkpoint
/// with `ENAMETOOLONG`: the reader stays registered (in memory and on disk), `close` fails,
/// and every later open fails reading that checkpoint.
#[test]
fn a_reader_whose_checkpoint_name_is_too_long_is_refused_and_the_queue_opens_again() {
    let dir = tempfile::tempdir().unwrap();
    let queue = "q".repeat(200);
    let reader = "r".repeat(60);
    assert!(fairq_journal::validate_name(&queue).is_ok());
    assert!(fairq_journal::validate_name(&reader).is_ok());
    let q = JournaledQueue::open(dir.path(), &queue, cfg()).unwrap();
    let a = q.reader("a").unwrap();
    q.put(b"acknowledged").unwrap();
    let before = files(dir.path());
    let refused = q.reader(&reader);
    assert!(
        matches!(&refused, Err(JournalError::InvalidName { name, .. }) if *name == reader),
        "{refused:?}"
    );
    assert_eq!(q.reader_names(), ["a"]);
    assert_eq!(
        files(dir.path()),
        before,
        "nothing is written for a refused reader"
    );
    q.close().unwrap();
    drop(a);
    let q = JournaledQueue::open(dir.path(), &queue, cfg()).unwrap();
    assert_eq!(q.reader_names(), ["a"]);
    let item = q.reader("a").unwrap().get().unwrap().unwrap();
    assert_eq!(&item.data[..], b"acknowledged");
    // The longest reader name that fits is accepted, and works across a reopen.
    let longest = "r".repeat(255 - 200 - ".cp.".len() - ".tmp".len());
    q.reader(&longest).unwrap();
    q.close().unwrap();
    let q = JournaledQueue::open(dir.path(), &queue, cfg()).unwrap();
    assert_eq!(q.reader_names(), ["a".to_string(), longest]);
    q.close().unwrap();
}

/// The first named reader (taking over the default reader) is checked the same way. A
/// broken implementation fails with an I/O error naming a file, not with `InvalidName`.
#[test]
fn the_first_named_reader_is_refused_with_a_name_error_too() {
    let dir = tempfile::tempdir().unwrap();
    let queue = "q".repeat(200);
    let q = JournaledQueue::open(dir.path(), &queue, cfg()).unwrap();
    let refused = q.reader(&"r".repeat(60));
    assert!(
        matches!(refused, Err(JournalError::InvalidName { .. })),
        "{refused:?}"
    );
    assert_eq!(q.reader_names(), [""]);
    q.close().unwrap();
}

/// Any failure writing a further reader's checkpoint (here the creation of its temporary
/// file is refused) leaves the reader unregistered. A broken implementation writes the
/// registry first, so the reader stays registered without a checkpoint, and the next open
/// restarts it from the oldest item.
#[test]
fn a_reader_whose_checkpoint_cannot_be_written_is_not_registered() {
    let disk = SimDisk::new(7);
    let storage = Faulty::new(&disk);
    let config = JournalConfig {
        sync: SyncPolicy::Always,
        checkpoint_interval: Duration::ZERO,
        storage: Arc::new(storage.clone()),
        ..JournalConfig::default()
    };
    let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
    q.reader("a").unwrap();
    q.put(b"one").unwrap();
    storage.refuse(
        |op| matches!(op, Op::Create(p) if p.to_str().is_some_and(|p| p.contains(".cp.b"))),
    );
    let refused = q.reader("b");
    assert!(
        matches!(refused, Err(JournalError::Io { .. })),
        "{refused:?}"
    );
    assert_eq!(q.reader_names(), ["a"]);
    storage.refuse_nothing();
    q.close().unwrap();
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    assert_eq!(q.reader_names(), ["a"]);
    assert!(q.recovery_report().is_clean(), "{:?}", q.recovery_report());
    q.close().unwrap();
}

/// A queue an earlier version left with such a reader in its registry (and no checkpoint
/// for it, which the file system could not name) opens: that reader restarts from the
/// oldest item, as for any unreadable checkpoint, and can be removed. A broken
/// implementation fails the open with the `ENAMETOOLONG` of reading the checkpoint.
#[test]
fn a_registered_reader_whose_checkpoint_cannot_be_read_restarts_from_the_oldest_item() {
    let dir = tempfile::tempdir().unwrap();
    let queue = "q".repeat(200);
    let reader = "r".repeat(60);
    let q = JournaledQueue::open(dir.path(), &queue, cfg()).unwrap();
    let a = q.reader("a").unwrap();
    q.put(b"one").unwrap();
    q.put(b"two").unwrap();
    let first = a.get().unwrap().unwrap();
    a.commit(first.id).unwrap();
    q.close().unwrap();
    // The registry as the earlier version wrote it before failing the checkpoint.
    std::fs::write(
        dir.path().join(format!("{queue}.readers")),
        encode_registry(&["a".to_string(), reader.clone()]),
    )
    .unwrap();
    let q = JournaledQueue::open(dir.path(), &queue, cfg()).unwrap();
    assert_eq!(
        q.recovery_report().restarted_readers,
        std::slice::from_ref(&reader)
    );
    let stuck = q.reader(&reader).unwrap();
    assert_eq!(&stuck.get().unwrap().unwrap().data[..], b"one");
    assert_eq!(
        &q.reader("a").unwrap().get().unwrap().unwrap().data[..],
        b"two"
    );
    q.remove_reader(&reader).unwrap();
    assert_eq!(q.reader_names(), ["a"]);
    q.close().unwrap();
    let q = JournaledQueue::open(dir.path(), &queue, cfg()).unwrap();
    assert_eq!(q.reader_names(), ["a"]);
    q.close().unwrap();
}
