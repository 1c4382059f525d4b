//! The on-disk encoding of segment headers and item records.
//!
//! Every segment file starts with a [`SegmentHeader`] and is followed by records. A record is
//! self-describing and checksummed with CRC32C, so a reader can tell a complete record from a
//! torn or corrupted one. The byte-by-byte layout is described in `FORMAT.md` next to the
//! crate's manifest; this module is the reference implementation of that document.
//!
//! The decoders never panic on any input: they return a [`DecodeError`].
//!
//! ```
//! use fairq_journal::format::{decode_record, encode_record, Record, RecordKind};
//!
//! let rec = Record {
//!     kind: RecordKind::Item,
//!     id: 7,
//!     added_at_ms: 1_000,
//!     expires_at_ms: None,
//!     payload: b"hello",
//! };
//! let mut buf = Vec::new();
//! encode_record(&rec, &mut buf);
//! let (decoded, used) = decode_record(&buf).unwrap();
//! assert_eq!(decoded, rec);
//! assert_eq!(used, buf.len());
//! ```

/// Magic bytes at the start of every segment file.
pub const SEGMENT_MAGIC: [u8; 8] = *b"FAIRQJNL";
/// The segment format version written by this crate.
pub const FORMAT_VERSION: u32 = 1;
/// Size in bytes of a segment header.
pub const SEGMENT_HEADER_LEN: usize = 28;
/// Header flag: the previous segment was sealed without being synced.
const HEADER_FLAG_PREV_UNSYNCED: u32 = 0b1;
/// Size in bytes of a record's fixed part (everything but the payload).
pub const RECORD_HEADER_LEN: usize = 36;
/// Size of the length and checksum prefix of a record.
const RECORD_PREFIX_LEN: usize = 8;
/// Size of the fixed part of a record body (kind, flags, reserved, id, times).
const BODY_FIXED_LEN: usize = RECORD_HEADER_LEN - RECORD_PREFIX_LEN;
/// The largest payload a record can hold: its body's length is a 32-bit field.
///
/// ```
/// assert_eq!(fairq_journal::format::MAX_PAYLOAD_LEN, u32::MAX as usize - 28);
/// ```
pub const MAX_PAYLOAD_LEN: usize = u32::MAX as usize - BODY_FIXED_LEN;
/// Flag bit: the record carries an expiry time.
const FLAG_HAS_EXPIRY: u8 = 0b0000_0001;

/// Why a byte sequence is not a valid header or record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ends before the structure does; `needed` is the total length it requires.
    #[error("incomplete: {needed} bytes needed, {available} available")]
    Incomplete {
        /// Bytes the structure needs in total.
        needed: usize,
        /// Bytes that were available.
        available: usize,
    },
    /// The magic bytes do not match.
    #[error("bad magic")]
    BadMagic,
    /// The version is not one this crate reads.
    #[error("unsupported version {0}")]
    BadVersion(u32),
    /// The stored checksum does not match the content.
    #[error("checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    BadChecksum {
        /// Checksum found in the data.
        stored: u32,
        /// Checksum computed over the data.
        computed: u32,
    },
    /// The length field is impossible (too small, or larger than allowed).
    #[error("impossible length {0}")]
    BadLength(u64),
    /// An unknown record kind.
    #[error("unknown record kind {0}")]
    BadKind(u8),
    /// Flag or reserved bits that this version does not define are set.
    #[error("undefined flag or reserved bits set")]
    BadFlags,
}

/// The header at the start of every segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// The segment's sequence number (also part of its file name).
    pub segment_id: u64,
    /// The previous segment was sealed without a sync (under `Never` or `Periodic`), so after
    /// a power loss its tail may be torn like the tail of the last segment.
    pub prev_unsynced: bool,
}

/// Appends the encoding of `header` to `out` (exactly [`SEGMENT_HEADER_LEN`] bytes).
///
/// ```
/// use fairq_journal::format::{decode_segment_header, encode_segment_header, SegmentHeader};
/// let mut buf = Vec::new();
/// encode_segment_header(&SegmentHeader { segment_id: 3, prev_unsynced: false }, &mut buf);
/// assert_eq!(decode_segment_header(&buf).unwrap().segment_id, 3);
/// ```
pub fn encode_segment_header(header: &SegmentHeader, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&SEGMENT_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&header.segment_id.to_le_bytes());
    let flags = if header.prev_unsynced {
        HEADER_FLAG_PREV_UNSYNCED
    } else {
        0
    };
    out.extend_from_slice(&flags.to_le_bytes());
    let crc = crate::crc::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Decodes a segment header from the start of `buf`.
