//! The encoding of reader checkpoints and of the reader registry.
//!
//! A checkpoint records where a reader stands: every item id below `head` is finished
//! (committed, expired or dropped), `head_segment` is the oldest segment the reader still
//! needs, `done` lists the ids at or above `head` that were committed out of order, and
//! `errors` the abort counts of unfinished items. The registry lists the names of a queue's
//! readers, so that a reader whose checkpoint is missing or damaged is still known and
//! restarts from the oldest item.
//!
//! Both files are small, written whole and checksummed; see `FORMAT.md` for the layout.
//! Checkpoints are written in version 3; version 2 files (without `tail_segment`) and
//! version 1 files (without `head_segment` and `errors` either) are still read.
//!
//! ```
//! use fairq_journal::checkpoint::{decode_checkpoint, encode_checkpoint, Checkpoint};
//! let cp = Checkpoint { head: 10, head_segment: 3, tail_segment: 4, done: vec![12, 15], errors: vec![(11, 2)] };
//! assert_eq!(decode_checkpoint(&encode_checkpoint(&cp)).unwrap(), cp);
//! ```

use crate::format::{u32_at, u64_at, DecodeError};
use crate::name::validate_name;

/// Magic bytes at the start of a checkpoint file.
pub const CHECKPOINT_MAGIC: [u8; 8] = *b"FAIRQCKP";
/// Magic bytes at the start of a registry file.
pub const REGISTRY_MAGIC: [u8; 8] = *b"FAIRQRDR";
/// Magic bytes at the start of a tail marker file.
pub const TAIL_MAGIC: [u8; 8] = *b"FAIRQTAL";
/// The version of the registry format, and the oldest checkpoint version still read.
const VERSION: u32 = 1;
/// The checkpoint version this crate writes.
pub const CHECKPOINT_VERSION: u32 = 3;
/// The most out-of-order ids a checkpoint can list, and apart from them the most error
/// counts: the number of each is a 32-bit field. Reading needs no lower bound: a file
/// must hold 8 (or 12) bytes for each entry it counts, which limits what reading it
/// allocates to about its own size. A reader reaches this many only with as many ids held
/// in memory; its checkpoint then fails (`checkpoint_too_large`) instead of being written
/// with a count that wrapped.
pub const MAX_DONE_IDS: usize = u32::MAX as usize;
/// Upper bound on registry entries and on a reader name's length.
const MAX_READERS: usize = 1 << 16;
const MAX_NAME_LEN: usize = 255;

/// A reader's saved position.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Checkpoint {
    /// Every id below this one is finished.
    pub head: u64,
    /// The oldest segment the reader still needs (the one holding its oldest unfinished
    /// item, or where its next read starts). Segments before it may be retired; one of them
    /// missing is not damage, one from it on missing is. `0` when unknown (version 1 files).
    pub head_segment: u64,
    /// The newest segment of the queue when the checkpoint was written. It existed (its
    /// creation was synced) and the newest segment is never retired, so a later open that
    /// finds no segment this new is missing the end of the journal. `0` when unknown
    /// (versions 1 and 2).
    pub tail_segment: u64,
    /// Ids at or above `head` that are finished, in increasing order.
    pub done: Vec<u64>,
    /// Abort counts of unfinished items: `(id, count)` with ids at or above `head`, in
    /// increasing order, counts at least 1.
    pub errors: Vec<(u64, u32)>,
}

/// Why `cp` cannot be written: more out-of-order ids or error counts than a checkpoint's
/// count fields hold ([`MAX_DONE_IDS`]). `None` when it can.
pub(crate) fn checkpoint_too_large(cp: &Checkpoint) -> Option<String> {
    too_many(cp.done.len(), cp.errors.len())
}

fn too_many(done: usize, errors: usize) -> Option<String> {
    (done > MAX_DONE_IDS || errors > MAX_DONE_IDS).then(|| {
        format!(
            "the checkpoint would list {done} ids finished out of order and {errors} error \
             counts; it holds at most {MAX_DONE_IDS} of each"
        )
    })
}

