//! Every statement the store runs, written for the default schema and rendered once per
//! store for its own schema name.
//!
//! Times (`now`, deadlines) are always parameters read from the store's clock, never the
//! server's `now()`, so tests can drive time and every node agrees with its own clock.

use crate::schema::SchemaName;

/// Columns of a claimed job, in the order [`crate::rows::job`] reads them.
const JOB_COLUMNS: &str = "id, token, attempts, lease_deadline, kind, key, payload, \
                           enqueued_at, due_at, retry, metadata";

/// Columns of a live job as an operator sees it ([`crate::rows::info`]).
const LIVE_INFO: &str = "id, queue, kind, key, state, run_at, attempts, token, lease_deadline, \
                         NULL::int8 AS finished_at, NULL::text AS dead_reason, enqueued_at, \
                         last_error, unique_key, depends_on, payload, metadata";

/// The same columns for a finished job.
const DONE_INFO: &str = "id, queue, kind, key, state, 0::int8 AS run_at, attempts, token, \
                         NULL::int8 AS lease_deadline, finished_at, dead_reason, enqueued_at, \
                         last_error, unique_key, depends_on, payload, metadata";

/// Batch insert. Parameters: queue[], kind[], key[], payload[], metadata[], retry[],
/// unique_key[], depends_on[], blocked[], run_at[], now, notification channel.
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
const ENQUEUE: &str = r#"
WITH input AS (
    SELECT t.*, (NOT t.blocked AND t.run_at <= $11) AS ready
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::jsonb[], $6::jsonb[],
                $7::text[], $8::int8[], $9::bool[], $10::int8[])
         WITH ORDINALITY AS t(queue, kind, key, payload, metadata, retry, unique_key,
                              depends_on, blocked, run_at, ord)
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
           CASE WHEN r.ready AND r.rn = 1 THEN GREATEST(
               (SELECT max(c.round) FROM fairq.rounds c WHERE c.queue = r.queue),
               (SELECT max(j.round) FROM fairq.jobs j
                WHERE r.key IS NOT NULL AND j.queue = r.queue AND j.key = r.key
                  AND j.round IS NOT NULL),
               (SELECT max(j.round) FROM fairq.jobs j
                WHERE r.key IS NULL AND j.queue = r.queue AND j.key IS NULL
                  AND j.round IS NOT NULL),
               0) END AS head_base
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
    INSERT INTO fairq.jobs (id, queue, kind, key, payload, metadata, retry, unique_key,
                            depends_on, state, run_at, due_at, round, ready_seq, enqueued_at)
    SELECT p.id, p.queue, p.kind, p.key, p.payload, p.metadata, p.retry, p.unique_key,
           p.depends_on, CASE WHEN p.blocked THEN 'blocked' ELSE 'scheduled' END,
           p.run_at, p.run_at, p.round, p.seq, $11
    FROM placed p
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL DO NOTHING
    RETURNING id, queue, round
),
woke AS (
    SELECT pg_notify($12, q.queue)
    FROM (SELECT DISTINCT n.queue FROM ins n WHERE n.round IS NOT NULL) q
)
SELECT 1 AS kind, n.id, NULL::int8 AS ord, (SELECT count(*) FROM woke) AS woke FROM ins n
UNION ALL
SELECT 2, f.id, f.ord, 0 FROM fresh f
UNION ALL
SELECT 3, (SELECT j.id FROM fairq.jobs j
           WHERE j.queue = i.queue AND j.unique_key = i.unique_key), i.ord, 0
FROM input i
WHERE i.unique_key IS NOT NULL
"#;

/// Marks live dependencies as having dependents (locking them against a concurrent finish).
const DEPS_LIVE: &str = r#"
UPDATE fairq.jobs SET has_dependents = true WHERE id = ANY($1::int8[]) RETURNING id
"#;

/// Looks up finished dependencies, marking them too (a dead one may be revived).
const DEPS_ARCHIVED: &str = r#"
UPDATE fairq.archive SET has_dependents = true WHERE id = ANY($1::int8[]) RETURNING id, state
"#;

/// Ids of unfinished jobs holding unique keys. Parameters: queue[], unique_key[].
const UNIQUE_HOLDERS: &str = r#"
SELECT j.queue, j.unique_key, j.id
FROM fairq.jobs j
JOIN unnest($1::text[], $2::text[]) AS t(queue, unique_key)
  ON j.queue = t.queue AND j.unique_key = t.unique_key
"#;

