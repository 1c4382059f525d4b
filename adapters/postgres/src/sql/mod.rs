//! Every statement the store runs, written for the default schema and rendered once per
//! store for its own schema name.
//!
//! Times (`now`, deadlines) are always parameters read from the store's clock, never the
//! server's `now()`, so tests can drive time and every node agrees with its own clock.

mod cancel;
mod enqueue;
mod enqueue_one;
mod operator;
mod pause;
mod worker;

use crate::schema::SchemaName;

/// Columns of a claimed job, in the order [`crate::rows::job`] reads them. The `jsonb` copy
/// of a payload is sent only when it is the only copy: a payload kept as bytes too is given
/// to workers as those bytes, so printing its `jsonb` as text would be work for nothing on
/// both sides.
const JOB_COLUMNS: &str = "id, token, attempts, lease_deadline, kind, key, payload, \
                           enqueued_at, due_at, retry, metadata, \
                           CASE WHEN payload IS NULL THEN payload_json END AS payload_json";

/// Columns of a live job as an operator sees it ([`crate::rows::info`]). A blocked job has no
/// due time until its dependency succeeds.
const LIVE_INFO: &str = "id, queue, kind, key, state, run_at, attempts, token, lease_deadline, \
                         NULL::int8 AS finished_at, NULL::text AS dead_reason, enqueued_at, \
                         last_error, unique_key, depends_on, payload, metadata, \
                         CASE WHEN state = 'blocked' THEN 0 ELSE due_at END AS due_at, \
                         claimed_at, payload_json";

/// The same columns for a finished job.
const DONE_INFO: &str = "id, queue, kind, key, state, 0::int8 AS run_at, attempts, token, \
                         NULL::int8 AS lease_deadline, finished_at, dead_reason, enqueued_at, \
                         last_error, unique_key, depends_on, payload, metadata, \
                         due_at, claimed_at, payload_json";

/// The round a key's next ready job goes after: the queue's current round, the key's last
/// ready job, or a purged job of the key whose round has not come yet (it still holds its
/// place, as in the reference schedule). Rendered with the row alias `r` (`r.queue`, `r.key`).
const KEY_TAIL: &str = r#"GREATEST(
               (SELECT max(c.round) FROM fairq.rounds c WHERE c.queue = r.queue),
               (SELECT max(j.round) FROM fairq.jobs j
                WHERE r.key IS NOT NULL AND j.queue = r.queue AND j.key = r.key
                  AND j.round IS NOT NULL),
               (SELECT max(j.round) FROM fairq.jobs j
                WHERE r.key IS NULL AND j.queue = r.queue AND j.key IS NULL
                  AND j.round IS NOT NULL),
               (SELECT max(g.round) FROM fairq.ghosts g
                WHERE r.key IS NOT NULL AND g.queue = r.queue AND g.key = r.key),
               (SELECT max(g.round) FROM fairq.ghosts g
                WHERE r.key IS NULL AND g.queue = r.queue AND g.key IS NULL),
               0)"#;

/// The due time of a blocked job: after every other, so that the index of waiting jobs
/// (`jobs_waiting`, which does not test the state) never offers it to a promotion. Its
/// dependency's success gives it a real one.
const BLOCKED_DUE: &str = "9223372036854775807";

/// The `due_seq` of jobs made due by an event: above every job id, so such a job is promoted
/// after the jobs that were already waiting for the same millisecond. An event numbers its
/// jobs `EVENT + (position << 20) + rank`.
const EVENT: &str = "4611686018427387904";

/// The `due_seq` base of a ready job enqueued while its queue had jobs waiting whose time
/// came (`2^62 + 2^61`): it waits with them, due at the enqueue's now, numbered `BEHIND + id`,
/// after every one of them, as if they had been promoted first. An enqueue inside the
/// caller's transaction cannot promote them itself: the promotion's advisory lock and row
/// locks would be held until the caller commits, keeping every other session from promoting
/// the queue meanwhile.
const BEHIND: &str = "6917529027641081856";

