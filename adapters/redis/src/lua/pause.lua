-- Operator pause and resume of the queue. A paused queue's claims take nothing (claim_jobs
-- reads the flag); its jobs stay in place. Resuming wakes up to one blocked waiter per
-- claimable job, and one more when jobs wait for their time: a paused queue's waiters block
-- without looking at the delayed set, so one of them must look again (it finds a job that
-- fell due during the pause, or how long to sleep until the next one).
-- ARGV: '1' to pause, '0' to resume. Returns 1 when the flag changed, 0 otherwise.
if ARGV[1] == '1' then
  if redis.call('SET', k('paused'), '1', 'NX') then return 1 end
  return 0
end
local was = redis.call('DEL', k('paused'))
if was == 1 then
  local n = redis.call('ZCARD', k('ready'))
  if redis.call('EXISTS', k('delayed')) == 1 then n = n + 1 end
  signal(n)
end
return was