/// Deletes rows this call inserted (undoing a batch that hit a duplicate).
const UNDO: &str = "DELETE FROM fairq.jobs WHERE id = ANY($1::int8[])";

/// Gives a round to every due job of a queue that waits for one (delayed jobs whose time
/// came, retries, released dependents, revived jobs), oldest due first. Only one session per
/// queue promotes at a time (a try-lock; the others skip, the holder does the work), so two
/// promoters never hand out the same key's rounds twice. Parameters: queue, now, limit,
/// lock key, channel.
const PROMOTE: &str = r#"
WITH gate AS MATERIALIZED (
    SELECT pg_try_advisory_xact_lock(hashtextextended($4, 0)) AS ok
),
due AS (
    SELECT j.id, j.key, j.due_at
    FROM fairq.jobs j
    WHERE j.queue = $1 AND j.round IS NULL AND j.state IN ('scheduled', 'retrying')
      AND j.due_at <= $2 AND (SELECT g.ok FROM gate g)
    ORDER BY j.due_at, j.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
),
ranked AS (
    SELECT d.*, row_number() OVER (PARTITION BY d.key ORDER BY d.due_at, d.id) AS rn
    FROM due d
),
based AS (
    SELECT r.*,
           CASE WHEN r.rn = 1 THEN GREATEST(
               (SELECT max(c.round) FROM fairq.rounds c WHERE c.queue = $1),
               (SELECT max(j.round) FROM fairq.jobs j
                WHERE r.key IS NOT NULL AND j.queue = $1 AND j.key = r.key
                  AND j.round IS NOT NULL),
               (SELECT max(j.round) FROM fairq.jobs j
                WHERE r.key IS NULL AND j.queue = $1 AND j.key IS NULL AND j.round IS NOT NULL),
               0) END AS head_base
    FROM ranked r
),
placed AS (
    SELECT p.id, p.round, nextval('fairq.job_ids') AS seq
    FROM (SELECT b.id, max(b.head_base) OVER (PARTITION BY b.key) + b.rn AS round,
                 b.due_at
          FROM based b
          ORDER BY b.due_at, b.id) p
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
SELECT (SELECT count(*) FROM promoted) AS promoted, (SELECT count(*) FROM woke) AS woke
"#;

/// The claim: the first `limit` ready jobs of the queue in fair order that no other session
/// holds, leased to the caller. When the claim reaches a round no claim had reached, that
/// round is recorded as the queue's current one. Parameters: queue, limit, now, deadline.
const CLAIM: &str = r#"
WITH picked AS (
    SELECT j.id, j.round, j.ready_seq
    FROM fairq.jobs j
    WHERE j.queue = $1 AND j.round IS NOT NULL
    ORDER BY j.round, j.ready_seq
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE fairq.jobs j
    SET state = 'running', round = NULL, ready_seq = NULL,
        attempts = j.attempts + 1, token = j.token + 1,
        lease_deadline = $4, claimed_at = $3
    FROM picked p
    WHERE j.id = p.id
    RETURNING j.id, j.token, j.attempts, j.lease_deadline, j.kind, j.key, j.payload,
              j.enqueued_at, j.due_at, j.retry, j.metadata,
              p.round AS was_round, p.ready_seq AS was_seq
),
advanced AS (
    INSERT INTO fairq.rounds (queue, round)
    SELECT $1, m.top FROM (SELECT max(c.was_round) AS top FROM claimed c) m
    WHERE m.top > COALESCE((SELECT max(r.round) FROM fairq.rounds r WHERE r.queue = $1), 0)
    ON CONFLICT DO NOTHING
)
SELECT JOB_COLUMNS FROM claimed ORDER BY was_round, was_seq
"#;

/// Completes a batch of claims: each job whose lease token still matches moves to the
/// archive. Parameters: id[], token[], now.
const COMPLETE: &str = r#"
WITH input AS (
    SELECT * FROM unnest($1::int8[], $2::int8[]) AS t(id, token)
),
done AS (
    DELETE FROM fairq.jobs j USING input i
    WHERE j.id = i.id AND j.token = i.token AND j.state = 'running'
    RETURNING j.*
),
archived AS (
    INSERT INTO fairq.archive (id, queue, kind, key, payload, metadata, retry, unique_key,
        depends_on, has_dependents, state, dead_reason, attempts, token, enqueued_at,
        claimed_at, finished_at, failures, runs_ms, last_error)
    SELECT d.id, d.queue, d.kind, d.key, d.payload, d.metadata, d.retry, d.unique_key,
        d.depends_on, d.has_dependents, 'succeeded', NULL, d.attempts, d.token, d.enqueued_at,
        d.claimed_at, $3, d.failures,
        d.runs_ms || GREATEST($3 - COALESCE(d.claimed_at, $3), 0), d.last_error
    FROM done d
)
SELECT d.id, d.has_dependents FROM done d
"#;

/// Releases the jobs blocked on the given (succeeded) jobs. Parameters: id[], now.
const RELEASE: &str = r#"
UPDATE fairq.jobs SET state = 'scheduled', run_at = 0, due_at = $2
WHERE depends_on = ANY($1::int8[]) AND state = 'blocked'
RETURNING queue
"#;

/// The queues holding blocked dependents of the given jobs. Parameter: parent id[].
const RELEASE_QUEUES: &str = r#"
SELECT DISTINCT queue FROM fairq.jobs
WHERE depends_on = ANY($1::int8[]) AND state = 'blocked'
"#;

/// Releases blocked jobs of a queue whose dependency has succeeded: a repair for a finish
/// that raced with the enqueue of its dependent. Parameters: queue, now.
const RELEASE_STRAGGLERS: &str = r#"
UPDATE fairq.jobs j SET state = 'scheduled', run_at = 0, due_at = $2
FROM fairq.archive a
WHERE j.queue = $1 AND j.state = 'blocked' AND a.id = j.depends_on AND a.state = 'succeeded'
RETURNING j.id
"#;

/// Extends a lease. Parameters: id, token, new deadline.
const HEARTBEAT: &str = r#"
UPDATE fairq.jobs SET lease_deadline = GREATEST(lease_deadline, $3)
WHERE id = $1 AND token = $2 AND state = 'running'
RETURNING lease_deadline
"#;

/// What a failure decision needs of a running job. Parameter: id.
const RUNNING: &str = r#"
SELECT queue, state, attempts, token, lease_deadline, claimed_at, retry
FROM fairq.jobs WHERE id = $1
"#;

/// Expired leases of a queue. Parameters: queue, now, limit.
const EXPIRED: &str = r#"
SELECT id, attempts, token, lease_deadline, retry
FROM fairq.jobs
WHERE queue = $1 AND state = 'running' AND lease_deadline <= $2
ORDER BY lease_deadline, id
LIMIT $3
"#;

/// Sends jobs back to wait for a retry. Parameters: id[], token[], run_at[], elapsed[]
/// (NULL for a rescue), message[], now.
const RETRY_MANY: &str = r#"
WITH input AS (
    SELECT * FROM unnest($1::int8[], $2::int8[], $3::int8[], $4::int8[], $5::text[])
        AS t(id, token, run_at, elapsed, message)
)
UPDATE fairq.jobs j
SET state = 'retrying', run_at = i.run_at, due_at = i.run_at, lease_deadline = NULL,
    failures = j.failures + 1,
    runs_ms = CASE WHEN i.elapsed IS NULL THEN j.runs_ms ELSE j.runs_ms || i.elapsed END,
    error_since = COALESCE(j.error_since, $6), last_error = i.message
FROM input i
WHERE j.id = i.id AND j.token = i.token AND j.state = 'running'
RETURNING j.id, j.queue, j.due_at
"#;

/// Moves dead jobs to the archive. Parameters: id[], token[], reason[], elapsed[] (NULL for
/// a rescue), message[], now.
const BURY_MANY: &str = r#"
WITH input AS (
    SELECT * FROM unnest($1::int8[], $2::int8[], $3::text[], $4::int8[], $5::text[])
        AS t(id, token, reason, elapsed, message)
),
gone AS (
    DELETE FROM fairq.jobs j USING input i
    WHERE j.id = i.id AND j.token = i.token AND j.state = 'running'
    RETURNING j.*, i.reason, i.elapsed, i.message
),
archived AS (
    INSERT INTO fairq.archive (id, queue, kind, key, payload, metadata, retry, unique_key,
        depends_on, has_dependents, state, dead_reason, attempts, token, enqueued_at,
        claimed_at, finished_at, failures, runs_ms, last_error)
    SELECT g.id, g.queue, g.kind, g.key, g.payload, g.metadata, g.retry, g.unique_key,
        g.depends_on, g.has_dependents, 'dead', g.reason, g.attempts, g.token, g.enqueued_at,
        g.claimed_at, $6, g.failures + 1,
        CASE WHEN g.elapsed IS NULL THEN g.runs_ms ELSE g.runs_ms || g.elapsed END,
        g.message
    FROM gone g
)
SELECT g.id, g.queue FROM gone g
"#;

/// Forgets all but the newest round of a queue. Parameter: queue.
const TRIM_ROUNDS: &str = r#"
DELETE FROM fairq.rounds r
WHERE r.queue = $1 AND r.round < (SELECT max(x.round) FROM fairq.rounds x WHERE x.queue = $1)
"#;

/// Whether a queue has a ready job, and when its next waiting job is due. Parameter: queue.
const DUE: &str = r#"
SELECT EXISTS (SELECT 1 FROM fairq.jobs WHERE queue = $1 AND round IS NOT NULL) AS ready,
       (SELECT min(due_at) FROM fairq.jobs
        WHERE queue = $1 AND round IS NULL AND state IN ('scheduled', 'retrying')) AS next_due
"#;

/// One job, live or finished. Parameter: id.
const GET: &str = "SELECT LIVE_INFO FROM fairq.jobs WHERE id = $1 \
                   UNION ALL SELECT DONE_INFO FROM fairq.archive WHERE id = $1";

/// A page of jobs. Parameters: queue (or NULL), state (or NULL), after id, limit.
const LIST: &str = r#"
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

/// Adds the counters of the rows in the `gone` CTE (queue, state, attempts, failures,
/// runs_ms) to the per-queue base counters, so statistics outlive deleted jobs.
const FOLD: &str = r#"
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
kept_runs AS (
    INSERT INTO fairq.stats_runs AS s (queue, ms, n)
    SELECT g.queue, u.ms, count(*)
    FROM gone g CROSS JOIN LATERAL unnest(g.runs_ms) AS u(ms)
    GROUP BY g.queue, u.ms
    ON CONFLICT (queue, ms) DO UPDATE SET n = s.n + EXCLUDED.n
)
"#;

/// Deletes unfinished jobs that are not running. Parameters: queue (or NULL), state (or NULL).
const PURGE_LIVE: &str = r#"
WITH gone AS (
    DELETE FROM fairq.jobs
    WHERE state <> 'running' AND ($1::text IS NULL OR queue = $1)
      AND ($2::text IS NULL OR state = $2)
    RETURNING queue, state, attempts, failures, runs_ms
),
FOLD
SELECT count(*) FROM gone
"#;

/// Deletes finished jobs. Parameters: queue (or NULL), state (or NULL).
const PURGE_DONE: &str = r#"
WITH gone AS (
    DELETE FROM fairq.archive
    WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR state = $2)
    RETURNING queue, state, attempts, failures, runs_ms
),
FOLD
SELECT count(*) FROM gone
"#;

