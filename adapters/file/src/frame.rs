//! The payload of one journal item: a *frame* of store changes.
//!
//! ```text
//! byte 0        format version (4; frames of versions 1 to 3 are read too: versions 1 and
//!               2 never hold Progress or QueueRemoved respectively, and before version 4 a
//!               queue's totals have no pause flag)
//! then          postcard: the store's id counter (u64) when the frame was written
//! then, to end  postcard entries, each one of
//!                 Job(id, record)        the job's full record (when it is enqueued, or moved)
//!                 Deleted(id)            the job was deleted (a tombstone)
//!                 Queue(name, totals)    the queue's retry counters, run-time histogram and
//!                                        pause flag
//!                 Progress(id, progress) the job's lifecycle, last error and times after a
//!                                        change: everything of its record that ever changes
//!                 QueueRemoved(name)     the queue was removed: its counters are gone (a
//!                                        tombstone for its `Queue` entries)
//! ```
//!
//! A job's payload is written once, with its full record; claims, completions, failures and
//! rescues write a `Progress` entry of a few dozen bytes. Replay applies each progress to the
//! job's full record read before it.
//!
//! A frame holds the changes of one or more requests, in the order they were made; the
//! journal's checksum covers the whole frame, so a frame is on disk entirely or not at all.

use fairq_worker::JobId;
use fairq_worker::memory::store::{Progress, Record};
use serde::{Deserialize, Serialize};

use crate::ledger::Touch;
use crate::totals::{QueueTotals, QueueTotalsV3};

/// The version of the frame layout this build writes and reads.
pub(crate) const FORMAT_VERSION: u8 = 4;
/// The first layout whose queue totals carry the pause flag.
const PAUSE_VERSION: u8 = 4;
/// The oldest frame layout this build still reads.
const OLDEST_VERSION: u8 = 1;

/// An entry as decoded.
#[derive(Debug, Deserialize)]
pub(crate) enum Entry {
    Job(JobId, Box<Record>),
    Deleted(JobId),
    Queue(String, QueueTotals),
    Progress(JobId, Progress),
    QueueRemoved(String),
}

/// An entry of a frame before version 4 (same layout as [`Entry`] but for the totals).
#[derive(Debug, Deserialize)]
enum EntryV3 {
    Job(JobId, Box<Record>),
    Deleted(JobId),
    Queue(String, QueueTotalsV3),
    Progress(JobId, Progress),
    QueueRemoved(String),
}

impl From<EntryV3> for Entry {
    fn from(old: EntryV3) -> Self {
        match old {
            EntryV3::Job(id, record) => Entry::Job(id, record),
            EntryV3::Deleted(id) => Entry::Deleted(id),
            EntryV3::Queue(name, totals) => Entry::Queue(name, totals.into()),
            EntryV3::Progress(id, progress) => Entry::Progress(id, progress),
            EntryV3::QueueRemoved(name) => Entry::QueueRemoved(name),
        }
    }
}

/// An entry as encoded, borrowing from the store (same layout as [`Entry`]).
#[derive(Serialize)]
enum EntryRef<'a> {
    Job(JobId, &'a Record),
    Deleted(JobId),
    Queue(&'a str, &'a QueueTotals),
    Progress(JobId, &'a Progress),
    QueueRemoved(&'a str),
}

/// The encoded changes of one request, and which records they are.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) bytes: Vec<u8>,
    pub(crate) touches: Vec<Touch>,
}

impl Batch {
    fn push(&mut self, entry: &EntryRef<'_>, touch: Touch) -> Result<(), postcard::Error> {
        let bytes = std::mem::take(&mut self.bytes);
        self.bytes = postcard::to_extend(entry, bytes)?;
        self.touches.push(touch);
        Ok(())
    }

    /// Adds a job's current record.
    pub(crate) fn job(&mut self, id: JobId, record: &Record) -> Result<(), postcard::Error> {
        self.push(&EntryRef::Job(id, record), Touch::Job(id))
    }

    /// Adds what changed of a job since its full record was written.
    pub(crate) fn progress(&mut self, id: JobId, record: &Record) -> Result<(), postcard::Error> {
        self.push(
            &EntryRef::Progress(id, &record.progress()),
            Touch::Progress(id),
        )
    }

    /// Adds a tombstone.
    pub(crate) fn deleted(&mut self, id: JobId) -> Result<(), postcard::Error> {
        self.push(&EntryRef::Deleted(id), Touch::Deleted(id))
    }

    /// Adds a queue's counters.
    pub(crate) fn queue(
        &mut self,
        name: &str,
        totals: &QueueTotals,
    ) -> Result<(), postcard::Error> {
        self.push(
            &EntryRef::Queue(name, totals),
            Touch::Queue(name.to_string()),
        )
    }

    /// Adds a queue's tombstone.
    pub(crate) fn queue_removed(&mut self, name: &str) -> Result<(), postcard::Error> {
        self.push(
            &EntryRef::QueueRemoved(name),
            Touch::QueueRemoved(name.to_string()),
        )
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.touches.is_empty()
    }

    /// Where the batch ends now, to [`truncate`](Self::truncate) back to.
    pub(crate) fn mark(&self) -> Mark {
        Mark {
            bytes: self.bytes.len(),
            touches: self.touches.len(),
        }
    }

    /// Drops the entries added since `mark`.
    pub(crate) fn truncate(&mut self, mark: Mark) {
        self.bytes.truncate(mark.bytes);
        self.touches.truncate(mark.touches);
    }
}

/// An end of a [`Batch`] (its length in bytes and in entries).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    pub(crate) bytes: usize,
    touches: usize,
}

