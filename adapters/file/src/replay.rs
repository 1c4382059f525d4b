//! Reading a store back from its journal: every uncommitted item in id order, the last full
//! record of each job with the progress written after it, the queues' counters, the id
//! counter, and the ledger of which items are still needed.

use std::collections::BTreeMap;
use std::path::Path;

use fairq_journal::Reader;
use fairq_worker::JobId;
use fairq_worker::memory::store::{Progress, Record};

use crate::error::FileError;
use crate::frame::{DecodeError, Entry, Frame, decode_frame};
use crate::ledger::{Ledger, Touch};
use crate::totals::QueueTotals;

/// What the journal holds.
pub(crate) struct Replayed {
    pub(crate) records: BTreeMap<JobId, Record>,
    pub(crate) totals: BTreeMap<String, QueueTotals>,
    pub(crate) next_id: u64,
    pub(crate) ledger: Ledger,
}

/// The store being rebuilt from frames, applied in item order: the last full record of each
/// job with the progress written after it, the queues' counters and the id counter.
#[derive(Default)]
pub(crate) struct Rebuild {
    pub(crate) records: BTreeMap<JobId, Record>,
    /// Progress read before its job's full record: only possible for a job whose tombstone
    /// follows (see the ledger); anything left at the end is damage. With the item it came
    /// in.
    pub(crate) orphans: BTreeMap<JobId, (u64, Progress)>,
    pub(crate) totals: BTreeMap<String, QueueTotals>,
    pub(crate) next_id: u64,
}

impl Rebuild {
    /// Applies the frame of journal item `item`; returns what it touched, for the ledger.
    pub(crate) fn apply(&mut self, item: u64, frame: Frame) -> Vec<Touch> {
        self.next_id = self.next_id.max(frame.next_id);
        let mut touches = Vec::with_capacity(frame.entries.len());
        for entry in frame.entries {
            match entry {
                Entry::Job(id, record) => {
                    self.records.insert(id, *record);
                    self.orphans.remove(&id);
                    touches.push(Touch::Job(id));
                }
                Entry::Progress(id, progress) => {
                    match self.records.get_mut(&id) {
                        Some(record) => record.set_progress(progress),
                        None => {
                            self.orphans.insert(id, (item, progress));
                        }
                    }
                    touches.push(Touch::Progress(id));
                }
                Entry::Deleted(id) => {
                    self.records.remove(&id);
                    self.orphans.remove(&id);
                    touches.push(Touch::Deleted(id));
                }
                Entry::Queue(name, queue) => {
                    touches.push(Touch::Queue(name.clone()));
                    self.totals.insert(name, queue);
                }
                Entry::QueueRemoved(name) => {
                    self.totals.remove(&name);
                    touches.push(Touch::QueueRemoved(name));
                }
            }
        }
        touches
    }
}

/// Decodes the frame of journal item `item` of the store in `dir`.
pub(crate) fn decode(dir: &Path, item: u64, bytes: &[u8]) -> Result<Frame, FileError> {
    decode_frame(bytes).map_err(|e| match e {
        DecodeError::Version(found) => FileError::UnsupportedVersion {
            item,
            found,
            supported: crate::frame::FORMAT_VERSION,
        },
        DecodeError::Invalid(reason) => FileError::CorruptRecord {
            path: dir.to_path_buf(),
            item,
            reason,
        },
    })
}

/// Reads every item `reader` delivers. A frame that does not decode, or a progress whose
/// job's full record is missing, is damage: reported, never skipped.
pub(crate) fn replay(dir: &Path, reader: &Reader) -> Result<Replayed, FileError> {
    let mut rebuild = Rebuild::default();
    let mut ledger = Ledger::default();
    while let Some(item) = reader.get()? {
        let frame = decode(dir, item.id.0, &item.data)?;
        let touches = rebuild.apply(item.id.0, frame);
        ledger.written(item.id.0, &touches);
        ledger.read(item.id.0);
    }
    if let Some((id, (item, _))) = rebuild.orphans.into_iter().next() {
        return Err(FileError::CorruptRecord {
            path: dir.to_path_buf(),
            item,
            reason: format!("progress of job {id} whose full record is missing from the journal"),
        });
    }
    Ok(Replayed {
        records: rebuild.records,
        totals: rebuild.totals,
        next_id: rebuild.next_id,
        ledger,
    })
}
