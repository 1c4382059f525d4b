-- Job store schema, version 2: batched settlement.
--
-- * `jobs.due_seq` breaks ties between jobs that become due at the same millisecond: a job
--   waiting for its time keeps its id there, a job made due by an event (a retry without
--   delay, a released dependent, a revival, a hand-back) gets a number after every waiting
--   job, so jobs whose time came earlier take their places in the fair order first.
-- * Running jobs are found through `jobs_running`, which holds no lease deadline: extending
--   a lease changes no indexed column, so heartbeats are HOT updates.
-- * The archive's finish times get a BRIN index (prune scans ranges of an append-mostly
--   table) instead of a B-tree written for every finished job.
-- * Pages of `jobs` keep a tenth free, so the update of a heartbeat finds room for the new
--   row version on the same page (a HOT update needs both).
-- * `archive.due_at` keeps when a finished job's last attempt became due.
-- * `ghosts` keeps the places of ready jobs that were purged before claims reached their
--   round: a key's next job still queues behind them, as in the reference schedule.

ALTER TABLE fairq.jobs ADD COLUMN due_seq bigint NOT NULL DEFAULT 0;
UPDATE fairq.jobs SET due_seq = id WHERE round IS NULL;

DROP INDEX fairq.jobs_waiting;
CREATE INDEX jobs_waiting ON fairq.jobs (queue, due_at, due_seq)
    WHERE round IS NULL AND state IN ('scheduled', 'retrying');

DROP INDEX fairq.jobs_leases;
CREATE INDEX jobs_running ON fairq.jobs (queue) WHERE state = 'running';

ALTER TABLE fairq.jobs SET (fillfactor = 90);

ALTER TABLE fairq.archive ADD COLUMN due_at bigint;

DROP INDEX fairq.archive_finished;
CREATE INDEX archive_finished ON fairq.archive USING brin (finished_at);

CREATE TABLE fairq.ghosts (
    queue text   NOT NULL,
    key   text,
    round bigint NOT NULL
);
CREATE INDEX ghosts_tail ON fairq.ghosts (queue, key, round);

INSERT INTO fairq.schema_version (version) VALUES (2);