/// Deletes jobs that finished at or before a time. Parameter: cutoff.
const PRUNE: &str = r#"
WITH gone AS (
    DELETE FROM fairq.archive WHERE finished_at <= $1
    RETURNING queue, state, attempts, failures, runs_ms
),
FOLD
SELECT count(*) FROM gone
"#;

/// Revives dead jobs (of a queue, or one id): back to the live table, due now, attempts
/// reset. Of several dead jobs sharing a unique key only the oldest comes back, and none
/// whose key an unfinished job holds. Parameters: queue (or NULL), id (or NULL), now.
const REVIVE: &str = r#"
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
gone AS (
    DELETE FROM fairq.archive a USING candidates c WHERE a.id = c.id RETURNING a.*
),
FOLD,
revived AS (
    INSERT INTO fairq.jobs (id, queue, kind, key, payload, metadata, retry, unique_key,
        depends_on, has_dependents, state, run_at, due_at, attempts, token, enqueued_at,
        failures, runs_ms, error_since, last_error)
    SELECT g.id, g.queue, g.kind, g.key, g.payload, g.metadata, g.retry, g.unique_key,
        g.depends_on, g.has_dependents, 'scheduled', $3, $3, 0, g.token, g.enqueued_at,
        0, '{}', NULL, g.last_error
    FROM gone g
    RETURNING queue
)
SELECT queue, count(*) FROM revived GROUP BY queue
"#;

