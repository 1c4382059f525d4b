//! What a reader delivers next: aborted items first, then the stream; finished ids skipped;
//! expiry; and dropping the oldest items of a full reader.
//!
//! [`look`] finds the next item without taking it (for `peek`, expiry sweeps and the age of
//! the oldest item); [`take`] takes the item `look` found. Both run under the reader's lock.

use std::time::Duration;

use crate::config::ReaderConfig;
use crate::format::RECORD_HEADER_LEN;
use crate::open_reads::Located;
use crate::pos::Pos;
use crate::read::{peek_record, read_record_at, ReadRecord};
use crate::reader_state::ReaderState;
use crate::state::Inner;
use crate::JournalError;

/// Where a candidate comes from.
enum Source {
    /// The front of the aborted items.
    Returned,
    /// The stream at the cursor; the cursor moves to `after` when it is taken.
    Stream { after: Pos },
}

/// The item a reader would deliver next.
pub(crate) struct Candidate {
    pub(crate) rec: ReadRecord,
    pub(crate) loc: Located,
    source: Source,
}

impl Candidate {
    /// Whether the item is expired at `now_ms`. One boundary for both rules: an item is
    /// expired from the instant its expiry time is reached (`now >= expires_at`), and from
    /// the instant its age reaches the reader's `max_age` (`now >= added_at + max_age`).
    pub(crate) fn is_expired(&self, cfg: &ReaderConfig, now_ms: u64) -> bool {
        expired_at(
            self.rec.added_at_ms,
            self.rec.expires_at_ms,
            cfg.max_age,
            now_ms,
        )
    }
}

/// The expiry rule (see [`Candidate::is_expired`]).
pub(crate) fn expired_at(
    added_at_ms: u64,
    expires_at_ms: Option<u64>,
    max_age: Option<Duration>,
    now_ms: u64,
) -> bool {
    expires_at_ms.is_some_and(|e| now_ms >= e)
        || max_age.is_some_and(|age| now_ms >= added_at_ms.saturating_add(duration_ms(age)))
}

pub(crate) fn duration_ms(d: Duration) -> u64 {
    d.as_millis().min(u128::from(u64::MAX)) as u64
}

/// Finds the item the reader would deliver next, reading no further than `limit` (by
/// default what readers may read). Ids that are already finished are skipped for good on
/// the way.
pub(crate) fn look(
    inner: &Inner,
    st: &mut ReaderState,
    limit: Option<Pos>,
) -> Result<Option<Candidate>, JournalError> {
    if let Some((&id, &loc)) = st.returned.first_key_value() {
        let avail = (RECORD_HEADER_LEN as u64) + loc.len;
        let rec = read_record_at(inner, st, loc.pos, avail)?;
        if rec.id != id {
            return Err(inner.corrupt(loc.pos, "record id changed under an open read"));
        }
        return Ok(Some(Candidate {
            rec,
            loc,
            source: Source::Returned,
        }));
    }
    loop {
        let Some((rec, after)) = peek_record(inner, st, limit)? else {
            return Ok(None);
        };
        if !st.done.is_empty() && st.done.contains(&rec.id) {
            // Finished out of order before a restart: not counted as waiting, skip it.
            st.cursor = after;
            st.cursor_id = rec.id + 1;
            continue;
        }
        let loc = Located {
            pos: rec.pos,
            len: rec.data.len() as u64,
            error_count: if st.errors.is_empty() {
                0
            } else {
                st.errors.get(&rec.id).copied().unwrap_or(0)
            },
        };
        return Ok(Some(Candidate {
            rec,
            loc,
            source: Source::Stream { after },
        }));
    }
}

/// Takes the candidate `look` returned out of the waiting items (the caller then opens it,
/// or finishes it).
pub(crate) fn take(st: &mut ReaderState, c: &Candidate) {
    match c.source {
        Source::Returned => {
            st.returned.remove(&c.rec.id);
        }
        Source::Stream { after } => {
            st.cursor = after;
            st.cursor_id = c.rec.id + 1;
            st.take_error_count(c.rec.id);
        }
    }
    st.left(c.loc.len);
}

/// Drops the reader's oldest waiting item (aborted ones first), reading no further than
/// `limit`. Returns false when nothing could be dropped.
pub(crate) fn drop_oldest(
    inner: &Inner,
    st: &mut ReaderState,
    limit: Pos,
) -> Result<bool, JournalError> {
    if let Some((id, loc)) = st.returned.pop_first() {
        st.left(loc.len);
        st.mark_done(id);
        st.counters.discarded += 1;
        return Ok(true);
    }
    let Some(c) = look(inner, st, Some(limit))? else {
        return Ok(false);
    };
    take(st, &c);
    st.mark_done(c.rec.id);
    st.counters.discarded += 1;
    Ok(true)
}

/// Applies a reader's drop-oldest policy after a put, given the put totals, reading no
/// further than `limit`.
pub(crate) fn enforce_limits(
    inner: &Inner,
    st: &mut ReaderState,
    totals: (u64, u64),
    limit: Pos,
) -> Result<(), JournalError> {
    while st.is_over(totals) {
        if !drop_oldest(inner, st, limit)? {
            break;
        }
    }
    Ok(())
}
