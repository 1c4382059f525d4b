-- Job store schema, version 5: counters of succeeded jobs that were not kept.
--
-- A store opened with `keep_succeeded(false)` deletes a succeeded job when it settles it
-- instead of moving it to `archive` (one row write fewer per job). Statistics still count it:
-- each settlement appends one row here for the jobs it deleted (its queue's counts and
-- their attempt durations), without touching a row another settlement may be writing, and
-- the rescuer folds these rows into `stats_base` and `stats_runs`.

CREATE TABLE fairq.stats_settled (
    queue    text     NOT NULL,
    ok       bigint   NOT NULL,
    retries  bigint   NOT NULL,
    failures bigint   NOT NULL,
    runs_ms  bigint[] NOT NULL
);

INSERT INTO fairq.schema_version (version) VALUES (5);
