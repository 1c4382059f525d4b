//! Statements of the operator calls: get, list, statistics, purge, prune, revival.

/// One job, live or finished. Parameter: id.
pub(super) const GET: &str = "SELECT LIVE_INFO FROM fairq.jobs WHERE id = $1 \
                   UNION ALL SELECT DONE_INFO FROM fairq.archive WHERE id = $1";

/// Several jobs, live or finished (to explain refused entries of a batch). Parameter: id[].
pub(super) const GET_MANY: &str = "SELECT LIVE_INFO FROM fairq.jobs WHERE id = ANY($1::int8[]) \
                   UNION ALL SELECT DONE_INFO FROM fairq.archive WHERE id = ANY($1::int8[])";

/// A page of jobs. Parameters: queue (or NULL), state (or NULL), after id, limit.
pub(super) const LIST: &str = r#"
(SELECT LIVE_INFO FROM fairq.jobs
 WHERE id > $3 AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR state = $2)
 ORDER BY id LIMIT $4)
UNION ALL
(SELECT DONE_INFO FROM fairq.archive
 WHERE id > $3 AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR state = $2)
 ORDER BY id LIMIT $4)
ORDER BY id
LIMIT $4
"#;

/// Remembers the places that deleted live jobs (the `gone` rows of the statement it is
/// part of) held in the fair order, where they are beyond the queue's current round, so a
/// claim that passes them records the round as reached.
pub(super) const GHOSTS: &str = r#"
ghosts AS (
    INSERT INTO fairq.ghosts (queue, key, round)
    SELECT g.queue, g.key, max(g.round)
    FROM gone g
    WHERE g.round IS NOT NULL
    GROUP BY g.queue, g.key
    HAVING max(g.round) > COALESCE(
        (SELECT max(r.round) FROM fairq.rounds r WHERE r.queue = g.queue), 0)
)
"#;

/// Adds the counters of the rows in the `gone` CTE (queue, state, attempts, failures,
/// runs_ms) to the per-queue base counters, so statistics outlive deleted jobs.
pub(super) const FOLD: &str = r#"
tally AS (
    SELECT g.queue,
        count(*) FILTER (WHERE g.state = 'succeeded') AS ok,
        COALESCE(sum(GREATEST(g.attempts - 1, 0))
                 FILTER (WHERE g.state IN ('succeeded', 'dead')), 0)::int8 AS retries,
        count(*) FILTER (WHERE g.state = 'dead') AS dead,
        COALESCE(sum(g.failures), 0)::int8 AS failures
    FROM gone g GROUP BY g.queue
),
kept AS (
    INSERT INTO fairq.stats_base AS b (queue, ok, retries, dead, failures)
    SELECT t.queue, t.ok, t.retries, t.dead, t.failures FROM tally t
    ON CONFLICT (queue) DO UPDATE SET ok = b.ok + EXCLUDED.ok,
        retries = b.retries + EXCLUDED.retries, dead = b.dead + EXCLUDED.dead,
        failures = b.failures + EXCLUDED.failures
),
KEEP_RUNS
"#;

/// Adds the attempt durations of the rows in the `gone` CTE (queue, runs_ms) to the
/// per-queue counts of durations.
pub(super) const KEEP_RUNS: &str = r#"
kept_runs AS (
    INSERT INTO fairq.stats_runs AS s (queue, ms, n)
    SELECT g.queue, u.ms, count(*)
    FROM gone g CROSS JOIN LATERAL unnest(g.runs_ms) AS u(ms)
    GROUP BY g.queue, u.ms
    ON CONFLICT (queue, ms) DO UPDATE SET n = s.n + EXCLUDED.n
)
"#;

/// Deletes unfinished jobs that are not running. A ready job whose round claims have not
/// reached keeps its place (a ghost), so its key's next job still queues behind it.
/// Parameters: queue (or NULL), state (or NULL). Answers how many went and the
/// dependencies of the blocked ones ([`DEPENDED_LOCK`] and [`DEPENDED_CLEAR`] take them).
pub(super) const PURGE_LIVE: &str = r#"
WITH gone AS (
    DELETE FROM fairq.jobs
    WHERE state <> 'running' AND ($1::text IS NULL OR queue = $1)
      AND ($2::text IS NULL OR state = $2)
    RETURNING queue, key, round, state, attempts, failures, runs_ms, depends_on
),
FOLD,
GHOSTS
SELECT count(*), GONE_DEPENDENCIES FROM gone
"#;

/// The dependencies of the blocked jobs in the `gone` CTE, as an array (empty for none).
pub(super) const GONE_DEPENDENCIES: &str = "COALESCE(array_agg(DISTINCT depends_on) \
    FILTER (WHERE state = 'blocked' AND depends_on IS NOT NULL), '{}')";

