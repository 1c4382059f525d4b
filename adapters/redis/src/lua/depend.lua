-- Cross-queue dependencies, run on the queue of the job depended on.
-- ARGV: mode ('check' or 'register'), dep_id, dependent ('<queue>\n<id>', mode 'register').
-- Returns 'missing', 'succeeded' or 'pending'. Registering marks the job as having dependents,
-- so its completion looks them up (jobs without dependents skip the lookup).
local mode, dep = ARGV[1], ARGV[2]
local h = jk(dep)
local state = redis.call('HGET', h, 'state')
if not state then return 'missing' end
if state == 'succeeded' then return 'succeeded' end
if mode == 'register' then
  redis.call('SADD', k('xdeps:' .. dep), ARGV[3])
  redis.call('HSET', h, 'hd', 1)
end
return 'pending'
