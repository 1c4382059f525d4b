-- Hands claimed jobs back before their handlers started (fairq-core's Lifecycle::release):
-- the attempt is refunded, the token stays (so the old lease is fenced once the job is claimed
-- again, and refused as stale before that), and the job is due at once in the fair order.
-- ARGV: now, request id, keep_ms (how long the reply is kept under the request id), then id,
-- token per claim. Returns one answer per claim: {'ok'} or a refusal. The reply is kept under
-- the request id for the client's retry window: a hand-back leaves the token as it was, so a
-- repeat could not tell its first try's hand-back from a stale claim, and answers the kept
-- reply instead (so does a first try arriving after its repeat).
local now, rid, keep_ms = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local prior = recall(rid)
if prior then return prior end
local answers = {}
for o = 4, #ARGV, 2 do
  local id, token = ARGV[o], tonumber(ARGV[o + 1])
  local h = jk(id)
  local state, current, attempts, fkey = unpack(redis.call('HMGET', h, 'state', 'token', 'attempts', 'fkey'))
  local refused = fence(state, current, token)
  if refused then
    answers[#answers + 1] = refused
  else
    attempts = (whole(attempts) or 1) - 1
    if attempts < 0 then attempts = 0 end
    local to = 'scheduled'
    if attempts > 0 then
      to = 'retrying'
      zadd('st:retrying', id, id)
      zadd('retry_at', now, id)
    end
    zrem('leased', id)
    count('running', -1)
    count(to, 1)
    local member = make_due(id, fkey, now, now)
    hset(h, 'state', to, 'attempts', attempts, 'run_at', now, 'due', now,
      'rmember', member)
    answers[#answers + 1] = {'ok'}
  end
end
flush()
return remember(rid, answers, keep_ms)
