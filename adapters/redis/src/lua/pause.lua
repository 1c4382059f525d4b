-- Operator pause and resume of the queue. A paused queue's claims take nothing (claim_jobs
-- reads the flag); its jobs stay in place. Resuming wakes up to one blocked waiter per
-- claimable job.
-- ARGV: '1' to pause, '0' to resume. Returns 1 when the flag changed, 0 otherwise.
if ARGV[1] == '1' then
  if redis.call('SET', k('paused'), '1', 'NX') then return 1 end
  return 0
end
local was = redis.call('DEL', k('paused'))
if was == 1 then signal(redis.call('ZCARD', k('ready'))) end
return was
