//! Statements that add jobs.

/// Batch insert. Parameters: queue[], kind[], key[], payload[], metadata[], retry[],
/// unique_key[], depends_on[], blocked[], run_at[], now, ready channel, due channel,
/// payload_json[] (the two payload columns as [`crate::payload::split`] fills them).
///
/// Rows whose unique key is taken (by an unfinished job, or earlier in the batch) are left
/// out before ids and rounds are handed out; `ON CONFLICT DO NOTHING` covers a concurrent
/// insert of the same key. Each ready row gets the round `max(queue's current round, key's
/// last ready round) + n`, where `n` numbers the batch's ready rows of that key; the two
/// lookups run once per key (on its first row). Only window functions combine rows, never a
/// join between intermediate results, so the cost stays linear in the batch.
///
/// The result has three kinds of rows: `(1, id, NULL)` for each inserted id, `(2, id, ord)`
/// for the id planned for each row that was not left out, and `(3, holder, ord)` for each
/// row with a unique key, with the unfinished job holding that key before the statement.
///
/// A ready row whose queue has jobs waiting whose time came (a promotion has yet to give
/// them their places) does not take a place before them: it waits with them, due now and
/// numbered `BEHIND + id`, after every one of them, for the queue's next promotion (see
/// [`BEHIND`](super::BEHIND)). One index probe per queue of the batch that has ready rows
/// finds out; an enqueue through the store has promoted the queue just before, so it
/// usually finds none.
///
/// Ready rows wake the queue's workers (the ready channel); delayed rows tell every store
/// when the queue's earliest one is due (the due channel), so no store has to look for due
/// jobs before every claim; so do ready rows that wait behind due jobs (due now).
pub(super) const ENQUEUE: &str = r#"
WITH raw AS (
    SELECT t.*, (NOT t.blocked AND t.run_at <= $11) AS due
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::jsonb[], $6::jsonb[],
                $7::text[], $8::int8[], $9::bool[], $10::int8[], $14::jsonb[])
         WITH ORDINALITY AS t(queue, kind, key, payload, metadata, retry, unique_key,
                              depends_on, blocked, run_at, payload_json, ord)
),
probed AS (
    SELECT w.*,
           CASE WHEN w.due AND row_number() OVER (PARTITION BY w.queue, w.due ORDER BY w.ord) = 1
                THEN EXISTS (
                    SELECT 1 FROM fairq.jobs j
                    WHERE j.queue = w.queue AND j.round IS NULL
                      AND j.state IN ('scheduled', 'retrying') AND j.due_at <= $11)
           END AS head_behind
    FROM raw w
),
input AS (
    SELECT p.*,
           p.due AND NOT COALESCE(bool_or(p.head_behind) OVER (PARTITION BY p.queue), false)
               AS ready
    FROM probed p
),
fresh AS (
    SELECT i.*, nextval('fairq.job_ids') AS id
    FROM (
        SELECT u.* FROM (
            SELECT i.*, row_number() OVER (PARTITION BY i.queue, i.unique_key ORDER BY i.ord)
                        AS key_rank
            FROM input i
        ) u
        WHERE u.unique_key IS NULL
           OR (u.key_rank = 1 AND NOT EXISTS (
                   SELECT 1 FROM fairq.jobs j
                   WHERE j.queue = u.queue AND j.unique_key = u.unique_key))
        ORDER BY u.ord
    ) i
),
ranked AS (
    SELECT f.*, CASE WHEN f.ready THEN f.id END AS seq,
           row_number() OVER (PARTITION BY f.queue, f.key, f.ready ORDER BY f.ord) AS rn
    FROM fresh f
),
based AS (
    SELECT r.*,
           CASE WHEN r.ready AND r.rn = 1 THEN KEY_TAIL END AS head_base
    FROM ranked r
),
placed AS (
    SELECT b.*,
           CASE WHEN b.ready
                THEN max(b.head_base) OVER (PARTITION BY b.queue, b.key, b.ready) + b.rn
           END AS round
    FROM based b
),
ins AS (
    INSERT INTO fairq.jobs (id, queue, kind, key, payload, payload_json, metadata, retry,
                            unique_key, depends_on, state, run_at, due_at, due_seq, round,
                            ready_seq, enqueued_at)
    SELECT p.id, p.queue, p.kind, p.key, p.payload, p.payload_json, p.metadata, p.retry,
           p.unique_key, p.depends_on, CASE WHEN p.blocked THEN 'blocked' ELSE 'scheduled' END,
           p.run_at,
           CASE WHEN p.blocked THEN BLOCKED_DUE WHEN p.due AND NOT p.ready THEN $11
                ELSE p.run_at END,
           CASE WHEN p.due AND NOT p.ready THEN BEHIND + p.id ELSE p.id END, p.round,
           p.seq, $11
    FROM placed p
    ON_CONFLICT
    RETURNING id, queue, round, state, due_at
),
woke AS (
    SELECT pg_notify($12, q.queue)
    FROM (SELECT DISTINCT n.queue FROM ins n WHERE n.round IS NOT NULL) q
),
woke_due AS (
    SELECT pg_notify($13, m.at::text || ' ' || m.queue)
    FROM (SELECT n.queue, min(n.due_at) AS at FROM ins n
          WHERE n.round IS NULL AND n.state <> 'blocked' GROUP BY n.queue) m
)
SELECT 1 AS kind, n.id, NULL::int8 AS ord,
       (SELECT count(*) FROM woke) + (SELECT count(*) FROM woke_due) AS woke