///
/// ```
/// use fairq_journal::format::{decode_segment_header, DecodeError};
/// assert!(matches!(decode_segment_header(b"FAIR"), Err(DecodeError::Incomplete { .. })));
/// ```
pub fn decode_segment_header(buf: &[u8]) -> Result<SegmentHeader, DecodeError> {
    if buf.len() < SEGMENT_HEADER_LEN {
        // A prefix of the magic is reported as incomplete; anything else as bad magic.
        let n = buf.len().min(SEGMENT_MAGIC.len());
        if buf[..n] != SEGMENT_MAGIC[..n] {
            return Err(DecodeError::BadMagic);
        }
        return Err(DecodeError::Incomplete {
            needed: SEGMENT_HEADER_LEN,
            available: buf.len(),
        });
    }
    if buf[..8] != SEGMENT_MAGIC {
        return Err(DecodeError::BadMagic);
    }
    let stored = u32_at(buf, 24);
    let computed = crate::crc::crc32c(&buf[..24]);
    if stored != computed {
        return Err(DecodeError::BadChecksum { stored, computed });
    }
    let version = u32_at(buf, 8);
    if version != FORMAT_VERSION {
        return Err(DecodeError::BadVersion(version));
    }
    let flags = u32_at(buf, 20);
    if flags & !HEADER_FLAG_PREV_UNSYNCED != 0 {
        return Err(DecodeError::BadFlags);
    }
    Ok(SegmentHeader {
        segment_id: u64_at(buf, 12),
        prev_unsynced: flags & HEADER_FLAG_PREV_UNSYNCED != 0,
    })
}

/// The kind of a record. Only items exist in this version; the field leaves room for more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordKind {
    /// A queue item.
    Item,
}

impl RecordKind {
    fn to_byte(self) -> u8 {
        match self {
            RecordKind::Item => 1,
        }
    }

    fn from_byte(b: u8) -> Result<Self, DecodeError> {
        match b {
            1 => Ok(RecordKind::Item),
            other => Err(DecodeError::BadKind(other)),
        }
    }
}

/// A decoded record, borrowing its payload from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// What the record is.
    pub kind: RecordKind,
    /// The item id (strictly increasing within a journal).
    pub id: u64,
    /// When the item was added, in milliseconds since the Unix epoch.
    pub added_at_ms: u64,
    /// When the item expires, in milliseconds since the Unix epoch.
    pub expires_at_ms: Option<u64>,
    /// The item's bytes.
    pub payload: &'a [u8],
}

impl Record<'_> {
    /// Total encoded size of this record in bytes.
    ///
    /// ```
    /// use fairq_journal::format::{Record, RecordKind, RECORD_HEADER_LEN};
    /// let r = Record { kind: RecordKind::Item, id: 1, added_at_ms: 0, expires_at_ms: None, payload: b"abc" };
    /// assert_eq!(r.encoded_len(), RECORD_HEADER_LEN + 3);
    /// ```
    pub fn encoded_len(&self) -> usize {
        RECORD_HEADER_LEN + self.payload.len()
    }
}