/// `j.state = 'running'` for statements that name their jobs by id (settlement, heartbeats,
/// hand-backs), written so the planner cannot use it to pick another access path than one
/// primary-key lookup per entry. (With an index of running jobs, up to schema version 5, its
/// row estimate lagged far behind a burst of claims, it said 1 row where 1,032 jobs ran, and
/// the planner scanned every running job for each entry of a batch: 12 ms of a 14 ms
/// settlement of 128 jobs.)
const STILL_RUNNING: &str = "(CASE WHEN j.state = 'running' THEN true END)";

/// Sent in the claim's transaction just before the claim: the claim's plan is the walk of
/// `jobs_ready` in fair order, stopping after `limit` jobs it can lock, and this takes away the
/// planner's alternative, reading every ready job of the queue and sorting them. The planner
/// picks that alternative whenever the table's statistics undersell the index's order, as
/// they do until `ANALYZE` has seen a bulk enqueue (a fresh table, or autovacuum off or
/// behind): a claim of 128 jobs of 20,000 just enqueued took 27.9 ms as a bitmap scan of all
/// 17,792 ready jobs and a sort, against 4 ms for 64 by the index, and the sort grows with
/// the queue. No other path gives the fair order, so with sorts disabled the planner walks
/// the index. Disabling a path adds a fixed penalty to the cost of any plan that still needs
/// it, and the claim's final sort of the jobs it took is such a step: the inflated cost
/// would pass the server's JIT thresholds, and compiling the claim took 0.8 to 0.95 s per
/// claim, so JIT is off for the claim too (it has nothing to gain on a statement of a few
/// milliseconds).
///
/// The claim also runs its connection's generic plan (`plan_cache_mode`): by default the
/// server plans a prepared statement anew for each execution while that custom plan looks
/// cheaper than the generic one, and for the claim, with its CTEs, that planning took 0.6 to
/// 0.9 ms of a one-job claim that then ran in 0.2 to 0.4 ms. The generic plan is the same
/// walk of `jobs_ready` (with sorts disabled there is no other), then a TID scan of the
/// picked rows, whatever the queue's size; it is made once per connection and made again
/// only when the table's statistics change. `SET LOCAL` ends with the transaction; the
/// pool's connections keep the server's settings for every other statement.
pub(crate) const CLAIM_PLAN: &str = claim_plan!();

/// `BEGIN` and [`CLAIM_PLAN`] in one message, for a claim in a transaction of its own.
pub(crate) const CLAIM_BEGIN: &str = concat!("BEGIN; ", claim_plan!());

/// `BEGIN` for a transaction that settles jobs: the settlement runs its connection's
/// generic plan, as the claim does (see [`CLAIM_PLAN`]). Planned anew for each execution,
/// the settlement's statement spent about 1 ms planning per call on the development
/// machine (a one-job settlement took 2.7 ms, 0.9 ms with the generic plan). Its generic
/// plan looks each entry up by primary key, the plan it gets for any batch size.
pub(crate) const SETTLE_BEGIN: &str = "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan";

/// The text of [`CLAIM_PLAN`], written once for both constants.
macro_rules! claim_plan {
    () => {
        "SET LOCAL enable_sort = off; SET LOCAL enable_incremental_sort = off; SET LOCAL jit = off; \
         SET LOCAL plan_cache_mode = force_generic_plan"
    };
}
use claim_plan;

