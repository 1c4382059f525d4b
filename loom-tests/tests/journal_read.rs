//! Models of the journal's shared chunk reads (`fairq-journal/src/chunks.rs`): readers that
//! need the same bytes at the same time wait for one read of them (a list of reads under way
//! and a condition variable, both under the cache's mutex) instead of each reading and
//! checking them. A lost wake-up would leave a reader asleep forever, which loom reports as a
//! deadlock; a second read of the same bytes breaks the count below.
#![cfg(loom)]

mod common;

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::model;
use fairq_journal::format::SEGMENT_HEADER_LEN;
use fairq_journal::sim::{SimDisk, WrapFiles};
use fairq_journal::storage::ReadFile;
use fairq_journal::{JournalConfig, JournaledQueue, SyncPolicy};
use loom::thread;

/// A segment file counting positioned reads at its first record.
#[derive(Debug)]
struct CountingFile {
    file: Box<dyn ReadFile>,
    first_record_reads: Arc<AtomicUsize>,
}

impl ReadFile for CountingFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if offset == SEGMENT_HEADER_LEN as u64 {
            self.first_record_reads.fetch_add(1, Ordering::SeqCst);
        }
        self.file.read_at(buf, offset)
    }
}

/// The simulated disk, counting positioned reads of segment files at their first record.
fn counting(reads: &Arc<AtomicUsize>) -> WrapFiles {
    let reads = reads.clone();
    WrapFiles::new(SimDisk::new(1)).read_files(move |_, file| {
        Box::new(CountingFile {
            file,
            first_record_reads: reads.clone(),
        })
    })
}

/// Two readers of one queue get its item at the same time: both deliver it, and the bytes
/// were read from the file once.
#[test]
fn readers_side_by_side_read_shared_bytes_once() {
    model(|| {
        let reads = Arc::new(AtomicUsize::new(0));
        let storage = counting(&reads);
        let config = JournalConfig {
            sync: SyncPolicy::Never,
            storage: Arc::new(storage),
            ..JournalConfig::default()
        };
        let q = JournaledQueue::open("/q", "q", config).unwrap();
        let a = q.reader("a").unwrap();
        let b = q.reader("b").unwrap();
        let id = q.put(b"x").unwrap();
        let other = thread::spawn(move || {
            let item = b.get().unwrap().unwrap();
            b.commit(item.id).unwrap();
            (item.id, item.data)
        });
        let item = a.get().unwrap().unwrap();
        a.commit(item.id).unwrap();
        assert_eq!(
            (item.id, item.data),
            (id, fairq_journal::Bytes::from_static(b"x"))
        );
        assert_eq!(
            other.join().unwrap(),
            (id, fairq_journal::Bytes::from_static(b"x"))
        );
        assert_eq!(reads.load(Ordering::SeqCst), 1, "the bytes were read once");
    });
}
