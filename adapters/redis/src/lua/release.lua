-- Releases a job blocked on a job of another queue that succeeded.
-- ARGV: id, dep_id, now. Returns 1 when released, 0 otherwise.
local id, dep, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local h = jk(id)
local state, mine = unpack(redis.call('HMGET', h, 'state', 'dep'))
if state ~= 'blocked' or mine ~= dep then return 0 end
redis.call('HSET', h, 'state', 'scheduled', 'run_at', 0)
set_status(id, 'blocked', 'scheduled')
signal(make_due(id, redis.call('HGET', h, 'fkey'), now, now))
return 1