/// Locks live jobs marked as having dependents, in id order, against any other lock: the
/// first of two statements that clear the mark of jobs whose blocked dependents a purge or
/// cancel deleted. Parameter: the dependencies (`GONE_DEPENDENCIES`).
///
/// The mark must not be cleared while an enqueue naming the job is under way: the enqueue
/// holds the job `FOR KEY SHARE` to its commit and writes the mark only when it reads it
/// unset, so a mark cleared under it would stay unset with a new dependent waiting, and the
/// job's success, deleted when recorded, would release no one (a dependent committed after
/// the settlement's snapshot is released by the rescue's repair, which looks for the
/// success in the archive). `FOR UPDATE` conflicts with that lock; `SKIP LOCKED` passes over
/// a job an enqueue holds (or a settlement, a heartbeat) rather than wait for it, and such a
/// job keeps its mark: kept until a prune, as before. A job locked here cannot gain a
/// dependent until this transaction ends, and [`DEPENDED_CLEAR`], a later statement, reads a
/// snapshot holding every dependent committed before the lock.
pub(super) const DEPENDED_LOCK: &str = r#"
SELECT id FROM fairq.jobs WHERE id = ANY($1::int8[]) AND has_dependents
ORDER BY id FOR UPDATE SKIP LOCKED
"#;

/// Clears the mark of the jobs [`DEPENDED_LOCK`] locked that have no blocked dependent left.
/// (A live job's dependents are all blocked: they are released only by its success.)
/// Parameter: the ids locked.
pub(super) const DEPENDED_CLEAR: &str = r#"
UPDATE fairq.jobs j SET has_dependents = false
WHERE j.id = ANY($1::int8[]) AND j.has_dependents
  AND NOT EXISTS (SELECT 1 FROM fairq.jobs d WHERE d.depends_on = j.id AND d.state = 'blocked')
"#;

/// Deletes finished jobs. Parameters: queue (or NULL), state (or NULL).
pub(super) const PURGE_DONE: &str = r#"
WITH gone AS (
    DELETE FROM fairq.archive
    WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR state = $2)
    RETURNING queue, state, attempts, failures, runs_ms
),
FOLD
SELECT count(*) FROM gone
"#;

/// Deletes up to a number of finished jobs that their outcome's retention no longer keeps,
/// folding their counters in. Parameters: succeeded cutoff, dead cutoff (each `NULL` to keep
/// that outcome for good), limit, and the dead jobs to delete, which [`PRUNE_DEAD`] found
/// and locked earlier in the same transaction. A job goes when its finish time is at or
/// before its outcome's cutoff.
///
/// Each outcome is looked up on its own, so one kept much longer than the other costs the
/// lookup of the other nothing beyond the rows in its way: succeeded jobs through the BRIN
/// index on finish times (old dead jobs kept in its ranges are read and passed over, as the
/// pages they sit in would be anyway), dead ones by [`PRUNE_DEAD`]. A `NULL` cutoff turns its
/// lookup off before it reads anything (a one-time filter). The ids go to the delete as an
/// array, so that it reaches each row by its primary key whatever the archive's size; the
/// delete checks each row's outcome and cutoff again. A dead job that a live job depends on
/// (a job blocked on it) is kept while that job waits: `jobs_blocked` indexes `depends_on`.
/// So is a succeeded job that a blocked job names: a dependent enqueued while its dependency
/// was settling can be left blocked by the settlement (it read the jobs before the dependent
/// committed), and the rescue's straggler repair releases it by finding the dependency's
/// success in the archive; deleting that row first would leave the dependent blocked for
/// good. (A dependent that can still be enqueued finds the success and is not blocked.)
pub(super) const PRUNE: &str = r#"
WITH gone AS (
    DELETE FROM fairq.archive
    WHERE id = ANY (ARRAY(
        (SELECT d.id FROM unnest($4::int8[]) AS d(id) LIMIT $3)
        UNION ALL
        (SELECT x.id FROM fairq.archive x
         WHERE $1::int8 IS NOT NULL AND x.state = 'succeeded' AND x.finished_at <= $1::int8
         LIMIT $3)
        LIMIT $3))
      AND ((state = 'succeeded' AND finished_at <= $1::int8
            AND NOT EXISTS (SELECT 1 FROM fairq.jobs w
                            WHERE w.depends_on = archive.id AND w.state = 'blocked'))
           OR (state = 'dead' AND finished_at <= $2::int8
               AND NOT EXISTS (SELECT 1 FROM fairq.jobs w WHERE w.depends_on = archive.id)))
    RETURNING queue, state, attempts, failures, runs_ms
),
FOLD
SELECT count(*) FROM gone
"#;

