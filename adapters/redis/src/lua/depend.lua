-- Cross-queue dependencies, run on the queue of the job depended on.
-- ARGV: mode ('check' or 'register'), dep_id, dependent ('<queue>\n<id>', mode 'register').
-- Returns 'missing', 'succeeded' or 'pending'. Registering marks the job as having dependents,
-- so its completion looks them up (jobs without dependents skip the lookup).
-- 'waits' serves a prune (run on the dependent's queue; ARGV: mode, dep_id, id): returns 1
-- while job id is blocked on dep_id, else 0.
-- 'forget' (on the dependency's queue; ARGV: mode, then dep_id, dependent per registration)
-- drops registrations whose jobs no longer wait (a prune's stale ones; dependents purged or
-- cancelled in their queue), clearing the mark of a job left with no dependent
-- (unmark_dependents); returns how many it dropped.
local mode, dep = ARGV[1], ARGV[2]
if mode == 'waits' then
  local state, mine = unpack(redis.call('HMGET', jk(ARGV[3]), 'state', 'dep'))
  if state == 'blocked' and mine == dep then return 1 end
  return 0
end
if mode == 'forget' then
  local dropped = 0
  for o = 2, #ARGV - 1, 2 do
    if redis.call('SREM', k('xdeps:' .. ARGV[o]), ARGV[o + 1]) == 1 then
      dropped = dropped + 1
      unmark_dependents(ARGV[o])
    end
  end
  return dropped
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