/// Every statement, rendered for one schema.
#[derive(Debug)]
pub(crate) struct Sql {
    pub(crate) schema: SchemaName,
    /// Ready jobs appeared in a queue (payload: the queue).
    pub(crate) channel: String,
    /// Jobs of a queue wait for a time (payload: `<millis> <queue>`, the earliest).
    pub(crate) due_channel: String,
    /// The batch insert with `ON CONFLICT` on unique keys.
    pub(crate) enqueue: String,
    /// One job without a unique key.
    pub(crate) enqueue_one: String,
    /// The batch insert for batches without unique keys.
    pub(crate) enqueue_plain: String,
    pub(crate) deps_live: String,
    pub(crate) deps_archived: String,
    /// The dependency look-ups that lock without marking, for batches with unique keys.
    pub(crate) deps_live_lock: String,
    pub(crate) deps_archived_lock: String,
    /// Marks the dependencies of the rows a batch with unique keys inserted.
    pub(crate) deps_mark: String,
    pub(crate) unique_holders: String,
    pub(crate) undo: String,
    pub(crate) promote: String,
    pub(crate) claim: String,
    pub(crate) settle: String,
    pub(crate) release: String,
    pub(crate) hold_retries: String,
    pub(crate) heartbeat: String,
    pub(crate) expired: String,
    pub(crate) trim_rounds: String,
    pub(crate) fold_settled: String,
    pub(crate) release_stragglers: String,
    pub(crate) due: String,
    pub(crate) get: String,
    pub(crate) get_many: String,
    pub(crate) list: String,
    pub(crate) purge_live: String,
    pub(crate) purge_done: String,
    pub(crate) depended_lock: String,
    pub(crate) depended_clear: String,
    pub(crate) prune: String,
    pub(crate) prune_dead: String,
    pub(crate) revive: String,
    pub(crate) stats_live: String,
    pub(crate) live_counts: String,
    pub(crate) stats_done: String,
    pub(crate) stats_base: String,
    pub(crate) stats_runs: String,
    pub(crate) remove_queue: String,
    pub(crate) queue_live: String,
    pub(crate) cancel: cancel::CancelSql,
    pub(crate) pause: pause::PauseSql,
}

impl Sql {
    pub(crate) fn new(schema: SchemaName, keep_succeeded: bool) -> Sql {
        let r = |template: &str| {
            let expanded = template
                .replace("JOB_COLUMNS", JOB_COLUMNS)
                .replace("LIVE_INFO", LIVE_INFO)
                .replace("DONE_INFO", DONE_INFO)
                .replace("KEY_TAIL", KEY_TAIL)
                .replace("EVENT", EVENT)
                .replace("BEHIND", BEHIND)
                .replace("BLOCKED_DUE", BLOCKED_DUE)
                .replace("STILL_RUNNING", STILL_RUNNING)
                .replace(
                    "KEEP_SUCCEEDED",
                    if keep_succeeded { "true" } else { "false" },
                )
                .replace("FOLD", operator::FOLD.trim())
                .replace("KEEP_RUNS", operator::KEEP_RUNS.trim())
                .replace("GHOSTS", operator::GHOSTS.trim())
                .replace("GONE_DEPENDENCIES", operator::GONE_DEPENDENCIES);
            schema.render(&expanded)
        };
        Sql {
            channel: schema.channel(),
            due_channel: schema.due_channel(),
            enqueue_one: r(enqueue_one::ENQUEUE_ONE),
            enqueue: r(&enqueue::ENQUEUE.replace("ON_CONFLICT", enqueue::ON_CONFLICT)),
            enqueue_plain: r(&enqueue::ENQUEUE.replace("ON_CONFLICT", "")),
            deps_live: r(enqueue::DEPS_LIVE),
            deps_archived: r(enqueue::DEPS_ARCHIVED),
            deps_live_lock: r(enqueue::DEPS_LIVE_LOCK),
            deps_archived_lock: r(enqueue::DEPS_ARCHIVED_LOCK),
            deps_mark: r(enqueue::DEPS_MARK),
            unique_holders: r(enqueue::UNIQUE_HOLDERS),
            undo: r(enqueue::UNDO),
            promote: r(worker::PROMOTE),
            claim: r(worker::CLAIM),
            settle: r(worker::SETTLE),
            release: r(worker::RELEASE),
            hold_retries: r(worker::HOLD_RETRIES),
            heartbeat: r(worker::HEARTBEAT),
            expired: r(worker::EXPIRED),
            trim_rounds: r(worker::TRIM_ROUNDS),
            fold_settled: r(worker::FOLD_SETTLED),
            release_stragglers: r(worker::RELEASE_STRAGGLERS),
            due: r(worker::DUE),
            get: r(operator::GET),
            get_many: r(operator::GET_MANY),
            list: r(operator::LIST),
            purge_live: r(operator::PURGE_LIVE),
            purge_done: r(operator::PURGE_DONE),
            depended_lock: r(operator::DEPENDED_LOCK),
            depended_clear: r(operator::DEPENDED_CLEAR),
            prune: r(operator::PRUNE),
            prune_dead: r(operator::PRUNE_DEAD),
            revive: r(operator::REVIVE),
            stats_live: r(operator::STATS_LIVE),
            live_counts: r(operator::LIVE_COUNTS),
            stats_done: r(operator::STATS_DONE),
            stats_base: r(operator::STATS_BASE),
            stats_runs: r(operator::STATS_RUNS),
            remove_queue: r(operator::REMOVE_QUEUE),
            queue_live: r(operator::QUEUE_LIVE),
            cancel: cancel::CancelSql::new(r),
            pause: pause::PauseSql::new(r),
            schema,
        }
    }

