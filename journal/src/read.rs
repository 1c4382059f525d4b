//! Reading records for a reader: finding the record at the cursor across segment ends, and
//! decoding and checking it from the shared chunks (`chunks.rs`).

use crate::chunks::{Held, RUN_LEN};
use crate::format::{decode_record_checked, DecodeError, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN};
use crate::pos::Pos;
use crate::reader_state::ReaderState;
use crate::state::{Inner, SegEnd};
use crate::JournalError;

/// A record read from the journal.
pub(crate) struct ReadRecord {
    pub(crate) id: u64,
    pub(crate) pos: Pos,
    pub(crate) added_at_ms: u64,
    pub(crate) expires_at_ms: Option<u64>,
    /// The payload, sharing the chunk it was read from.
    pub(crate) data: bytes::Bytes,
}

/// Reads the record at the reader's cursor if it lies before `limit` (by default the
/// visible end, as last seen), and returns it with the position after it. The cursor only
/// moves past the end of a sealed segment to the start of the next one; taking the record is
/// up to the caller.
pub(crate) fn peek_record(
    inner: &Inner,
    st: &mut ReaderState,
    limit: Option<Pos>,
) -> Result<Option<(ReadRecord, Pos)>, JournalError> {
    loop {
        let limit = match limit {
            Some(l) => l,
            None => {
                if st.cursor >= st.limit {
                    st.limit = inner.visible();
                }
                st.limit
            }
        };
        if st.cursor >= limit {
            return Ok(None);
        }
        let avail = if st.cursor.seg == limit.seg {
            // Everything before the limit is complete records.
            limit.off - st.cursor.off
        } else {
            // An older segment, sealed by now (or retired).
            let seg = st.cursor.seg;
            let len = match st.sealed_len {
                Some((s, len)) if s == seg => Some(len),
                _ => match inner.segment_end(seg) {
                    SegEnd::Sealed(len) => {
                        st.sealed_len = Some((seg, len));
                        Some(len)
                    }
                    SegEnd::Open | SegEnd::Gone => None,
                },
            };
            match len {
                Some(len) if st.cursor.off < len => len - st.cursor.off,
                _ => match inner.next_segment_after(seg) {
                    Some(next) => {
                        st.cursor = Pos {
                            seg: next,
                            off: SEGMENT_HEADER_LEN as u64,
                        };
                        continue;
                    }
                    None => return Ok(None),
                },
            }
        };
        let rec = read_record_at(inner, st, st.cursor, avail)?;
        if rec.id < st.cursor_id {
            return Err(inner.corrupt(st.cursor, "item ids are not increasing"));
        }
        let after = Pos {
            seg: st.cursor.seg,
            off: st.cursor.off + (RECORD_HEADER_LEN + rec.data.len()) as u64,
        };
        return Ok(Some((rec, after)));
    }
}

/// Decodes the record at `pos`, which must be complete and valid and lie within the `avail`
/// bytes that follow `pos` in its segment (a damaged length field never makes it read more).
///
/// It looks in the reader's chunk, then in the queue's shared chunks (or reads a new one);
/// a record that does not decode there is read once more straight from the file (a read can
/// go wrong in transit) before it is reported as corrupt.
pub(crate) fn read_record_at(
    inner: &Inner,
    st: &mut ReaderState,
    pos: Pos,
    avail: u64,
) -> Result<ReadRecord, JournalError> {
    let mut min = (RECORD_HEADER_LEN as u64).min(avail);
    // What to fetch before the next decode: None (use the reader's chunk if it holds the
    // record), Some(false) (a shared or new chunk), Some(true) (a fresh read).
    let mut fetch = None;
    let mut fetched_fresh = false;
    loop {
        match fetch.take() {
            Some(fresh) => {
                st.at.set(st.cursor.min(pos));
                // Let go of the chunk read so far first: if every reader has passed it and
                // no item holds a slice of it, its buffer is then free for the next chunk
                // (no allocation, no zero fill).
                st.chunk = None;
                let want = (RUN_LEN as u64).max(min).min(avail);
                let path = inner.segment_path(pos.seg);
                let chunk = inner
                    .chunks
                    .get(
                        inner.storage(),
                        &path,
                        pos,
                        min,
                        want,
                        fresh,
                        inner.config.read_cache_bytes,
                    )
                    .map_err(|e| JournalError::io(&path, e))?;
                fetched_fresh |= fresh;
                if !chunk.holds(pos, min) {
                    return Err(inner.corrupt(pos, "record lies beyond the end of the file"));
                }
                st.chunk = Some(Held::new(chunk));
            }
            None if !st.chunk.as_ref().is_some_and(|c| c.holds(pos, min)) => {
                fetch = Some(false);
                continue;
            }
            None => {}
        }
        let Some(chunk) = st.chunk.as_ref() else {
            fetch = Some(false);
            continue;
        };
        let bytes = chunk.from(pos.off);
        let bytes = &bytes[..bytes.len().min(avail as usize)];
        let verify = !chunk.is_checked(pos.off);
        match decode_record_checked(bytes, verify) {
            Ok((rec, total)) => {
                if verify {
                    chunk.mark_checked(pos.off, total as u64);
                }
                return Ok(ReadRecord {
                    id: rec.id,
                    pos,
                    added_at_ms: rec.added_at_ms,
                    expires_at_ms: rec.expires_at_ms,
                    data: chunk.share(rec.payload),
                });
            }
            // The record runs past this chunk: fetch one holding all of it.
            Err(DecodeError::Incomplete { needed, .. })
                if (needed as u64) <= avail && (needed as u64) > min =>
            {
                min = needed as u64;
                fetch = Some(fetched_fresh);
            }
            // Read it once more straight from the file before judging.
            Err(_) if !fetched_fresh => fetch = Some(true),
            Err(DecodeError::Incomplete { needed, .. }) => {
                return Err(inner.corrupt(
                    pos,
                    &format!("record length {needed} runs past the end of the segment"),
                ));
            }
            Err(e) => return Err(inner.corrupt(pos, &e.to_string())),
        }
    }
}