/// Live jobs per queue and state, with failure counters and the oldest error.
const STATS_LIVE: &str = r#"
SELECT queue, state, count(*), COALESCE(sum(failures), 0)::int8, min(error_since)
FROM fairq.jobs GROUP BY queue, state
"#;

/// Finished jobs per queue and state, with retry and failure counters.
const STATS_DONE: &str = r#"
SELECT queue, state, count(*), COALESCE(sum(GREATEST(attempts - 1, 0)), 0)::int8,
       COALESCE(sum(failures), 0)::int8
FROM fairq.archive GROUP BY queue, state
"#;

/// Counters of deleted jobs.
const STATS_BASE: &str = "SELECT queue, ok, retries, dead, failures FROM fairq.stats_base";

/// Attempt durations per queue: (queue, ms, how many).
const STATS_RUNS: &str = r#"
SELECT queue, ms, sum(n)::int8 FROM (
    SELECT queue, unnest(runs_ms) AS ms, 1::int8 AS n FROM fairq.jobs
    UNION ALL
    SELECT queue, unnest(runs_ms) AS ms, 1::int8 AS n FROM fairq.archive
    UNION ALL
    SELECT queue, ms, n FROM fairq.stats_runs
) x GROUP BY queue, ms
"#;

/// Every statement, rendered for one schema.
#[derive(Debug)]
pub(crate) struct Sql {
    pub(crate) schema: SchemaName,
    pub(crate) channel: String,
    pub(crate) enqueue: String,
    pub(crate) deps_live: String,
    pub(crate) deps_archived: String,
    pub(crate) unique_holders: String,
    pub(crate) undo: String,
    pub(crate) promote: String,
    pub(crate) claim: String,
    pub(crate) complete: String,
    pub(crate) release: String,
    pub(crate) release_queues: String,
    pub(crate) release_stragglers: String,
    pub(crate) heartbeat: String,
    pub(crate) running: String,
    pub(crate) expired: String,
    pub(crate) retry_many: String,
    pub(crate) bury_many: String,
    pub(crate) trim_rounds: String,
    pub(crate) due: String,
    pub(crate) get: String,
    pub(crate) list: String,
    pub(crate) purge_live: String,
    pub(crate) purge_done: String,
    pub(crate) prune: String,
    pub(crate) revive: String,
    pub(crate) stats_live: String,
    pub(crate) stats_done: String,
    pub(crate) stats_base: String,
    pub(crate) stats_runs: String,
}