/// Starts a frame whose entries are then appended as raw batch bytes.
pub(crate) fn frame_header(next_id: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(11);
    out.push(FORMAT_VERSION);
    // A u64 takes at most 10 bytes as a varint, so this cannot fail.
    let mut buf = [0u8; 10];
    if let Ok(used) = postcard::to_slice(&next_id, &mut buf) {
        out.extend_from_slice(used);
    }
    out
}

/// A decoded frame.
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) next_id: u64,
    pub(crate) entries: Vec<Entry>,
}

/// Why a frame cannot be decoded.
#[derive(Debug)]
pub(crate) enum DecodeError {
    Version(u8),
    Invalid(String),
}

/// Decodes a frame.
pub(crate) fn decode_frame(bytes: &[u8]) -> Result<Frame, DecodeError> {
    let (&version, rest) = bytes
        .split_first()
        .ok_or_else(|| DecodeError::Invalid("empty record".into()))?;
    if !(OLDEST_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(DecodeError::Version(version));
    }
    let invalid = |e: postcard::Error| DecodeError::Invalid(e.to_string());
    let (next_id, mut rest) = postcard::take_from_bytes::<u64>(rest).map_err(invalid)?;
    let mut entries = Vec::new();
    while !rest.is_empty() {
        let (entry, tail) = if version < PAUSE_VERSION {
            let (old, tail) = postcard::take_from_bytes::<EntryV3>(rest).map_err(invalid)?;
            (old.into(), tail)
        } else {
            postcard::take_from_bytes::<Entry>(rest).map_err(invalid)?
        };
        entries.push(entry);
        rest = tail;
    }
    Ok(Frame { next_id, entries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairq_worker::NewJob;
    use fairq_worker::memory::store::Store;

    #[test]
    fn frames_round_trip() {
        let mut store = Store::default();
        let ids = store
            .enqueue_many(
                vec![
                    NewJob::new("q", "k", b"payload".to_vec())
                        .key("t")
                        .meta("a", "b"),
                ],
                7,
            )
            .unwrap();
        let mut batch = Batch::default();
        batch.job(ids[0], store.record(ids[0]).unwrap()).unwrap();
        batch.deleted(JobId(99)).unwrap();
        let mut totals = QueueTotals::default();
        totals.record(12);
        batch.queue("q", &totals).unwrap();
        let mut bytes = frame_header(42);
        bytes.extend_from_slice(&batch.bytes);
        let frame = decode_frame(&bytes).unwrap();
        assert_eq!(frame.next_id, 42);
        assert_eq!(frame.entries.len(), 3);
        match &frame.entries[0] {
            Entry::Job(id, record) => {
                assert_eq!(*id, ids[0]);
                assert_eq!(record.info(*id), store.record(ids[0]).unwrap().info(*id));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(frame.entries[1], Entry::Deleted(JobId(99))));
        assert!(matches!(&frame.entries[2], Entry::Queue(name, t) if name == "q" && *t == totals));
    }

    /// A frame written before version 4 (totals without the pause flag) reads as it did,
    /// the queue unpaused, and a paused queue's totals round-trip.
    #[test]
    fn version_3_frames_read_and_the_pause_flag_round_trips() {
        #[derive(Serialize)]
        enum OldEntry<'a> {
            #[allow(dead_code)]
            Job(JobId, &'a Record),
            Deleted(JobId),
            Queue(&'a str, &'a QueueTotalsV3),
        }
        let mut bytes = vec![3u8];
        bytes = postcard::to_extend(&5u64, bytes).unwrap();
        bytes =
            postcard::to_extend(&OldEntry::Queue("q", &QueueTotalsV3::default()), bytes).unwrap();
        bytes = postcard::to_extend(&OldEntry::Deleted(JobId(4)), bytes).unwrap();
        let frame = decode_frame(&bytes).unwrap();
        assert_eq!(frame.next_id, 5);
        assert!(
            matches!(&frame.entries[0], Entry::Queue(name, t) if name == "q" && !t.paused && *t == QueueTotals::default())
        );
        assert!(matches!(frame.entries[1], Entry::Deleted(JobId(4))));

        let mut totals = QueueTotals::default();
        totals.record(3);
        totals.paused = true;
        let mut batch = Batch::default();
        batch.queue("p", &totals).unwrap();
        batch.deleted(JobId(4)).unwrap();
        let mut bytes = frame_header(6);
        bytes.extend_from_slice(&batch.bytes);
        let frame = decode_frame(&bytes).unwrap();
        assert!(matches!(&frame.entries[0], Entry::Queue(name, t) if name == "p" && *t == totals));
        assert!(matches!(frame.entries[1], Entry::Deleted(JobId(4))));
    }

    #[test]
    fn damage_is_reported_not_skipped() {
        assert!(matches!(decode_frame(&[]), Err(DecodeError::Invalid(_))));
        assert!(matches!(
            decode_frame(&[9, 0]),
            Err(DecodeError::Version(9))
        ));
        let mut bytes = frame_header(1);
        bytes.push(0); // Job variant with nothing after it
        assert!(matches!(decode_frame(&bytes), Err(DecodeError::Invalid(_))));
        let mut bytes = frame_header(1);
        bytes.push(200); // unknown variant
        assert!(matches!(decode_frame(&bytes), Err(DecodeError::Invalid(_))));
    }
}
