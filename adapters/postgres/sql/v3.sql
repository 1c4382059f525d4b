-- Job store schema, version 3: payloads operators can query.
--
-- A payload that is JSON goes to `payload_json` (jsonb), so SQL can read it
-- (`payload_json->>'field'`, `payload_json @> '{"user": 7}'`). jsonb keeps a parsed value,
-- not text, so `payload` (bytea) keeps the exact bytes whenever jsonb alone would not give
-- them back unchanged: a payload that is not JSON, or JSON that is not in canonical form
-- (compact, keys in byte order; a struct serialized in field order, say). Workers always get
-- the bytes that were enqueued. At least one of the two columns is set.
--
-- Existing rows keep their `payload` and get no `payload_json`: the upgrade rewrites no row.
-- The check constraints are added NOT VALID for the same reason (every existing row has its
-- bytes, so they hold); they apply to every row written from now on.

ALTER TABLE fairq.jobs ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE fairq.jobs ADD COLUMN payload_json jsonb;
ALTER TABLE fairq.jobs ADD CONSTRAINT jobs_payload_present
    CHECK (payload IS NOT NULL OR payload_json IS NOT NULL) NOT VALID;

ALTER TABLE fairq.archive ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE fairq.archive ADD COLUMN payload_json jsonb;
ALTER TABLE fairq.archive ADD CONSTRAINT archive_payload_present
    CHECK (payload IS NOT NULL OR payload_json IS NOT NULL) NOT VALID;

INSERT INTO fairq.schema_version (version) VALUES (3);
