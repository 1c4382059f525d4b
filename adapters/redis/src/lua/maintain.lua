-- Housekeeping run with each rescue.
-- * Forgets the fairness tails of keys with nothing queued: a tail at or below the round being
--   served places a key's next job exactly where no tail would (current + 1), so dropping it
--   changes nothing. Looks at `sweep` fields per call, resuming where the last call stopped.
-- * Hands back the jobs blocked on another queue's job that are due for a recheck, with the
--   id they wait for, and moves their next recheck `recheck_ms` later. (The normal path
--   releases them when the dependency succeeds; the recheck repairs a release that a crash
--   between the two queues' scripts left undone.)
-- ARGV: now, sweep, recheck_ms, recheck_limit. Returns {id1, dep1, id2, dep2, ...}.
local now, sweep, recheck, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local current, cursor = unpack(redis.call('HMGET', k('meta'), 'current', 'kcursor'))
current = tonumber(current or '0')
local scan = redis.call('HSCAN', k('keys'), cursor or '0', 'COUNT', sweep)
local stale = {}
local fields = scan[2]
for i = 1, #fields, 2 do
  if tonumber(fields[i + 1]) <= current then stale[#stale + 1] = fields[i] end
end
if #stale > 0 then variadic('HDEL', k('keys'), stale) end
hset(k('meta'), 'kcursor', scan[1])
local out = {}
local due = redis.call('ZRANGEBYSCORE', k('xwait'), '-inf', now, 'LIMIT', 0, limit)
for _, id in ipairs(due) do
  local dep = redis.call('HGET', jk(id), 'dep')
  if dep then
    out[#out + 1] = id
    out[#out + 1] = dep
    redis.call('ZADD', k('xwait'), now + recheck, id)
  else
    redis.call('ZREM', k('xwait'), id)
  end
end
return out