FROM ins n
UNION ALL
SELECT 2, f.id, f.ord, 0 FROM fresh f
UNION ALL
SELECT 3, (SELECT j.id FROM fairq.jobs j
           WHERE j.queue = i.queue AND j.unique_key = i.unique_key), i.ord, 0
FROM input i
WHERE i.unique_key IS NOT NULL
"#;

/// The arbiter of [`ENQUEUE`] for a batch with unique keys. A batch without any inserts
/// plainly: its rows cannot conflict on the partial unique index, and a speculative insert
/// costs each row an extra WAL record and index check.
pub(super) const ON_CONFLICT: &str =
    "ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING";

/// Marks live dependencies as having dependents, locking them against a concurrent finish;
/// returns the ids it found.
///
/// The lock is `FOR KEY SHARE`, held to the end of the enqueue's transaction: it keeps the
/// dependency's row from being deleted (a success or death moves it to the archive with a
/// `DELETE`, and a purge deletes it), so its finish waits for the dependent's commit, but
/// not from being updated otherwise, so a heartbeat, a retry or a hand-back of the
/// dependency does not wait for the caller's transaction. Only a dependency not yet marked is
/// written (an update, whose lock heartbeats do wait for): its settlement reads the mark on
/// its row, the one thing of this transaction it can see once it waited for the lock.
pub(super) const DEPS_LIVE: &str = r#"
WITH found AS (
    SELECT id, has_dependents FROM fairq.jobs WHERE id = ANY($1::int8[]) FOR KEY SHARE
),
marked AS (
    UPDATE fairq.jobs j SET has_dependents = true
    FROM found f WHERE j.id = f.id AND NOT f.has_dependents
)
SELECT f.id FROM found f
"#;

/// Looks up finished dependencies, marking them too (a dead one may be revived).
pub(super) const DEPS_ARCHIVED: &str = r#"
UPDATE fairq.archive SET has_dependents = true WHERE id = ANY($1::int8[]) RETURNING id, state
"#;

/// [`DEPS_LIVE`] without the mark, for a batch with unique keys, whose rows may not all go
/// in: locks live dependencies as [`DEPS_LIVE`] does (`FOR KEY SHARE`, held to the end of
/// the transaction), so none can finish before [`DEPS_MARK`] marks those the inserted rows
/// name.
pub(super) const DEPS_LIVE_LOCK: &str = r#"
SELECT id FROM fairq.jobs WHERE id = ANY($1::int8[]) FOR KEY SHARE
"#;

/// [`DEPS_ARCHIVED`] without the mark (see [`DEPS_LIVE_LOCK`]).
pub(super) const DEPS_ARCHIVED_LOCK: &str = r#"
SELECT id, state FROM fairq.archive WHERE id = ANY($1::int8[]) FOR NO KEY UPDATE
"#;

/// Marks the dependencies of the rows a batch with unique keys inserted, live or finished,
/// once the batch is known to stand (a row left out for a taken key names none of them);
/// returns the ids it found. Inside a transaction each was locked by the look-up and is
/// found; on a bare client one may have been deleted meanwhile. A live dependency already
/// marked is only locked, as in [`DEPS_LIVE`].
pub(super) const DEPS_MARK: &str = r#"
WITH live AS (
    SELECT id, has_dependents FROM fairq.jobs WHERE id = ANY($1::int8[]) FOR KEY SHARE
),
marked AS (
    UPDATE fairq.jobs j SET has_dependents = true
    FROM live l WHERE j.id = l.id AND NOT l.has_dependents
),
finished AS (
    UPDATE fairq.archive SET has_dependents = true
    WHERE id = ANY($1::int8[]) AND id NOT IN (SELECT l.id FROM live l)
    RETURNING id
)
SELECT l.id FROM live l UNION ALL SELECT f.id FROM finished f
"#;

/// Ids of unfinished jobs holding unique keys. Parameters: queue[], unique_key[].
pub(super) const UNIQUE_HOLDERS: &str = r#"
SELECT j.queue, j.unique_key, j.id
FROM fairq.jobs j
JOIN unnest($1::text[], $2::text[]) AS t(queue, unique_key)
  ON j.queue = t.queue AND j.unique_key = t.unique_key
"#;

/// Deletes rows this call inserted (undoing a batch that hit a duplicate).
pub(super) const UNDO: &str = "DELETE FROM fairq.jobs WHERE id = ANY($1::int8[])";