impl Sql {
    pub(crate) fn new(schema: SchemaName) -> Sql {
        let r = |template: &str| {
            let expanded = template
                .replace("JOB_COLUMNS", JOB_COLUMNS)
                .replace("LIVE_INFO", LIVE_INFO)
                .replace("DONE_INFO", DONE_INFO)
                .replace("FOLD", FOLD.trim());
            schema.render(&expanded)
        };
        Sql {
            channel: schema.channel(),
            enqueue: r(ENQUEUE),
            deps_live: r(DEPS_LIVE),
            deps_archived: r(DEPS_ARCHIVED),
            unique_holders: r(UNIQUE_HOLDERS),
            undo: r(UNDO),
            promote: r(PROMOTE),
            claim: r(CLAIM),
            complete: r(COMPLETE),
            release: r(RELEASE),
            release_queues: r(RELEASE_QUEUES),
            release_stragglers: r(RELEASE_STRAGGLERS),
            heartbeat: r(HEARTBEAT),
            running: r(RUNNING),
            expired: r(EXPIRED),
            retry_many: r(RETRY_MANY),
            bury_many: r(BURY_MANY),
            trim_rounds: r(TRIM_ROUNDS),
            due: r(DUE),
            get: r(GET),
            list: r(LIST),
            purge_live: r(PURGE_LIVE),
            purge_done: r(PURGE_DONE),
            prune: r(PRUNE),
            revive: r(REVIVE),
            stats_live: r(STATS_LIVE),
            stats_done: r(STATS_DONE),
            stats_base: r(STATS_BASE),
            stats_runs: r(STATS_RUNS),
            schema,
        }
    }

    /// The advisory-lock key that serialises promotion in `queue`.
    pub(crate) fn promote_lock(&self, queue: &str) -> String {
        format!("fairq-promote:{}:{}", self.schema.as_str(), queue)
    }

    /// The claim statement, for `EXPLAIN`.
    ///
    /// The text uses `$1` (queue), `$2` (limit), `$3` (now) and `$4` (lease deadline).
    pub(crate) fn claim_text(&self) -> &str {
        &self.claim
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_is_rendered_for_its_schema() {
        let sql = Sql::new(SchemaName::new("s1").unwrap());
        for text in [
            &sql.enqueue,
            &sql.promote,
            &sql.claim,
            &sql.complete,
            &sql.revive,
            &sql.purge_live,
            &sql.list,
            &sql.get,
        ] {
            assert!(!text.contains("fairq."), "unrendered: {text}");
            assert!(
                !text.contains("FOLD") && !text.contains("LIVE_INFO"),
                "{text}"
            );
            assert!(text.contains("\"s1\"."));
        }
    }
}
