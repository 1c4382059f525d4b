-- Job store schema, version 1.
--
-- Apply it with your own migration tool, or let the library's migrate() do it (which also
-- handles a schema name other than the default and serialises concurrent runs). Times are
-- milliseconds since the Unix epoch, as bigint, read from the application's clock.

CREATE SCHEMA IF NOT EXISTS fairq;

CREATE TABLE fairq.schema_version (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- Job ids, shared by the live table and the archive. The same sequence numbers jobs as they
-- become ready (a new ready job's number is its id; a job that becomes ready later draws a
-- fresh number): the order within a round of the fair schedule.
CREATE SEQUENCE fairq.job_ids;

-- Unfinished jobs.
CREATE TABLE fairq.jobs (
    id             bigint   PRIMARY KEY DEFAULT nextval('fairq.job_ids'),
    queue          text     NOT NULL,
    kind           text     NOT NULL,
    key            text,                          -- fairness key; NULL is one shared key
    payload        bytea    NOT NULL,
    metadata       jsonb    NOT NULL DEFAULT '{}',
    retry          jsonb,                         -- retry policy; NULL is the default policy
    unique_key     text,
    depends_on     bigint,
    has_dependents boolean  NOT NULL DEFAULT false,
    state          text     NOT NULL,
    run_at         bigint   NOT NULL DEFAULT 0,   -- the lifecycle's run_at
    due_at         bigint   NOT NULL DEFAULT 0,   -- when the job last became (or becomes) due
    round          bigint,                        -- fair round while ready and unclaimed
    ready_seq      bigint,                        -- position within the round
    attempts       bigint   NOT NULL DEFAULT 0,
    token          bigint   NOT NULL DEFAULT 0,   -- last lease token issued (fencing)
    lease_deadline bigint,
    claimed_at     bigint,
    enqueued_at    bigint   NOT NULL,
    failures       bigint   NOT NULL DEFAULT 0,   -- failed or rescued attempts
    runs_ms        bigint[] NOT NULL DEFAULT '{}',-- durations of finished attempts
    error_since    bigint,                        -- start of the current run of failures
    last_error     text,
    CONSTRAINT jobs_state_known CHECK (state IN ('blocked', 'scheduled', 'running', 'retrying')),
    CONSTRAINT jobs_round_ready CHECK (round IS NULL OR state IN ('scheduled', 'retrying'))
);

-- The claim: ready jobs of a queue in fair order.
CREATE INDEX jobs_ready ON fairq.jobs (queue, round, ready_seq) WHERE round IS NOT NULL;
-- A key's last ready round, read when a job of that key becomes ready.
CREATE INDEX jobs_key_tail ON fairq.jobs (queue, key, round) WHERE round IS NOT NULL;
-- Jobs waiting for time (delayed, retrying) or for promotion after a release.
CREATE INDEX jobs_waiting ON fairq.jobs (queue, due_at, id)
    WHERE round IS NULL AND state IN ('scheduled', 'retrying');
-- Leases, for the rescuer.
CREATE INDEX jobs_leases ON fairq.jobs (queue, lease_deadline) WHERE state = 'running';
-- Unique keys among a queue's unfinished jobs.
CREATE UNIQUE INDEX jobs_unique ON fairq.jobs (queue, unique_key) WHERE unique_key IS NOT NULL;
-- Jobs waiting for a dependency.
CREATE INDEX jobs_blocked ON fairq.jobs (depends_on) WHERE state = 'blocked';

-- Finished jobs (succeeded or dead), moved here in the transaction that finishes them.
CREATE TABLE fairq.archive (
    id             bigint   PRIMARY KEY,
    queue          text     NOT NULL,
    kind           text     NOT NULL,
    key            text,
    payload        bytea    NOT NULL,
    metadata       jsonb    NOT NULL,
    retry          jsonb,
    unique_key     text,
    depends_on     bigint,
    has_dependents boolean  NOT NULL,
    state          text     NOT NULL,
    dead_reason    text,
    attempts       bigint   NOT NULL,
    token          bigint   NOT NULL,
    enqueued_at    bigint   NOT NULL,
    claimed_at     bigint,
    finished_at    bigint   NOT NULL,
    failures       bigint   NOT NULL,
    runs_ms        bigint[] NOT NULL,
    last_error     text,
    CONSTRAINT archive_state_known CHECK (state IN ('succeeded', 'dead')),
    CONSTRAINT archive_reason_known
        CHECK (dead_reason IS NULL OR dead_reason IN ('retries_exhausted', 'lease_expired', 'discarded'))
);

CREATE INDEX archive_finished ON fairq.archive (finished_at);
CREATE INDEX archive_dead ON fairq.archive (queue, id) WHERE state = 'dead';

-- Rounds that claims have started, per queue: the newest is the queue's current round.
-- Claims only insert (no row is updated), so concurrent claimers never wait on one hot row;
-- the rescuer trims the older ones.
CREATE TABLE fairq.rounds (
    queue text   NOT NULL,
    round bigint NOT NULL,
    PRIMARY KEY (queue, round)
);

-- Counters of jobs that were deleted (pruned, purged, revived), so statistics outlive them.
CREATE TABLE fairq.stats_base (
    queue    text   PRIMARY KEY,
    ok       bigint NOT NULL DEFAULT 0,
    retries  bigint NOT NULL DEFAULT 0,
    dead     bigint NOT NULL DEFAULT 0,
    failures bigint NOT NULL DEFAULT 0
);

-- Attempt durations of deleted jobs: how many attempts of each duration (milliseconds).
CREATE TABLE fairq.stats_runs (
    queue text   NOT NULL,
    ms    bigint NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (queue, ms)
);

INSERT INTO fairq.schema_version (version) VALUES (1);
