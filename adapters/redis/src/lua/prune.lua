-- Deletes up to `limit` finished jobs that finished at or before `cutoff`.
-- ARGV: cutoff, limit. Returns the deleted ids.
local cutoff, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', k('finished'), '-inf', cutoff, 'LIMIT', 0, limit)
for _, id in ipairs(ids) do delete_job(id) end
flush()
return ids