/// Appends the encoding of `rec` to `out`.
///
/// # Panics
///
/// Never for payloads up to [`MAX_PAYLOAD_LEN`]; the queue refuses a `max_item_size` above it.
///
/// ```
/// use fairq_journal::format::{encode_record, Record, RecordKind};
/// let mut buf = Vec::new();
/// encode_record(&Record { kind: RecordKind::Item, id: 1, added_at_ms: 5, expires_at_ms: Some(9), payload: b"x" }, &mut buf);
/// assert_eq!(buf.len(), 37);
/// ```
pub fn encode_record(rec: &Record<'_>, out: &mut Vec<u8>) {
    let start = out.len();
    out.reserve(RECORD_HEADER_LEN + rec.payload.len());
    let mut h = fixed_part(rec);
    // The checksum covers the length, then the body and payload: with the length copied
    // into the checksum's place they are one run of bytes, checksummed in one call.
    h.copy_within(0..4, 4);
    out.extend_from_slice(&h);
    out.extend_from_slice(rec.payload);
    let crc = crate::crc::crc32c(&out[start + 4..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// The fixed part of a record's encoding (everything before the payload), with the
/// checksum computed over it and the payload in place: writing it followed by the payload
/// gives the same bytes as [`encode_record`], without copying the payload.
///
/// ```
/// use fairq_journal::format::{encode_record, encode_record_header, Record, RecordKind};
/// let rec = Record { kind: RecordKind::Item, id: 3, added_at_ms: 5, expires_at_ms: None, payload: b"abc" };
/// let mut whole = Vec::new();
/// encode_record(&rec, &mut whole);
/// let mut parts = encode_record_header(&rec).to_vec();
/// parts.extend_from_slice(rec.payload);
/// assert_eq!(parts, whole);
/// ```
pub fn encode_record_header(rec: &Record<'_>) -> [u8; RECORD_HEADER_LEN] {
    let mut h = fixed_part(rec);
    // The length in the checksum's place makes length and body one run of bytes.
    h.copy_within(0..4, 4);
    let crc = crate::crc::crc32c_pair(&h[4..], rec.payload);
    h[4..8].copy_from_slice(&crc.to_le_bytes());
    h
}

/// A record's fixed part with the checksum field left zero.
fn fixed_part(rec: &Record<'_>) -> [u8; RECORD_HEADER_LEN] {
    let mut h = [0u8; RECORD_HEADER_LEN];
    let body_len = (BODY_FIXED_LEN + rec.payload.len()) as u32;
    h[0..4].copy_from_slice(&body_len.to_le_bytes());
    h[8] = rec.kind.to_byte();
    h[9] = if rec.expires_at_ms.is_some() {
        FLAG_HAS_EXPIRY
    } else {
        0
    };
    h[12..20].copy_from_slice(&rec.id.to_le_bytes());
    h[20..28].copy_from_slice(&rec.added_at_ms.to_le_bytes());
    h[28..36].copy_from_slice(&rec.expires_at_ms.unwrap_or(0).to_le_bytes());
    h
}

/// Decodes one record from the start of `buf`, returning it and the number of bytes it used.
///
/// `Incomplete` means `buf` holds a prefix of a record that may be valid; every other error
/// means the bytes are not a valid record.
///
/// ```
/// use fairq_journal::format::{decode_record, DecodeError};
/// assert!(matches!(decode_record(&[0u8; 40]), Err(DecodeError::BadLength(0))));
/// ```
pub fn decode_record(buf: &[u8]) -> Result<(Record<'_>, usize), DecodeError> {
    decode_record_checked(buf, true)
}

/// Like [`decode_record`], but skips the checksum when `verify` is false: for bytes in
/// memory whose checksum was verified before (they cannot have changed since).
pub(crate) fn decode_record_checked(
    buf: &[u8],
    verify: bool,
) -> Result<(Record<'_>, usize), DecodeError> {
    if buf.len() < RECORD_PREFIX_LEN {
        return Err(DecodeError::Incomplete {
            needed: RECORD_PREFIX_LEN,
            available: buf.len(),
        });
    }
    let body_len = u32_at(buf, 0) as usize;
    if body_len < BODY_FIXED_LEN {
        return Err(DecodeError::BadLength(body_len as u64));
    }
    let total = RECORD_PREFIX_LEN + body_len;
    if buf.len() < total {
        return Err(DecodeError::Incomplete {
            needed: total,
            available: buf.len(),
        });
    }
    let body = &buf[RECORD_PREFIX_LEN..total];
    if verify {
        let stored = u32_at(buf, 4);
        let computed = crate::crc::crc32c_pair(&buf[..4], body);
        if stored != computed {
            return Err(DecodeError::BadChecksum { stored, computed });
        }
    }
    let kind = RecordKind::from_byte(body[0])?;
    let flags = body[1];
    if flags & !FLAG_HAS_EXPIRY != 0 || body[2] != 0 || body[3] != 0 {
        return Err(DecodeError::BadFlags);
    }
    let id = u64_at(body, 4);
    let added_at_ms = u64_at(body, 12);
    let expiry = u64_at(body, 20);
    let expires_at_ms = if flags & FLAG_HAS_EXPIRY != 0 {
        Some(expiry)
    } else if expiry != 0 {
        return Err(DecodeError::BadFlags);
    } else {
        None
    };
    Ok((
        Record {
            kind,
            id,
            added_at_ms,
            expires_at_ms,
            payload: &body[BODY_FIXED_LEN..],
        },
        total,
    ))
}

/// Why no record that may follow a given id starts at a byte offset. Kept as data while a
/// damaged stretch is walked byte by byte (salvage, and opening's search past a bad
/// record); turned into text once per stretch.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Rejected {
    /// The fixed fields of a record header do not hold.
    #[error("not a record")]
    NotRecord,
    /// The bytes do not decode as a record (checksum, length, ...).
    #[error("record: {0}")]
    Decode(DecodeError),
    /// A record whose id is not past the last one taken.
    #[error("record {id} out of order (after {last})")]
    OutOfOrder {
        /// The record's id.
        id: u64,
        /// The last id taken before it.
        last: u64,
    },
}

/// The record at the start of `buf`, if it is intact and its id is past `last_id`, with its
/// encoded length. The cheap tests (kind, flag and reserved bytes, the expiry field, the
/// id, the length against what `buf` holds) come before the checksum, so that looking for a
/// record at every byte of a long damaged or torn stretch checksums only where a record
/// header could start, not `len` bytes at every offset; a rejection allocates nothing.
pub(crate) fn record_after(
    buf: &[u8],
    last_id: Option<u64>,
) -> Result<(Record<'_>, usize), Rejected> {
    if buf.len() >= RECORD_HEADER_LEN {
        let flags = buf[9];
        if buf[8] != 1
            || flags & !FLAG_HAS_EXPIRY != 0
            || buf[10] != 0
            || buf[11] != 0
            || (flags & FLAG_HAS_EXPIRY == 0 && u64_at(buf, 28) != 0)
        {
            return Err(Rejected::NotRecord);
        }
        let id = u64_at(buf, 12);
        if let Some(last) = last_id.filter(|&last| id <= last) {
            return Err(Rejected::OutOfOrder { id, last });
        }
    }
    let (record, len) = decode_record(buf).map_err(Rejected::Decode)?;
    if let Some(last) = last_id.filter(|&last| record.id <= last) {
        return Err(Rejected::OutOfOrder {
            id: record.id,
            last,
        });
    }
    Ok((record, len))
}

pub(crate) fn u32_at(buf: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&buf[at..at + 4]);
    u32::from_le_bytes(b)
}

pub(crate) fn u64_at(buf: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&buf[at..at + 8]);
    u64::from_le_bytes(b)
}

