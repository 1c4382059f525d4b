-- Job store schema, version 7: paused queues.
--
-- A queue listed here hands out no job: the claim reads this table once per call (a
-- primary-key probe) and takes nothing while its queue is in it. Its jobs stay where they
-- are, in their fair order; jobs already running still settle. Resuming deletes the row and
-- wakes the queue's listening workers.

CREATE TABLE fairq.paused (
    queue     text   PRIMARY KEY,
    paused_at bigint NOT NULL
);

INSERT INTO fairq.schema_version (version) VALUES (7);
