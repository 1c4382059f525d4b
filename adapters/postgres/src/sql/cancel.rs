//! Statements of cancelling one job (`Inspect::cancel`): the one-job versions of the purge
//! statements, so a cancelled job leaves the same traces as a purged one (its counters folded
//! into the queue's base counters, a ghost holding its key's place in the round).

/// Locks a live job and reads its state. Parameter: id.
const STATE: &str = "SELECT state FROM fairq.jobs WHERE id = $1 FOR UPDATE";

/// Deletes one live job that is not running, as `PURGE_LIVE` does, and answers as it does.
/// Parameter: id.
const LIVE: &str = r#"
WITH gone AS (
    DELETE FROM fairq.jobs
    WHERE id = $1 AND state <> 'running'
    RETURNING queue, key, round, state, attempts, failures, runs_ms, depends_on
),
FOLD,
GHOSTS
SELECT count(*), GONE_DEPENDENCIES FROM gone
"#;

/// Deletes one finished job, as `PURGE_DONE` does. Parameter: id.
const DONE: &str = r#"
WITH gone AS (
    DELETE FROM fairq.archive WHERE id = $1
    RETURNING queue, state, attempts, failures, runs_ms
),
FOLD
SELECT count(*) FROM gone
"#;

/// The cancel statements, rendered for one schema.
#[derive(Debug)]
pub(crate) struct CancelSql {
    pub(crate) state: String,
    pub(crate) live: String,
    pub(crate) done: String,
}

impl CancelSql {
    /// Renders each statement with `render` (the schema's).
    pub(super) fn new(render: impl Fn(&str) -> String) -> CancelSql {
        CancelSql {
            state: render(STATE),
            live: render(LIVE),
            done: render(DONE),
        }
    }
}
