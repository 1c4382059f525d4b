-- Records how a batch of attempts ended, each fenced by its own lease token, then (when
-- max > 0) claims the next jobs in the same call.
-- ARGV: now, retried ('1' when this call repeats one whose reply was lost), keep ('1' keeps
-- succeeded jobs, '0' deletes them: RedisOptions::keep_succeeded, the calling process's
-- choice), keep_ms (how long a success keeps the list of other-queue dependents it released,
-- `xrel:<id>`, for a repeat to answer: the client's retry window), n, then 6 fields per entry: id, token, verdict ('ok', 'retry' or 'dead'), run_at,
-- reason, message; then max, lease_ms, promote_limit.
-- The verdict of a failure is fairq-core's, computed by the caller for the attempt the token
-- names; this script only applies it.
-- Returns {answers, claimed}: one answer per entry, {'ok', claimed_at, other-queue
-- dependents...}, {'retry', claimed_at, run_at}, {'dead', claimed_at, reason} or a refusal
-- ({'stale', current}, {'notrunning', state}, {'notfound'}); claimed as claim_jobs returns.
-- A success answered for a job the first try deleted has an empty claimed_at (unknown). A
-- success repeated after its reply was lost answers the other-queue dependents its first try
-- released (their registrations are gone), so that the caller releases them.
local now, retried, keep = tonumber(ARGV[1]), ARGV[2] == '1', ARGV[3] ~= '0'
local keep_ms, n = tonumber(ARGV[4]), tonumber(ARGV[5])
local H = 5

-- Deletes a running job whose success was just counted, from everything that holds it: the
-- job hash, its dependency sets (empty: a job with dependents is kept), the `all`, `leased`
-- and `errs` indexes; its unique key is released first. Not `delete_job`: that one reads the
-- job again and removes it from every index a job that is not running may be in, one command
-- each; this one knows where a running job is and collects the index writes (see flush).
local function forget_success(id, h, f)
  zrem('leased', id)
  zrem('all', id)
  if f[5] then zrem('errs', id) end
  count('running', -1)
  release_unique(f[7], id)
  redis.call('DEL', h, k('deps:' .. id), k('xdeps:' .. id))
end

local answers = {}
for i = 1, n do
  local o = H + (i - 1) * 6
  local id, token, verdict = ARGV[o + 1], tonumber(ARGV[o + 2]), ARGV[o + 3]
  local h = jk(id)
  local f = redis.call('HMGET', h, unpack(SETTLE_FIELDS))
  local refused = fence(f[1], f[2], token)
  local answer
  if refused then
    answer = refused
    -- A repeated call whose first try went through: answer as the first try did. A success
    -- that was not kept left nothing behind; a job gone when a repeated success arrives is
    -- taken to be that one (a running job is deleted by nothing else while its lease holds).
    if retried and not f[1] and verdict == 'ok' and not keep then
      answer = {'ok', ''}
    elseif retried and f[1] and tonumber(f[2]) == token then
      local claimed_at = f[4] or '0'
      if verdict == 'ok' and f[1] == 'succeeded' then
        answer = {'ok', claimed_at}
        for _, other in ipairs(redis.call('LRANGE', k('xrel:' .. id), 0, -1)) do
          answer[#answer + 1] = other
        end
      elseif verdict ~= 'ok' and f[1] == 'retrying' then
        answer = {'retry', claimed_at, redis.call('HGET', h, 'run_at')}
      elseif verdict ~= 'ok' and f[1] == 'dead' then
        answer = {'dead', claimed_at, redis.call('HGET', h, 'reason')}
      end
    end
  elseif verdict == 'ok' then
    -- Counted alike whether the job is kept or not (the succeeded count of `counts` holds
    -- kept jobs only, as it holds no pruned one).
    bump('ok', 1)
    bump('retries', (whole(f[3]) or 1) - 1)
    answer = {'ok', f[4] or '0'}
    if not keep and not f[6] then
      forget_success(id, h, f)
    else
      -- Kept: by choice, or because it has dependents (released now; a later dependent
      -- still finds it succeeded).
      hset(h, 'state', 'succeeded', 'at', now)
      zrem('leased', id)
      count('running', -1)
      count('succeeded', 1)
      zadd('finished', now, id)
      if f[5] then zrem('errs', id) end
      release_unique(f[7], id)
      if f[6] then
        local others = release_dependents(id, now)
        for _, other in ipairs(others) do answer[#answer + 1] = other end
        -- Kept for a repeat of this call, which finds them no longer registered.
        if #others > 0 then
          variadic('RPUSH', k('xrel:' .. id), others)
          redis.call('PEXPIRE', k('xrel:' .. id), int(keep_ms))
        end
      end
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
local c = H + n * 6
local max = tonumber(ARGV[c + 1] or '0')
local claimed = {}
if max > 0 then
  claimed = claim_jobs(now, max, tonumber(ARGV[c + 2]), tonumber(ARGV[c + 3]))
else
  flush()
end
return {answers, claimed}