/// An item's encoded record (added at 5 ms, no expiry), for the tests of the code that
/// reads records back.
#[cfg(test)]
pub(crate) fn item_record(id: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_record(
        &Record {
            kind: RecordKind::Item,
            id,
            added_at_ms: 5,
            expires_at_ms: None,
            payload,
        },
        &mut out,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(payload: &[u8]) -> Record<'_> {
        Record {
            kind: RecordKind::Item,
            id: 42,
            added_at_ms: 1_700_000_000_000,
            expires_at_ms: Some(1_700_000_060_000),
            payload,
        }
    }

    #[test]
    fn record_round_trips_and_reports_size() {
        let mut buf = Vec::new();
        encode_record(&sample(b"payload"), &mut buf);
        assert_eq!(buf.len(), RECORD_HEADER_LEN + 7);
        let (rec, used) = decode_record(&buf).unwrap();
        assert_eq!(rec, sample(b"payload"));
        assert_eq!(used, buf.len());
    }

    #[test]
    fn every_prefix_is_incomplete_and_every_bit_flip_is_detected() {
        let mut buf = Vec::new();
        encode_record(&sample(b"abcdef"), &mut buf);
        for cut in 0..buf.len() {
            let err = decode_record(&buf[..cut]).unwrap_err();
            assert!(
                matches!(err, DecodeError::Incomplete { .. }),
                "cut {cut}: {err:?}"
            );
        }
        for bit in 0..buf.len() * 8 {
            let mut b = buf.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            if let Ok((r, _)) = decode_record(&b) {
                panic!("bit {bit} flip accepted: {r:?}");
            }
        }
    }

    #[test]
    fn header_round_trips_and_rejects_damage() {
        let mut buf = Vec::new();
        encode_segment_header(
            &SegmentHeader {
                segment_id: 9,
                prev_unsynced: true,
            },
            &mut buf,
        );
        assert_eq!(buf.len(), SEGMENT_HEADER_LEN);
        let h = decode_segment_header(&buf).unwrap();
        assert_eq!((h.segment_id, h.prev_unsynced), (9, true));
        for i in 0..buf.len() {
            let mut b = buf.clone();
            b[i] ^= 0x10;
            assert!(decode_segment_header(&b).is_err(), "byte {i}");
        }
        assert!(matches!(
            decode_segment_header(&buf[..10]),
            Err(DecodeError::Incomplete { .. })
        ));
        assert_eq!(decode_segment_header(&[0u8; 3]), Err(DecodeError::BadMagic));
    }

    #[test]
    fn no_expiry_record_needs_zero_expiry_field() {
        let mut buf = Vec::new();
        let mut r = sample(b"");
        r.expires_at_ms = None;
        encode_record(&r, &mut buf);
        assert_eq!(decode_record(&buf).unwrap().0.expires_at_ms, None);
    }
}
