-- Records how a batch of attempts ended, each fenced by its own lease token, then (when
-- max > 0) claims the next jobs in the same call.
-- ARGV: now, retried ('1' when this call repeats one whose reply was lost), n, then 6 fields
-- per entry: id, token, verdict ('ok', 'retry' or 'dead'), run_at, reason, message; then max,
-- lease_ms, promote_limit.
-- The verdict of a failure is fairq-core's, computed by the caller for the attempt the token
-- names; this script only applies it.
-- Returns {answers, claimed}: one answer per entry, {'ok', claimed_at, other-queue
-- dependents...}, {'retry', claimed_at, run_at}, {'dead', claimed_at, reason} or a refusal
-- ({'stale', current}, {'notrunning', state}, {'notfound'}); claimed as claim_jobs returns.
local now, retried, n = tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3])
local answers = {}
for i = 1, n do
  local o = 3 + (i - 1) * 6
  local id, token, verdict = ARGV[o + 1], tonumber(ARGV[o + 2]), ARGV[o + 3]
  local h = jk(id)
  local f = redis.call('HMGET', h, unpack(SETTLE_FIELDS))
  local refused = fence(f[1], f[2], token)
  local answer
  if refused then
    answer = refused
    -- A repeated call whose first try went through: answer as the first try did.
    if retried and f[1] and tonumber(f[2]) == token then
      local claimed_at = f[4] or '0'
      if verdict == 'ok' and f[1] == 'succeeded' then
        answer = {'ok', claimed_at}
      elseif verdict ~= 'ok' and f[1] == 'retrying' then
        answer = {'retry', claimed_at, redis.call('HGET', h, 'run_at')}
      elseif verdict ~= 'ok' and f[1] == 'dead' then
        answer = {'dead', claimed_at, redis.call('HGET', h, 'reason')}
      end
    end
  elseif verdict == 'ok' then
    redis.call('HSET', h, 'state', 'succeeded', 'at', now)
    zrem('leased', id)
    count('running', -1)
    count('succeeded', 1)
    zadd('finished', now, id)
    if f[5] then zrem('errs', id) end
    bump('ok', 1)
    bump('retries', tonumber(f[3]) - 1)
    release_unique(f[7], id)
    answer = {'ok', f[4] or '0'}
    if f[6] then
      for _, other in ipairs(release_dependents(id, now)) do answer[#answer + 1] = other end
    end
  else
    local run_at, reason, message = tonumber(ARGV[o + 4]), ARGV[o + 5], ARGV[o + 6]
    apply_failure(id, h, f, now, verdict, run_at, reason, message)
    if verdict == 'retry' then
      answer = {'retry', f[4] or '0', ARGV[o + 4]}
    else
      answer = {'dead', f[4] or '0', reason}
    end
  end
  answers[i] = answer
end
local c = 3 + n * 6
local max = tonumber(ARGV[c + 1] or '0')
local claimed = {}
if max > 0 then
  claimed = claim_jobs(now, max, tonumber(ARGV[c + 2]), tonumber(ARGV[c + 3]))
else
  flush()
end
return {answers, claimed}
