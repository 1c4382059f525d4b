-- Releases jobs blocked on a job of another queue that succeeded.
-- ARGV: now, then id, dep_id per job. Returns how many were released.
local now = tonumber(ARGV[1])
local released = 0
for o = 2, #ARGV, 2 do
  local id, dep = ARGV[o], ARGV[o + 1]
  local h = jk(id)
  local state, mine, fkey = unpack(redis.call('HMGET', h, 'state', 'dep', 'fkey'))
  if state == 'blocked' and mine == dep then
    redis.call('ZREM', k('st:blocked'), id)
    redis.call('ZREM', k('xwait'), id)
    count('blocked', -1)
    count('scheduled', 1)
    local member = make_due(id, fkey, now, now)
    redis.call('HSET', h, 'state', 'scheduled', 'run_at', 0, 'due', now, 'rmember', member)
    released = released + 1
  end
end
flush()
return released
