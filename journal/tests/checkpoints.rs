//! Checkpoints: every one the journal writes reads back (no limit on reading is lower than
//! what the writer produces), and one that cannot be read fails the open rather than
//! restarting its reader.

mod faulty;

use std::path::Path;
use std::sync::Arc;

use fairq_journal::checkpoint::{decode_checkpoint, encode_checkpoint, Checkpoint};
use fairq_journal::sim::SimDisk;
use fairq_journal::{JournalConfig, JournalError, JournaledQueue, SyncPolicy};
use faulty::{Faulty, Op};

/// One open read left unfinished while the reader goes on makes every later commit an
/// out-of-order id. Past 2^24 of them a broken reader refuses the checkpoint the writer
/// wrote (`BadLength`), so at the next open the reader restarts from the oldest item and
/// delivers millions of finished items again.
#[test]
fn a_checkpoint_with_more_than_2_24_out_of_order_ids_reads_back() {
    let cp = Checkpoint {
        head: 1,
        head_segment: 1,
        tail_segment: 1,
        done: (2..=(1u64 << 24) + 2).collect(),
        errors: vec![(1, 3)],
    };
    let bytes = encode_checkpoint(&cp);
    assert_eq!(bytes.len(), 48 + 8 * cp.done.len() + 12);
    let back = decode_checkpoint(&bytes);
    assert!(back.is_ok(), "written but unreadable: {:?}", back.err());
    assert!(back.unwrap() == cp);
}

/// A checkpoint that exists but cannot be read for a reason that may pass (here `EIO`)
/// fails the open with an I/O error naming it, and changes nothing: restarting the reader
/// from the oldest item would deliver every item it finished again. Once the checkpoint
/// reads again, the reader resumes where it was. A broken open restarts the reader.
#[test]
fn a_checkpoint_that_fails_to_read_fails_the_open() {
    let disk = SimDisk::new(11);
    let storage = Faulty::new(&disk);
    let config = JournalConfig {
        sync: SyncPolicy::Always,
        storage: Arc::new(storage.clone()),
        ..JournalConfig::default()
    };
    {
        let q = JournaledQueue::open("/j", "q", config.clone()).unwrap();
        let r = q.reader("mail").unwrap();
        for i in 0..3u8 {
            q.put(&[i]).unwrap();
        }
        let it = r.get().unwrap().unwrap();
        r.commit(it.id).unwrap();
        q.close().unwrap();
    }
    let cp = Path::new("/j/q.cp.mail");
    storage.refuse(move |op| matches!(op, Op::Read(p) if *p == cp));
    match JournaledQueue::open("/j", "q", config.clone()) {
        Err(JournalError::Io { path, .. }) => assert_eq!(path, cp),
        other => panic!("expected an I/O error naming the checkpoint, got {other:?}"),
    }
    storage.refuse_nothing();
    let q = JournaledQueue::open("/j", "q", config).unwrap();
    assert!(q.recovery_report().restarted_readers.is_empty());
    let r = q.reader("mail").unwrap();
    assert_eq!(r.get().unwrap().unwrap().data.to_vec(), vec![1u8]);
}
