-- Releases jobs blocked on a job of another queue that succeeded, each due at the later of
-- its own run time and now (release_due).
-- ARGV: now, then id, dep_id per job. Returns how many were released.
local now = tonumber(ARGV[1])
local released = 0
for o = 2, #ARGV, 2 do
  local id, dep = ARGV[o], ARGV[o + 1]
  local h = jk(id)
  local state, mine, fkey, run_at = unpack(redis.call('HMGET', h, 'state', 'dep', 'fkey', 'run_at'))
  if state == 'blocked' and mine == dep then
    redis.call('ZREM', k('st:blocked'), id)
    redis.call('ZREM', k('xwait'), id)
    count('blocked', -1)
    count('scheduled', 1)
    local due = release_due(run_at, now)
    local member = make_due(id, fkey, due, now)
    hset(h, 'state', 'scheduled', 'run_at', due, 'due', due, 'rmember', member or '')
    released = released + 1
  end
end
flush()
return released