/// Encodes a checkpoint file (version 3).
///
/// ```
/// use fairq_journal::checkpoint::{encode_checkpoint, Checkpoint};
/// assert_eq!(encode_checkpoint(&Checkpoint { head: 1, ..Default::default() }).len(), 48);
/// ```
///
/// # Panics
///
/// If `cp` lists more than [`MAX_DONE_IDS`] out-of-order ids or error counts: their number
/// would not fit its field, and the file would not read back. (The journal checks first,
/// and fails the checkpoint instead.)
pub fn encode_checkpoint(cp: &Checkpoint) -> Vec<u8> {
    if let Some(reason) = checkpoint_too_large(cp) {
        panic!("{reason}");
    }
    let mut out = Vec::with_capacity(48 + 8 * cp.done.len() + 12 * cp.errors.len());
    out.extend_from_slice(&CHECKPOINT_MAGIC);
    out.extend_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
    out.extend_from_slice(&cp.head.to_le_bytes());
    out.extend_from_slice(&cp.head_segment.to_le_bytes());
    out.extend_from_slice(&cp.tail_segment.to_le_bytes());
    out.extend_from_slice(&(cp.done.len() as u32).to_le_bytes());
    for id in &cp.done {
        out.extend_from_slice(&id.to_le_bytes());
    }
    out.extend_from_slice(&(cp.errors.len() as u32).to_le_bytes());
    for (id, count) in &cp.errors {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
    }
    let crc = crate::crc::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks magic and checksum; returns the version (not yet checked).
fn check_envelope(buf: &[u8], magic: &[u8; 8], min_len: usize) -> Result<u32, DecodeError> {
    if buf.len() < min_len {
        return Err(DecodeError::Incomplete {
            needed: min_len,
            available: buf.len(),
        });
    }
    if buf[..8] != magic[..] {
        return Err(DecodeError::BadMagic);
    }
    let body = &buf[..buf.len() - 4];
    let stored = u32_at(buf, buf.len() - 4);
    let computed = crate::crc::crc32c(body);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    Ok(u32_at(buf, 8))
}

/// Decodes a checkpoint file. The whole buffer must be exactly one checkpoint.
///
/// ```
/// use fairq_journal::checkpoint::decode_checkpoint;
/// assert!(decode_checkpoint(b"garbage").is_err());
/// ```
pub fn decode_checkpoint(buf: &[u8]) -> Result<Checkpoint, DecodeError> {
    let version = check_envelope(buf, &CHECKPOINT_MAGIC, 28)?;
    let head = u64_at(buf, 12);
    let (head_segment, tail_segment, mut at) = match version {
        1 => (0, 0, 20),
        2 if buf.len() >= 40 => (u64_at(buf, 20), 0, 28),
        3 if buf.len() >= 48 => (u64_at(buf, 20), u64_at(buf, 28), 36),
        2 | 3 => return Err(DecodeError::BadLength(buf.len() as u64)),
        other => return Err(DecodeError::BadVersion(other)),
    };
    let end = buf.len() - 4;
    let count = u32_at(buf, at) as usize;
    at += 4;
    // Checked before anything is allocated: at most about the file's own size (saturating,
    // so that a count near `u32::MAX` cannot wrap on a 32-bit target).
    if end < at.saturating_add(count.saturating_mul(8)) {
        return Err(DecodeError::BadLength(count as u64));
    }
    let mut done = Vec::with_capacity(count);
    for i in 0..count {
        let id = u64_at(buf, at + 8 * i);
        if id < head || done.last().is_some_and(|&p| id <= p) {
            return Err(DecodeError::BadLength(id));
        }
        done.push(id);
    }
    at += 8 * count;
    let mut errors = Vec::new();
    if version >= 2 {
        if end < at + 4 {
            return Err(DecodeError::BadLength(at as u64));
        }
        let count = u32_at(buf, at) as usize;
        at += 4;
        if end < at.saturating_add(count.saturating_mul(12)) {
            return Err(DecodeError::BadLength(count as u64));
        }
        errors.reserve(count);
        for i in 0..count {
            let id = u64_at(buf, at + 12 * i);
            let n = u32_at(buf, at + 12 * i + 8);
            if id < head || n == 0 || errors.last().is_some_and(|&(p, _)| id <= p) {
                return Err(DecodeError::BadLength(id));
            }
            errors.push((id, n));
        }
        at += 12 * count;
    }
    if at != end {
        return Err(DecodeError::BadLength(buf.len() as u64));
    }
    Ok(Checkpoint {
        head,
        head_segment,
        tail_segment,
        done,
        errors,
    })
}

/// Encodes a registry file listing reader names (the empty name is the default reader).
///
/// ```
/// use fairq_journal::checkpoint::{decode_registry, encode_registry};
/// let names = vec!["a".to_string(), "b".to_string()];
/// assert_eq!(decode_registry(&encode_registry(&names)).unwrap(), names);
/// ```
pub fn encode_registry(names: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&REGISTRY_MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(names.len() as u32).to_le_bytes());
    for n in names {
        out.push(n.len().min(MAX_NAME_LEN) as u8);
        out.extend_from_slice(&n.as_bytes()[..n.len().min(MAX_NAME_LEN)]);
    }
    let crc = crate::crc::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a registry file.
///
/// ```
/// use fairq_journal::checkpoint::decode_registry;
/// assert!(decode_registry(&[0u8; 30]).is_err());
/// ```
pub fn decode_registry(buf: &[u8]) -> Result<Vec<String>, DecodeError> {
    let version = check_envelope(buf, &REGISTRY_MAGIC, 20)?;
    if version != VERSION {
        return Err(DecodeError::BadVersion(version));
    }
    let count = u32_at(buf, 12) as usize;
    if count > MAX_READERS {
        return Err(DecodeError::BadLength(count as u64));
    }
    let end = buf.len() - 4;
    let mut at = 16;
    let mut names = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        if at >= end {
            return Err(DecodeError::BadLength(at as u64));
        }
        let len = buf[at] as usize;
        at += 1;
        if at + len > end {
            return Err(DecodeError::BadLength(len as u64));
        }
        let name = std::str::from_utf8(&buf[at..at + len])
            .map_err(|_| DecodeError::BadLength(len as u64))?;
        names.push(name.to_string());
        at += len;
    }
    if at != end {
        return Err(DecodeError::BadLength(at as u64));
    }
    Ok(names)
}

