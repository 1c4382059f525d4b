-- Job store schema, version 8: dead jobs by finish time.
--
-- A prune keeps succeeded and dead jobs for ages of their own (dead ones usually longer, or
-- for good). It finds the dead jobs to delete through this index, which holds only dead
-- jobs: the lookup reads the entries of the jobs it deletes, not every dead job kept nor the
-- succeeded ones (which the BRIN index on finish times cannot tell apart). A job that dies
-- writes one entry more; a succeeded one writes none.

CREATE INDEX archive_dead_finished ON fairq.archive (finished_at) WHERE state = 'dead';

INSERT INTO fairq.schema_version (version) VALUES (8);
