//! Statements that pause and resume a queue ([`Inspect::set_paused`](fairq_worker::Inspect)).
//! The claim reads the same table (`sql/worker.rs`, `CLAIM`).

/// Pauses a queue (a no-op when it is paused already). Parameters: queue, now.
const PAUSE: &str = r#"
INSERT INTO fairq.paused (queue, paused_at) VALUES ($1, $2) ON CONFLICT (queue) DO NOTHING
"#;

/// Resumes a queue and, when it was paused, wakes its listening workers. Parameters: queue,
/// ready channel. Rows: one per resumed queue (none when it was not paused).
const RESUME: &str = r#"
WITH gone AS (
    DELETE FROM fairq.paused WHERE queue = $1 RETURNING queue
)
SELECT pg_notify($2, g.queue) FROM gone g
"#;

/// The paused queues, by name.
const PAUSED: &str = "SELECT queue FROM fairq.paused ORDER BY queue";

/// The pause statements, rendered for one schema.
#[derive(Debug)]
pub(crate) struct PauseSql {
    pub(crate) pause: String,
    pub(crate) resume: String,
    pub(crate) paused: String,
}

impl PauseSql {
    /// Renders each statement with `render` (the schema's).
    pub(super) fn new(render: impl Fn(&str) -> String) -> PauseSql {
        PauseSql {
            pause: render(PAUSE),
            resume: render(RESUME),
            paused: render(PAUSED),
        }
    }
}
