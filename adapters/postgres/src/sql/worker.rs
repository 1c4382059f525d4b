//! Statements of the worker's path: promotion, claims, settlement, heartbeats, hand-backs and
//! rescue.
//!
//! Settlement, hand-backs, rescue and revival can make jobs due *now* (a retry without delay, a
//! released dependent). Such a job waits in `jobs_waiting` with `due_at = now` and a `due_seq`
//! of `EVENT` plus its position in the statement, which sorts it after every job that was
//! already waiting for the same millisecond (those keep their id as `due_seq`). The next
//! promotion of its queue gives it its round: jobs whose time came earlier go first, then the
//! event's jobs in the order the event handled them, as the reference store does.

/// Gives a round to every due job of a queue that waits for one (delayed jobs whose time
/// came, retries, released dependents, revived and handed-back jobs), in order of due time
/// and `due_seq`. Only one session per queue promotes at a time (a try-lock taken only when
/// something is due; the others skip), so two promoters never hand out the same key's rounds
/// twice. Parameters: queue, now, limit, lock key, ready channel.
///
/// Returns how many jobs it promoted, whether due jobs were left to another session holding
/// the lock, and when the earliest job still waiting is due (`NULL`: none is).
pub(super) const PROMOTE: &str = r#"
WITH probe AS MATERIALIZED (
    SELECT EXISTS (
        SELECT 1 FROM fairq.jobs j
        WHERE j.queue = $1 AND j.round IS NULL AND j.state IN ('scheduled', 'retrying')
          AND j.due_at <= $2
    ) AS due
),
gate AS MATERIALIZED (
    SELECT CASE WHEN p.due THEN pg_try_advisory_xact_lock(hashtextextended($4, 0))
                ELSE false END AS ok
    FROM probe p
),
due AS (
    SELECT j.id, j.queue, j.key, j.due_at, j.due_seq
    FROM fairq.jobs j
    WHERE j.queue = $1 AND j.round IS NULL AND j.state IN ('scheduled', 'retrying')
      AND j.due_at <= $2 AND (SELECT g.ok FROM gate g)
    ORDER BY j.due_at, j.due_seq
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
ranked AS (
    SELECT d.*, row_number() OVER (PARTITION BY d.key ORDER BY d.due_at, d.due_seq) AS rn
    FROM due d
),
based AS (
    SELECT r.*,
           CASE WHEN r.rn = 1 THEN KEY_TAIL END AS head_base
    FROM ranked r
),
placed AS (
    SELECT p.id, p.round, nextval('fairq.job_ids') AS seq
    FROM (SELECT b.id, max(b.head_base) OVER (PARTITION BY b.key) + b.rn AS round,
                 b.due_at, b.due_seq
          FROM based b
          ORDER BY b.due_at, b.due_seq) p
),
promoted AS (
    UPDATE fairq.jobs j SET round = p.round, ready_seq = p.seq
    FROM placed p
    WHERE j.id = p.id
    RETURNING j.id
),
woke AS (
    SELECT pg_notify($5, $1) FROM (SELECT 1 FROM promoted LIMIT 1) x
)
SELECT (SELECT count(*) FROM promoted) AS promoted,
       (SELECT count(*) FROM woke) AS woke,
       (SELECT p.due FROM probe p) AND NOT (SELECT g.ok FROM gate g) AS locked_out,
       (SELECT min(j.due_at) FROM fairq.jobs j
        WHERE j.queue = $1 AND j.round IS NULL AND j.state IN ('scheduled', 'retrying')
          AND j.id NOT IN (SELECT p.id FROM promoted p)) AS next_due
"#;

/// The claim: the first `limit` ready jobs of the queue in fair order that no other session
/// holds, leased to the caller. When the claim reaches a round no claim had reached, that
/// round is recorded as the queue's current one (a claim that takes every ready job also
/// passes the places of purged jobs). Parameters: queue, limit, now, deadline.
///
/// The update reaches each locked row by its tuple id (`ctid`), which the lock keeps stable
/// until the update, instead of descending the primary key a second time per job. The ids go
/// to it as an array (`ctid = ANY`), which only a TID scan can serve: joined to `picked`, the
/// planner costed the join by the table's size, and once a draining queue's table held a few
/// tens of thousands of rows or fewer it read the whole table and hashed it (a claim of 544
/// jobs from 20,000: 12.7 ms, against 4.4 ms by tuple id). The id is compared too (a hashed
/// lookup in `picked`): should the tuple id ever name another version, that job is left ready
/// (its lock ends with the statement) rather than claimed twice.
///
/// A paused queue (a row in `paused`, read once per claim) hands out nothing, and its claim
/// passes no purged job's place.
///
/// A claimed job keeps its round and its place in `jobs_ready` (the scan passes over running
/// jobs by their state): the update changes no indexed column, so PostgreSQL writes the new
/// version on the same page without new index entries (a HOT update), where changing the
/// round cost an entry in the primary key and one in an index of running jobs per claim.
pub(super) const CLAIM: &str = r#"
WITH held AS MATERIALIZED (
    SELECT EXISTS (SELECT 1 FROM fairq.paused p WHERE p.queue = $1) AS paused
),
picked AS (
    SELECT j.ctid AS at, j.id
    FROM fairq.jobs j
    WHERE j.queue = $1 AND j.round IS NOT NULL AND j.state <> 'running'
      AND NOT (SELECT h.paused FROM held h)
    ORDER BY j.round, j.ready_seq
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE fairq.jobs j
    SET state = 'running',
        attempts = j.attempts + 1, token = j.token + 1,
        lease_deadline = $4, claimed_at = $3
    WHERE j.ctid = ANY (ARRAY(SELECT p.at FROM picked p))
      AND j.id IN (SELECT p.id FROM picked p)
    RETURNING j.id, j.token, j.attempts, j.lease_deadline, j.kind, j.key, j.payload,
              j.enqueued_at, j.due_at, j.retry, j.metadata, j.payload_json,
              j.round AS was_round, j.ready_seq AS was_seq
),
advanced AS (
    INSERT INTO fairq.rounds (queue, round)
    SELECT $1, m.top
    FROM (SELECT GREATEST(
                 (SELECT max(c.was_round) FROM claimed c),
                 -- A claim that runs out of ready jobs has passed every purged job's place.
                 CASE WHEN (SELECT count(*) FROM claimed) < $2
                      THEN (SELECT max(g.round) FROM fairq.ghosts g WHERE g.queue = $1) END
             ) AS top) m
    WHERE m.top > COALESCE((SELECT max(r.round) FROM fairq.rounds r WHERE r.queue = $1), 0)
      -- A paused queue's claim took nothing because it was held, not because it ran out.
      AND NOT (SELECT h.paused FROM held h)
    ON CONFLICT DO NOTHING
)
SELECT JOB_COLUMNS FROM claimed ORDER BY was_round, was_seq
"#;

/// Settles a batch of attempts with one statement: each entry names a job, the token of the
/// lease it ran under and core's verdict (`succeeded`, `retry` at `run_at`, or `dead` with a
/// reason), and applies only while the job is still running under that token (fencing per
/// row). Successes and deaths move to the archive; retries wait for their time; the blocked
/// dependents of each success become due at the later of their own `run_at` (kept while they
/// are blocked) and now, as `Lifecycle::dependency_succeeded` rules: one due now goes after
/// the jobs already waiting (`EVENT` numbering), a delayed one waits by its id, as a delayed
/// job does.
///
/// Parameters: id[], token[], verdict[], run_at[], reason[], message[] (one element per
/// entry, no (id, token) pair twice), now, rescue (the entries are expired leases: the lease must still be
/// expired, and no run time is recorded), due channel, and the number of entries that earlier
/// statements of the same event sent (a rescue of more than one batch): positions, and so the
/// `due_seq` of the jobs made due now, continue from it, so a later batch's jobs go after an
/// earlier batch's.
///
/// Rows: `(1, id, queue, NULL, token)` for each job archived, `(2, id, queue, due_at, token)`
/// for each job sent to retry, `(3, id, queue, due_at, NULL)` for each dependent released, `(4,
/// id, NULL, NULL, NULL, state...)` with the lifecycle columns of each job an entry named but
/// did not change, as the statement found it (to explain the refusal; an unknown job has no
/// row), and one `(0, ...)` row that carries the count of notifications.
///
/// A store that does not keep succeeded jobs (`KEEP_SUCCEEDED` rendered as `false`) deletes
/// them instead of archiving them, unless they have dependents (a dependent's enqueue and the
/// repair of a raced release look their dependency up in the archive), and appends their
/// counters to `stats_settled`, one row per queue.
///
/// Refused entries are looked up by id (`LATERAL`), never through a join the planner could run
/// as a scan of both tables: such a scan, which stops at the first live row, cost most of a
/// settlement's time while the head of the table was full of settled (dead) rows.
///
/// The entries are taken in id order (each keeps its position, `ord`, for the order of the
/// jobs it makes due): the plan looks each up by primary key in the order of `input`, so the
/// archived and deleted jobs' row locks are taken in id order, then the retried jobs' (as
/// [`HEARTBEAT`] and [`RELEASE`] take theirs), and a worker's settlement and its heartbeat of
/// the same jobs, each waiting for a row the other holds, do not deadlock. (A batch that
/// mixes retries with other verdicts locks them in two runs; should that ever meet a
/// heartbeat in a circle, the server's deadlock error is transient and the settlement is sent
/// again.)
pub(super) const SETTLE: &str = r#"
WITH input AS (
    SELECT t.id, t.token, t.verdict, t.run_at, t.reason, t.message, t.ord + $10::int8 AS ord
    FROM unnest($1::int8[], $2::int8[], $3::text[], $4::int8[], $5::text[], $6::text[])
         WITH ORDINALITY AS t(id, token, verdict, run_at, reason, message, ord)
    ORDER BY t.id
),
gone AS (
    DELETE FROM fairq.jobs j USING input i
    WHERE j.id = i.id AND j.token = i.token AND STILL_RUNNING AND i.verdict <> 'retry'
      AND (NOT $8 OR j.lease_deadline <= $7)
    RETURNING j.*, i.verdict, i.reason, i.message, i.ord
),
archived AS (
    INSERT INTO fairq.archive (id, queue, kind, key, payload, payload_json, metadata, retry, unique_key,
        depends_on, has_dependents, state, dead_reason, attempts, token, enqueued_at,
        claimed_at, finished_at, failures, runs_ms, last_error, due_at)
    SELECT g.id, g.queue, g.kind, g.key, g.payload, g.payload_json, g.metadata, g.retry, g.unique_key,
        g.depends_on, g.has_dependents,
        CASE WHEN g.verdict = 'succeeded' THEN 'succeeded' ELSE 'dead' END, g.reason,
        g.attempts, g.token, g.enqueued_at, g.claimed_at, $7,
        g.failures + CASE WHEN g.verdict = 'dead' THEN 1 ELSE 0 END,
        CASE WHEN $8 THEN g.runs_ms
             ELSE g.runs_ms || GREATEST($7 - COALESCE(g.claimed_at, $7), 0) END,
        CASE WHEN g.verdict = 'dead' THEN g.message ELSE g.last_error END,
        g.due_at
    FROM gone g
    WHERE KEEP_SUCCEEDED OR g.verdict <> 'succeeded' OR g.has_dependents
),
dropped AS (
    SELECT g.queue, g.attempts, g.failures,
           g.runs_ms || GREATEST($7 - COALESCE(g.claimed_at, $7), 0) AS runs_ms
    FROM gone g
    WHERE NOT KEEP_SUCCEEDED AND g.verdict = 'succeeded' AND NOT g.has_dependents
),
tallied AS (
    INSERT INTO fairq.stats_settled (queue, ok, retries, failures, runs_ms)
    SELECT d.queue, count(*), sum(GREATEST(d.attempts - 1, 0)), sum(d.failures),
           (SELECT array_agg(u.ms) FROM dropped e CROSS JOIN LATERAL unnest(e.runs_ms) AS u(ms)
            WHERE e.queue = d.queue)
    FROM dropped d GROUP BY d.queue
),
retried AS (
    UPDATE fairq.jobs j
    SET state = 'retrying', run_at = i.run_at, due_at = i.run_at, round = NULL, ready_seq = NULL,
        due_seq = CASE WHEN i.run_at <= $7 THEN EVENT + (i.ord << 20) ELSE j.id END,
        lease_deadline = NULL, failures = j.failures + 1,
        runs_ms = CASE WHEN $8 THEN j.runs_ms
                       ELSE j.runs_ms || GREATEST($7 - COALESCE(j.claimed_at, $7), 0) END,
        error_since = COALESCE(j.error_since, $7), last_error = i.message
    FROM input i
    WHERE j.id = i.id AND j.token = i.token AND STILL_RUNNING AND i.verdict = 'retry'
      AND (NOT $8 OR j.lease_deadline <= $7)
    RETURNING j.id, j.queue, j.due_at, j.token
),
freed AS (
    UPDATE fairq.jobs d
    SET state = 'scheduled', run_at = GREATEST(d.run_at, $7), due_at = GREATEST(d.run_at, $7),
        due_seq = CASE WHEN d.run_at > $7 THEN d.id ELSE EVENT + (f.ord << 20) + f.rank END
    FROM (SELECT b.id, g.ord, row_number() OVER (PARTITION BY g.id ORDER BY b.id) AS rank
          FROM gone g
          JOIN fairq.jobs b ON b.depends_on = g.id AND b.state = 'blocked'
          WHERE g.verdict = 'succeeded' AND g.has_dependents) f
    -- On the row, not only in the snapshot (see `RELEASE_STRAGGLERS`).
    WHERE d.id = f.id AND d.state = 'blocked'
    RETURNING d.id, d.queue, d.due_at
),
woke AS (
    SELECT pg_notify($9, m.at::text || ' ' || m.queue)
    FROM (SELECT x.queue, min(x.at) AS at
          FROM (SELECT r.queue, r.due_at AS at FROM retried r
                UNION ALL SELECT f.queue, f.due_at FROM freed f) x
          GROUP BY x.queue) m
)
SELECT 1 AS tag, g.id, g.queue, NULL::int8 AS at, g.token, NULL::text AS state,
       NULL::int8 AS run_at, NULL::int8 AS attempts, NULL::int8 AS last_token,
       NULL::int8 AS lease_deadline, NULL::int8 AS finished_at, NULL::text AS dead_reason
FROM gone g
UNION ALL
SELECT 2, r.id, r.queue, r.due_at, r.token, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM retried r
UNION ALL
SELECT 3, f.id, f.queue, f.due_at, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM freed f
UNION ALL
SELECT 4, s.id, NULL, NULL, NULL, s.state, s.run_at, s.attempts, s.token, s.lease_deadline,
       s.finished_at, s.dead_reason
FROM (SELECT DISTINCT x.id FROM input x
      WHERE NOT EXISTS (SELECT 1 FROM gone g WHERE g.id = x.id AND g.token = x.token)
        AND NOT EXISTS (SELECT 1 FROM retried r WHERE r.id = x.id AND r.token = x.token)) i
CROSS JOIN LATERAL (
      SELECT j.id, j.state, j.run_at, j.attempts, j.token, j.lease_deadline,
             NULL::int8 AS finished_at, NULL::text AS dead_reason
      FROM fairq.jobs j WHERE j.id = i.id
      UNION ALL
      SELECT a.id, a.state, 0, a.attempts, a.token, NULL, a.finished_at, a.dead_reason
      FROM fairq.archive a WHERE a.id = i.id) s
UNION ALL
SELECT 0, count(*), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM woke
"#;

/// Hands claimed jobs back before they ran: each whose lease is still current becomes due
/// now (after the jobs already waiting, in the order given) with its attempt refunded; its
/// token stays, so the lease it was handed out under is fenced. Parameters: id[], token[]
/// (no pair twice), now, due channel. Rows: the jobs handed back, with their tokens, states
/// and attempts. The rows are locked in id order (see [`SETTLE`]).
pub(super) const RELEASE: &str = r#"
WITH input AS (
    SELECT * FROM unnest($1::int8[], $2::int8[]) WITH ORDINALITY AS t(id, token, ord)
    ORDER BY t.id
),
released AS (
    UPDATE fairq.jobs j
    SET state = CASE WHEN j.attempts > 1 THEN 'retrying' ELSE 'scheduled' END,
        attempts = j.attempts - 1, run_at = $3, due_at = $3, round = NULL, ready_seq = NULL,
        due_seq = EVENT + (i.ord << 20), lease_deadline = NULL
    FROM input i
    WHERE j.id = i.id AND j.token = i.token AND STILL_RUNNING
    RETURNING j.id, j.queue, j.token, j.state, j.attempts
),
woke AS (
    SELECT pg_notify($4, $3::int8::text || ' ' || q.queue)
    FROM (SELECT DISTINCT r.queue FROM released r) q
)
SELECT r.id, r.queue, r.token, r.state, r.attempts, (SELECT count(*) FROM woke)
FROM released r
"#;

/// Extends leases: each job still running under the given token gets
/// `max(its deadline, the new one)`. The other rows are the refused entries. A lease
/// deadline is in no index, so this is a HOT update. Parameters: id[], token[] (in id order,
/// so the rows are locked in id order, as [`SETTLE`] locks them), deadline.
pub(super) const HEARTBEAT: &str = r#"
UPDATE fairq.jobs j SET lease_deadline = GREATEST(j.lease_deadline, $3)
FROM unnest($1::int8[], $2::int8[]) AS i(id, token)
WHERE j.id = i.id AND j.token = i.token AND STILL_RUNNING
RETURNING j.id, j.token, j.lease_deadline
"#;

/// Expired leases of a queue, in id order. Parameters: queue, now, limit.
pub(super) const EXPIRED: &str = r#"
SELECT id, attempts, token, retry
FROM fairq.jobs
WHERE queue = $1 AND round IS NOT NULL
  AND round <= (SELECT max(r.round) FROM fairq.rounds r WHERE r.queue = $1)
  AND state = 'running' AND lease_deadline <= $2
ORDER BY id
LIMIT $3
"#;

/// Forgets all but the newest round of a queue, and the purged jobs' places that claims
/// have passed. Parameter: queue.
pub(super) const TRIM_ROUNDS: &str = r#"
WITH current AS MATERIALIZED (
    SELECT max(x.round) AS round FROM fairq.rounds x WHERE x.queue = $1
),
ghosts AS (
    DELETE FROM fairq.ghosts g
    WHERE g.queue = $1 AND g.round <= (SELECT c.round FROM current c)
)
DELETE FROM fairq.rounds r
WHERE r.queue = $1 AND r.round < (SELECT c.round FROM current c)
"#;

/// Folds the counters that settlements appended for a queue's succeeded jobs they did not
/// keep into the queue's base counters: a row per queue that only this fold, `prune` and
/// `purge` write, so settlements never wait on it. Parameter: queue.
pub(super) const FOLD_SETTLED: &str = r#"
WITH gone AS (
    DELETE FROM fairq.stats_settled WHERE queue = $1
    RETURNING queue, ok, retries, failures, runs_ms
),
kept AS (
    INSERT INTO fairq.stats_base AS b (queue, ok, retries, dead, failures)
    SELECT g.queue, sum(g.ok), sum(g.retries), 0, sum(g.failures) FROM gone g GROUP BY g.queue
    ON CONFLICT (queue) DO UPDATE SET ok = b.ok + EXCLUDED.ok,
        retries = b.retries + EXCLUDED.retries, failures = b.failures + EXCLUDED.failures
),
KEEP_RUNS
SELECT count(*) FROM gone
"#;

/// Releases blocked jobs of a queue whose dependency has succeeded: a repair for a finish
/// that raced with the enqueue of its dependent. Each is due at the later of its own `run_at`
/// and now, as in [`SETTLE`]. Parameters: queue, now, due channel.
///
/// The update checks `state = 'blocked'` on the row it locks as well as in the subquery: a job
/// that another session released and a worker claimed after this statement's snapshot would
/// otherwise be set back to `scheduled` while it runs (claimable twice).
///
/// A blocked job has no round (the `jobs_round_ready` check), so `round IS NULL` changes
/// nothing but lets the planner find the queue's blocked jobs through `jobs_waiting` by
/// queue. Without it, the only index was `jobs_blocked`, by dependency and for every queue,
/// and on a table whose statistics were taken while it was empty (a store vacuumed empty,
/// with autovacuum off) the planner read the whole table instead: 26 ms at each worker's
/// start on a 54 MB table holding 3,000 jobs.
pub(super) const RELEASE_STRAGGLERS: &str = r#"
WITH freed AS (
    UPDATE fairq.jobs j
    SET state = 'scheduled', run_at = GREATEST(j.run_at, $2), due_at = GREATEST(j.run_at, $2),
        due_seq = CASE WHEN j.run_at > $2 THEN j.id ELSE EVENT + (s.n << 20) END
    FROM (SELECT b.id, row_number() OVER (ORDER BY b.id) AS n
          FROM fairq.jobs b
          JOIN fairq.archive a ON a.id = b.depends_on AND a.state = 'succeeded'
          WHERE b.queue = $1 AND b.round IS NULL AND b.depends_on IS NOT NULL
            AND b.state = 'blocked') s
    -- Checked again on the row: the subquery read the statement's snapshot, and under READ
    -- COMMITTED a row another session changed meanwhile (released and claimed) is re-checked
    -- against this condition only.
    WHERE j.id = s.id AND j.state = 'blocked'
    RETURNING j.id, j.due_at
),
woke AS (
    SELECT pg_notify($3, m.at::text || ' ' || $1)
    FROM (SELECT min(f.due_at) AS at FROM freed f HAVING count(*) > 0) m
)
SELECT f.id, (SELECT count(*) FROM woke) FROM freed f
"#;

/// Whether a queue has a ready job, when its next waiting job is due, and whether the queue
/// is paused. Parameter: queue.
pub(super) const DUE: &str = r#"
SELECT EXISTS (SELECT 1 FROM fairq.jobs
               WHERE queue = $1 AND round IS NOT NULL AND state <> 'running') AS ready,
       (SELECT min(due_at) FROM fairq.jobs
        WHERE queue = $1 AND round IS NULL AND state IN ('scheduled', 'retrying')) AS next_due,
       EXISTS (SELECT 1 FROM fairq.paused WHERE queue = $1) AS paused
"#;

/// Holds back a queue's retries: every retrying job due before `$2` becomes due at `$2`, and
/// one that already had a place in the fair order gives it up (it gets a new one when it is
/// due again). The place it gave up stays taken, as a ghost (see `GHOSTS`): its key's later
/// jobs keep theirs behind it, and its own new place comes after them, as in the reference
/// store, where the old entry stays in the fair queue, stale. A held retry waits as a delayed
/// job does, by its id (`due_seq`), whatever event made it due before: the reference store
/// files held jobs at `(until, id)`. Like every statement that makes jobs wait, it notifies
/// the due channel (`<until> <queue>`), so other stores promote them at `until` (one that
/// believed nothing waits would not). `$1` queue, `$2` until, `$3` due channel. Returns how
/// many moved.
pub(super) const HOLD_RETRIES: &str = r#"
WITH picked AS (
    SELECT j.id, j.queue, j.key, j.round
    FROM fairq.jobs j
    WHERE j.queue = $1 AND j.state = 'retrying' AND j.run_at < $2
    FOR UPDATE
),
held AS (
    UPDATE fairq.jobs j
    SET run_at = $2, due_at = $2, due_seq = j.id, round = NULL, ready_seq = NULL
    FROM picked p
    WHERE j.id = p.id
    RETURNING p.queue, p.key, p.round
),
woke AS (
    SELECT pg_notify($3, $2::int8::text || ' ' || $1) FROM (SELECT 1 FROM held LIMIT 1) x
),
gone AS (
    SELECT h.queue, h.key, h.round FROM held h
),
GHOSTS
SELECT (SELECT count(*) FROM held), (SELECT count(*) FROM woke)
"#;
