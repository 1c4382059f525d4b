//! The statement that adds one job without a unique key: the common case of `enqueue`, on the
//! path of every idle worker's wake-up.

/// Inserts one job. Parameters: queue, kind, key, payload, metadata, retry, depends_on,
/// blocked, run_at, now, ready channel, due channel, payload_json.
///
/// It gives the job the same id, round and notification as [`ENQUEUE`](super::enqueue::ENQUEUE) would for a
/// batch of that one job (a ready job's round is its key's tail plus one), and returns rows
/// in the same form: `(1, id, NULL)` for the inserted id and `(2, id, 1)` for the id planned
/// for the batch's only row. Like the batch, a ready job whose queue has due jobs waiting for
/// a promotion waits behind them instead of taking a place. With scalar parameters the planner knows the statement inserts
/// one row whatever the values, so a prepared statement settles on a generic plan after a few
/// runs; the batch statement's arrays, whose length only the values tell, make it plan every
/// run anew (about three times the cost of running it, measured on PostgreSQL 15).
pub(super) const ENQUEUE_ONE: &str = r#"
WITH input AS (
    SELECT $1::text AS queue, $2::text AS kind, $3::text AS key, $4::bytea AS payload,
           $5::jsonb AS metadata, $6::jsonb AS retry, $7::int8 AS depends_on,
           $8::bool AS blocked, $9::int8 AS run_at, $13::jsonb AS payload_json,
           (NOT $8::bool AND $9::int8 <= $10::int8) AS due,
           nextval('fairq.job_ids') AS id
),
timed AS (
    SELECT i.*,
           CASE WHEN i.due THEN NOT EXISTS (
                    SELECT 1 FROM fairq.jobs j
                    WHERE j.queue = i.queue AND j.round IS NULL
                      AND j.state IN ('scheduled', 'retrying') AND j.due_at <= $10::int8)
                ELSE false END AS ready
    FROM input i
),
placed AS (
    SELECT r.*, CASE WHEN r.ready THEN KEY_TAIL + 1 END AS round
    FROM timed r
),
ins AS (
    INSERT INTO fairq.jobs (id, queue, kind, key, payload, payload_json, metadata, retry,
                            depends_on, state, run_at, due_at, due_seq, round, ready_seq,
                            enqueued_at)
    SELECT p.id, p.queue, p.kind, p.key, p.payload, p.payload_json, p.metadata, p.retry,
           p.depends_on, CASE WHEN p.blocked THEN 'blocked' ELSE 'scheduled' END,
           p.run_at,
           CASE WHEN p.blocked THEN BLOCKED_DUE WHEN p.due AND NOT p.ready THEN $10
                ELSE p.run_at END,
           CASE WHEN p.due AND NOT p.ready THEN BEHIND + p.id ELSE p.id END, p.round,
           CASE WHEN p.ready THEN p.id END, $10
    FROM placed p
    RETURNING id, queue, round, state, due_at
),
woke AS (
    SELECT pg_notify($11, n.queue) FROM ins n WHERE n.round IS NOT NULL
),
woke_due AS (
    SELECT pg_notify($12, n.due_at::text || ' ' || n.queue)
    FROM ins n
    WHERE n.round IS NULL AND n.state <> 'blocked'
)
SELECT 1 AS kind, n.id, NULL::int8 AS ord,
       (SELECT count(*) FROM woke) + (SELECT count(*) FROM woke_due) AS woke
FROM ins n
UNION ALL
SELECT 2, p.id, 1, 0 FROM placed p
"#;
