-- Cross-queue dependencies, run on the queue of the job depended on.
-- ARGV: mode ('check' or 'register'), dep_id, dependent ('<queue>\n<id>', mode 'register').
-- Returns 'missing', 'succeeded' or 'pending'. Registering marks the job as having dependents,
-- so its completion looks them up (jobs without dependents skip the lookup).
-- Two more modes serve a prune: 'waits' (run on the dependent's queue; ARGV: mode, dep_id,
-- id) returns 1 while job id is blocked on dep_id, else 0; 'forget' (on the dependency's
-- queue; ARGV: mode, dep_id, dependent) drops a registration whose job no longer waits.
local mode, dep = ARGV[1], ARGV[2]
if mode == 'waits' then
  local state, mine = unpack(redis.call('HMGET', jk(ARGV[3]), 'state', 'dep'))
  if state == 'blocked' and mine == dep then return 1 end
  return 0
end
if mode == 'forget' then
  return redis.call('SREM', k('xdeps:' .. dep), ARGV[3])
end
local h = jk(dep)
local state = redis.call('HGET', h, 'state')
if not state then return 'missing' end
if state == 'succeeded' then return 'succeeded' end
if mode == 'register' then
  redis.call('SADD', k('xdeps:' .. dep), ARGV[3])
  hset(h, 'hd', 1)
end
return 'pending'
