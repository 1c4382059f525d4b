//! Reading a store back from its journal: every uncommitted item in id order, the last full
//! record of each job with the progress written after it, the queues' counters, the id
//! counter, and the ledger of which items are still needed.

use std::collections::BTreeMap;
use std::path::Path;

use fairq_journal::Reader;
use fairq_worker::JobId;
use fairq_worker::memory::store::{Progress, Record};

use crate::error::FileError;
use crate::frame::{DecodeError, Entry, decode_frame};
use crate::ledger::{Ledger, Touch};
use crate::totals::QueueTotals;

/// What the journal holds.
pub(crate) struct Replayed {
    pub(crate) records: BTreeMap<JobId, Record>,
    pub(crate) totals: BTreeMap<String, QueueTotals>,
    pub(crate) next_id: u64,
    pub(crate) ledger: Ledger,
}

/// Reads every item `reader` delivers. A frame that does not decode, or a progress whose
/// job's full record is missing, is damage: reported, never skipped.
pub(crate) fn replay(dir: &Path, reader: &Reader) -> Result<Replayed, FileError> {
    let mut records: BTreeMap<JobId, Record> = BTreeMap::new();
    // Progress read before its job's full record: only possible for a job whose tombstone
    // follows (see the ledger); anything left at the end is damage.
    let mut orphans: BTreeMap<JobId, (u64, Progress)> = BTreeMap::new();
    let mut totals: BTreeMap<String, QueueTotals> = BTreeMap::new();
    let mut next_id = 0;
    let mut ledger = Ledger::default();
    while let Some(item) = reader.get()? {
        let frame = decode_frame(&item.data).map_err(|e| match e {
            DecodeError::Version(found) => FileError::UnsupportedVersion {
                item: item.id.0,
                found,
                supported: crate::frame::FORMAT_VERSION,
            },
            DecodeError::Invalid(reason) => FileError::CorruptRecord {
                path: dir.to_path_buf(),
                item: item.id.0,
                reason,
            },
        })?;
        next_id = next_id.max(frame.next_id);
        let mut touches = Vec::with_capacity(frame.entries.len());
        for entry in frame.entries {
            match entry {
                Entry::Job(id, record) => {
                    records.insert(id, *record);
                    orphans.remove(&id);
                    touches.push(Touch::Job(id));
                }
                Entry::Progress(id, progress) => {
                    match records.get_mut(&id) {
                        Some(record) => record.set_progress(progress),
                        None => {
                            orphans.insert(id, (item.id.0, progress));
                        }
                    }
                    touches.push(Touch::Progress(id));
                }
                Entry::Deleted(id) => {
                    records.remove(&id);
                    orphans.remove(&id);
                    touches.push(Touch::Deleted(id));
                }
                Entry::Queue(name, queue) => {
                    touches.push(Touch::Queue(name.clone()));
                    totals.insert(name, queue);
                }
                Entry::QueueRemoved(name) => {
                    totals.remove(&name);
                    touches.push(Touch::QueueRemoved(name));
                }
            }
        }
        ledger.written(item.id.0, &touches);
        ledger.read(item.id.0);
    }
    if let Some((id, (item, _))) = orphans.into_iter().next() {
        return Err(FileError::CorruptRecord {
            path: dir.to_path_buf(),
            item,
            reason: format!("progress of job {id} whose full record is missing from the journal"),
        });
    }
    Ok(Replayed {
        records,
        totals,
        next_id,
        ledger,
    })
}