    /// The advisory-lock key that serialises promotion in `queue`.
    pub(crate) fn promote_lock(&self, queue: &str) -> String {
        format!("fairq-promote:{}:{}", self.schema.as_str(), queue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_plan_names_each_setting() {
        // The disabled sorts' cost penalty passes any JIT threshold (and EXPLAIN without
        // costs does not show JIT, so no server test sees it): each setting is named here.
        for setting in ["enable_sort", "enable_incremental_sort", "jit"] {
            let off = format!("SET LOCAL {setting} = off");
            assert!(CLAIM_PLAN.contains(&off), "{setting}");
            assert!(CLAIM_BEGIN.starts_with("BEGIN; ") && CLAIM_BEGIN.contains(&off));
        }
        let generic = "SET LOCAL plan_cache_mode = force_generic_plan";
        assert!(CLAIM_PLAN.contains(generic) && CLAIM_BEGIN.contains(generic));
        assert!(SETTLE_BEGIN.starts_with("BEGIN; ") && SETTLE_BEGIN.contains(generic));
    }

    #[test]
    fn every_statement_is_rendered_for_its_schema() {
        let sql = Sql::new(SchemaName::new("s1").unwrap(), false);
        for text in [
            &sql.enqueue,
            &sql.enqueue_one,
            &sql.enqueue_plain,
            &sql.promote,
            &sql.claim,
            &sql.settle,
            &sql.release,
            &sql.heartbeat,
            &sql.release_stragglers,
            &sql.revive,
            &sql.purge_live,
            &sql.depended_lock,
            &sql.depended_clear,
            &sql.list,
            &sql.get,
            &sql.get_many,
            &sql.cancel.state,
            &sql.cancel.live,
            &sql.cancel.done,
            &sql.pause.pause,
            &sql.pause.resume,
            &sql.pause.paused,
            &sql.remove_queue,
            &sql.queue_live,
            &sql.prune,
            &sql.prune_dead,
            &sql.fold_settled,
            &sql.stats_base,
            &sql.stats_runs,
        ] {
            assert!(!text.contains("fairq."), "unrendered: {text}");
            for placeholder in [
                "FOLD",
                "GHOSTS",
                "LIVE_INFO",
                "DONE_INFO",
                "EVENT",
                "BEHIND",
                "JOB_COLUMNS",
                "KEY_TAIL",
                "ON_CONFLICT",
                "STILL_RUNNING",
                "KEEP_SUCCEEDED",
                "KEEP_RUNS",
                "GONE_DEPENDENCIES",
            ] {
                assert!(!text.contains(placeholder), "{placeholder} left in {text}");
            }
            assert!(text.contains("\"s1\"."));
        }
        assert!(sql.enqueue.contains("ON CONFLICT"));
        assert!(!sql.enqueue_plain.contains("ON CONFLICT"));
    }
}