/// Finds and locks up to a number of dead jobs that died at or before a cutoff and that no
/// live job depends on, for [`PRUNE`] to delete in a later statement of the same
/// transaction. Parameters: dead cutoff, limit.
///
/// Dead jobs are found through `archive_dead_finished`, which holds only dead jobs: the prune
/// reads the entries of the dead jobs it deletes, not the succeeded jobs (however long they
/// are kept) nor every dead job still kept.
///
/// Why two statements: a dependent's enqueue locks its archived dependency's row
/// (`DEPS_ARCHIVED`) until its transaction commits. A delete that waited for that lock
/// checks the row again but reads the dependents in its own, older snapshot, which does not
/// hold the dependent: it would delete the dead job under a dependent that now waits for it
/// for good. Once this statement holds the locks, any such enqueue has committed (and a
/// later one waits for this transaction, then finds the job gone), and [`PRUNE`], a later
/// statement of the transaction, reads the dependents in a snapshot that has them.
pub(super) const PRUNE_DEAD: &str = r#"
SELECT x.id FROM fairq.archive x
WHERE x.state = 'dead' AND x.finished_at <= $1::int8
  AND NOT EXISTS (SELECT 1 FROM fairq.jobs w WHERE w.depends_on = x.id)
LIMIT $2
FOR UPDATE
"#;

/// Removes a queue that has no live job: its finished jobs, its counters, its rounds, the
/// places of its purged jobs and its pause. Changes nothing while the queue has a live job. A job enqueued
/// meanwhile is never touched (no live row is deleted). Parameter: queue.
///
/// One row: whether anything of the queue existed, how many live jobs it has, how many
/// finished jobs went.
///
/// Runs in a transaction that [`QUEUE_LIVE`] ends: a dependent enqueued into the queue holds
/// its dead dependency's archive row locked until it commits, and the delete that waited for
/// it counted the queue's live jobs in a snapshot without the dependent.
pub(super) const REMOVE_QUEUE: &str = r#"
WITH live AS MATERIALIZED (
    SELECT count(*) AS n FROM fairq.jobs WHERE queue = $1
),
known AS MATERIALIZED (
    SELECT (SELECT l.n FROM live l) > 0
        OR EXISTS (SELECT 1 FROM fairq.archive WHERE queue = $1)
        OR EXISTS (SELECT 1 FROM fairq.stats_base WHERE queue = $1)
        OR EXISTS (SELECT 1 FROM fairq.stats_runs WHERE queue = $1)
        OR EXISTS (SELECT 1 FROM fairq.stats_settled WHERE queue = $1)
        OR EXISTS (SELECT 1 FROM fairq.rounds WHERE queue = $1)
        OR EXISTS (SELECT 1 FROM fairq.ghosts WHERE queue = $1)
        OR EXISTS (SELECT 1 FROM fairq.paused WHERE queue = $1) AS yes
),
go AS MATERIALIZED (
    SELECT (SELECT l.n FROM live l) = 0 AND (SELECT k.yes FROM known k) AS yes
),
gone AS (
    DELETE FROM fairq.archive WHERE queue = $1 AND (SELECT g.yes FROM go g) RETURNING 1
),
base AS (DELETE FROM fairq.stats_base WHERE queue = $1 AND (SELECT g.yes FROM go g)),
runs AS (DELETE FROM fairq.stats_runs WHERE queue = $1 AND (SELECT g.yes FROM go g)),
settled AS (DELETE FROM fairq.stats_settled WHERE queue = $1 AND (SELECT g.yes FROM go g)),
rounds AS (DELETE FROM fairq.rounds WHERE queue = $1 AND (SELECT g.yes FROM go g)),
ghosts AS (DELETE FROM fairq.ghosts WHERE queue = $1 AND (SELECT g.yes FROM go g)),
held AS (DELETE FROM fairq.paused WHERE queue = $1 AND (SELECT g.yes FROM go g))
SELECT (SELECT k.yes FROM known k), (SELECT l.n FROM live l), (SELECT count(*) FROM gone)
"#;

/// How many live jobs a queue has, read after [`REMOVE_QUEUE`] in its transaction: in a
/// snapshot that holds every job whose enqueue held a row the removal deleted. Parameter:
/// queue.
pub(super) const QUEUE_LIVE: &str = "SELECT count(*) FROM fairq.jobs WHERE queue = $1";