/// The reader names a queue's registry file lists, checked the way opening the queue checks
/// them, or why they cannot be trusted.
pub(crate) fn registry_names(file: &[u8]) -> Result<Vec<String>, String> {
    let names = decode_registry(file).map_err(|e| format!("reader registry: {e}"))?;
    // The default reader (the empty name) is listed only alone.
    let invalid = |n: &String| (!n.is_empty() || names.len() > 1) && validate_name(n).is_err();
    if names.is_empty() || names.iter().any(invalid) {
        return Err("reader registry lists an invalid reader name".into());
    }
    Ok(names)
}

/// The reader names of a queue without a registry file, from the reader names of its
/// checkpoint files (`checkpoints`): the default reader alone, unless named readers left
/// checkpoint files. The registry was then lost (it is written before a named reader is
/// acknowledged, and stays), or a crash interrupted the first named reader's creation, and
/// those readers are taken from their files, sorted, rather than forgotten (the default
/// reader's checkpoint is then stale).
pub(crate) fn names_without_registry(checkpoints: &[&str]) -> Vec<String> {
    let mut named: Vec<String> = checkpoints
        .iter()
        .filter(|n| !n.is_empty() && validate_name(n).is_ok())
        .map(|n| n.to_string())
        .collect();
    if named.is_empty() {
        return vec![String::new()];
    }
    named.sort_unstable();
    named.dedup();
    named
}

/// Encodes a tail marker: the newest segment created (see FORMAT.md, "Tail marker").
///
/// ```
/// use fairq_journal::checkpoint::{decode_tail, encode_tail};
/// assert_eq!(decode_tail(&encode_tail(7)).unwrap(), 7);
/// ```
pub fn encode_tail(segment: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    out.extend_from_slice(&TAIL_MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&segment.to_le_bytes());
    let crc = crate::crc::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Decodes a tail marker file. The whole buffer must be exactly one marker.
///
/// ```
/// use fairq_journal::checkpoint::decode_tail;
/// assert!(decode_tail(b"fairq-journal tail 7").is_err());
/// ```
pub fn decode_tail(buf: &[u8]) -> Result<u64, DecodeError> {
    let version = check_envelope(buf, &TAIL_MAGIC, 24)?;
    if version != VERSION {
        return Err(DecodeError::BadVersion(version));
    }
    if buf.len() != 24 {
        return Err(DecodeError::BadLength(buf.len() as u64));
    }
    Ok(u64_at(buf, 12))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_rejects_damage_and_unordered_ids() {
        let cp = Checkpoint {
            head: 5,
            head_segment: 2,
            tail_segment: 3,
            done: vec![7, 9],
            errors: vec![(6, 1), (8, 3)],
        };
        let buf = encode_checkpoint(&cp);
        for i in 0..buf.len() {
            let mut b = buf.clone();
            b[i] ^= 0x01;
            assert!(decode_checkpoint(&b).is_err(), "byte {i}");
        }
        for cut in 0..buf.len() {
            assert!(decode_checkpoint(&buf[..cut]).is_err());
        }
        for bad in [
            Checkpoint {
                head: 5,
                done: vec![9, 7],
                ..Default::default()
            },
            Checkpoint {
                head: 5,
                done: vec![4],
                ..Default::default()
            },
            Checkpoint {
                head: 5,
                errors: vec![(4, 1)],
                ..Default::default()
            },
            Checkpoint {
                head: 5,
                errors: vec![(6, 0)],
                ..Default::default()
            },
            Checkpoint {
                head: 5,
                errors: vec![(7, 1), (6, 1)],
                ..Default::default()
            },
        ] {
            assert!(
                decode_checkpoint(&encode_checkpoint(&bad)).is_err(),
                "{bad:?}"
            );
        }
    }

    /// Only counts that fit the 32-bit fields are written; a broken writer wraps them
    /// (`as u32`) into a file that reads back as damage.
    #[test]
    fn only_counts_that_fit_their_fields_are_written() {
        assert_eq!(too_many(MAX_DONE_IDS, MAX_DONE_IDS), None);
        assert!(too_many(MAX_DONE_IDS + 1, 0).is_some());
        assert!(too_many(0, MAX_DONE_IDS + 1).is_some());
    }

    #[test]
    fn registry_round_trips_including_default_reader() {
        let names = vec![String::new(), "x-1:y".to_string()];
        let buf = encode_registry(&names);
        assert_eq!(decode_registry(&buf).unwrap(), names);
        for cut in 0..buf.len() {
            assert!(decode_registry(&buf[..cut]).is_err());
        }
    }
}
