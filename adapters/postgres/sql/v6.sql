-- Job store schema, version 6: a claim changes no indexed column, so PostgreSQL updates the
-- row in place (a HOT update: no new index entries).
--
-- A claimed job keeps its round and its place in `jobs_ready`: being running (its `state`)
-- takes it out of the claims' way, and `state` is no longer in any index or index predicate.
-- Running jobs are found through `jobs_ready` too (their rounds are never past the queue's
-- current round), so `jobs_running` goes. A blocked job waits in `jobs_waiting` with a due
-- time past every other (its dependency's success makes it due), so that index needs no test
-- of the state either.

ALTER TABLE fairq.jobs DROP CONSTRAINT jobs_round_ready;

-- Jobs that were running when the store was upgraded: a place in the current round, so the
-- rescue finds them when their leases expire.
UPDATE fairq.jobs j
SET round = COALESCE((SELECT max(r.round) FROM fairq.rounds r WHERE r.queue = j.queue), 0),
    ready_seq = j.id
WHERE j.state = 'running';

UPDATE fairq.jobs SET due_at = 9223372036854775807 WHERE state = 'blocked';

ALTER TABLE fairq.jobs ADD CONSTRAINT jobs_round_ready
    CHECK (round IS NULL OR state IN ('scheduled', 'retrying', 'running'));

DROP INDEX fairq.jobs_running;
DROP INDEX fairq.jobs_waiting;
CREATE INDEX jobs_waiting ON fairq.jobs (queue, due_at, due_seq) WHERE round IS NULL;
DROP INDEX fairq.jobs_blocked;
CREATE INDEX jobs_blocked ON fairq.jobs (depends_on) WHERE depends_on IS NOT NULL;

INSERT INTO fairq.schema_version (version) VALUES (6);