/// Revives dead jobs (of a queue, or one id): back to the live table, due now (in id order,
/// after the jobs already waiting), attempts reset. Of several dead jobs sharing a unique key
/// only the oldest comes back, and none whose key an unfinished job holds. Parameters: queue
/// (or NULL), id (or NULL), now, due channel.
///
/// The archive rows are locked first (a concurrent revival of the same job waits, then finds
/// it gone), and the insert skips any row whose unique key another transaction took after
/// this statement's snapshot (`ON CONFLICT DO NOTHING`, which waits for that transaction):
/// only the rows that went in leave the archive, so such a job stays dead and the others are
/// revived.
pub(super) const REVIVE: &str = r#"
WITH candidates AS (
    SELECT DISTINCT ON (a.queue, a.unique_key IS NULL, COALESCE(a.unique_key, ''),
                        CASE WHEN a.unique_key IS NULL THEN a.id END) a.id
    FROM fairq.archive a
    WHERE a.state = 'dead' AND ($1::text IS NULL OR a.queue = $1)
      AND ($2::int8 IS NULL OR a.id = $2)
      AND (a.unique_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM fairq.jobs j WHERE j.queue = a.queue AND j.unique_key = a.unique_key))
    ORDER BY a.queue, a.unique_key IS NULL, COALESCE(a.unique_key, ''),
             CASE WHEN a.unique_key IS NULL THEN a.id END, a.id
),
locked AS (
    SELECT a.* FROM fairq.archive a
    WHERE a.id IN (SELECT c.id FROM candidates c) AND a.state = 'dead'
    ORDER BY a.id
    FOR UPDATE
),
revived AS (
    INSERT INTO fairq.jobs (id, queue, kind, key, payload, payload_json, metadata, retry, unique_key,
        depends_on, has_dependents, state, run_at, due_at, due_seq, attempts, token,
        claimed_at, enqueued_at, failures, runs_ms, error_since, last_error)
    SELECT g.id, g.queue, g.kind, g.key, g.payload, g.payload_json, g.metadata, g.retry, g.unique_key,
        g.depends_on, g.has_dependents, 'scheduled', $3, $3,
        EVENT + (row_number() OVER (ORDER BY g.id) << 20), 0, g.token, g.claimed_at,
        g.enqueued_at, 0, '{}', NULL, g.last_error
    FROM locked g
    ON CONFLICT DO NOTHING
    RETURNING id, queue
),
gone AS (
    DELETE FROM fairq.archive a WHERE a.id IN (SELECT r.id FROM revived r) RETURNING a.*
),
FOLD,
woke AS (
    SELECT pg_notify($4, $3::int8::text || ' ' || q.queue) FROM (SELECT DISTINCT queue FROM revived) q
)
SELECT r.queue, count(*), (SELECT count(*) FROM woke) FROM revived r GROUP BY r.queue
"#;

/// Live jobs per queue and state, with failure counters, the oldest error and the earliest
/// run time (which, for retrying jobs, is when the next retry is due).
pub(super) const STATS_LIVE: &str = r#"
SELECT queue, state, count(*), COALESCE(sum(failures), 0)::int8, min(error_since), min(run_at)
FROM fairq.jobs GROUP BY queue, state
"#;

/// One queue's live jobs per state: the jobs with a place in the fair order (ready and
/// running) through `jobs_ready`, the others (waiting for time or a dependency) through
/// `jobs_waiting`, so the read costs the queue's live jobs, never the whole table (a plain
/// `WHERE queue = $1 GROUP BY state` has no index to use). Parameter: queue.
pub(super) const LIVE_COUNTS: &str = r#"
SELECT state, count(*) FROM fairq.jobs WHERE queue = $1 AND round IS NOT NULL GROUP BY state
UNION ALL
SELECT state, count(*) FROM fairq.jobs WHERE queue = $1 AND round IS NULL GROUP BY state
"#;

/// Finished jobs per queue and state, with retry and failure counters.
pub(super) const STATS_DONE: &str = r#"
SELECT queue, state, count(*), COALESCE(sum(GREATEST(attempts - 1, 0)), 0)::int8,
       COALESCE(sum(failures), 0)::int8
FROM fairq.archive GROUP BY queue, state
"#;

/// Counters of deleted jobs: the base counters plus what settlements appended for succeeded
/// jobs they did not keep and the rescuer has not folded in yet.
pub(super) const STATS_BASE: &str = r#"
SELECT queue, sum(ok)::int8, sum(retries)::int8, sum(dead)::int8, sum(failures)::int8 FROM (
    SELECT queue, ok, retries, dead, failures FROM fairq.stats_base
    UNION ALL
    SELECT queue, ok, retries, 0, failures FROM fairq.stats_settled
) x GROUP BY queue
"#;

/// Attempt durations per queue: (queue, ms, how many).
pub(super) const STATS_RUNS: &str = r#"
SELECT queue, ms, sum(n)::int8 FROM (
    SELECT queue, unnest(runs_ms) AS ms, 1::int8 AS n FROM fairq.jobs
    UNION ALL
    SELECT queue, unnest(runs_ms) AS ms, 1::int8 AS n FROM fairq.archive
    UNION ALL
    SELECT queue, ms, n FROM fairq.stats_runs
    UNION ALL
    SELECT queue, unnest(runs_ms) AS ms, 1::int8 AS n FROM fairq.stats_settled
) x GROUP BY queue, ms
"#;
