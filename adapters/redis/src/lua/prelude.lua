-- Shared helpers, prepended to every script.
-- KEYS[1] is the queue's key base "<prefix>:{<queue>}:"; every key a script touches starts with
-- it, so all of them share the queue's hash tag (one Redis Cluster slot).
local base = KEYS[1]
local function k(name) return base .. name end
local function jk(id) return base .. 'job:' .. id end

-- Moves a job between the per-status indexes (sorted sets scored by id).
local function set_status(id, from, to)
  if from then redis.call('ZREM', k('st:' .. from), id) end
  if to then redis.call('ZADD', k('st:' .. to), id, id) end
end

-- Wakes one blocked waiter per ready job, keeping the signal list short.
local function signal(n)
  if n > 0 then
    local items = {}
    for i = 1, math.min(n, 64) do items[i] = '1' end
    redis.call('LPUSH', k('signal'), unpack(items))
    redis.call('LTRIM', k('signal'), 0, 63)
  end
end

-- The fair ready set mirrors the round engine of fairq-core: a job joins the round after its
-- key's last queued job, but never a round before current + 1 (the pending snapshot is closed).
-- Members sort by a per-queue push sequence inside a round (equal scores sort by member).
local function fair_push(id, fkey)
  local current = tonumber(redis.call('HGET', k('meta'), 'current') or '0')
  local tail = tonumber(redis.call('HGET', k('keys'), 't' .. fkey) or '0')
  local round = tail + 1
  if round < current + 1 then round = current + 1 end
  local seq = redis.call('HINCRBY', k('meta'), 'pushseq', 1)
  local member = string.format('%016d:%s', seq, id)
  redis.call('ZADD', k('ready'), round, member)
  redis.call('HSET', k('keys'), 't' .. fkey, round)
  redis.call('HINCRBY', k('keys'), 'c' .. fkey, 1)
  redis.call('HSET', jk(id), 'rmember', member)
end

-- Forgets a queued job's place in the fair ready set (after a pop or a removal).
local function fair_forget(fkey)
  local left = redis.call('HINCRBY', k('keys'), 'c' .. fkey, -1)
  if left <= 0 then redis.call('HDEL', k('keys'), 'c' .. fkey, 't' .. fkey) end
end

-- Removes a job from the ready set if it is there.
local function fair_remove(id)
  local h = jk(id)
  local member = redis.call('HGET', h, 'rmember')
  if member then
    if redis.call('ZREM', k('ready'), member) == 1 then
      fair_forget(redis.call('HGET', h, 'fkey'))
    end
    redis.call('HDEL', h, 'rmember')
  end
end

-- Most delayed jobs one call promotes into the fair order (claims pass their own limit).
local PROMOTE_LIMIT = 10000

-- Moves delayed jobs whose time has come into the fair order, by run time, then id.
local function promote(now, limit)
  local due = redis.call('ZRANGEBYSCORE', k('delayed'), '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  if #due == 0 then return end
  local batch = {}
  for i = 1, #due, 2 do batch[#batch + 1] = {tonumber(due[i + 1]), tonumber(due[i]), due[i]} end
  table.sort(batch, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  for _, entry in ipairs(batch) do
    local id = entry[3]
    redis.call('ZREM', k('delayed'), id)
    fair_push(id, redis.call('HGET', jk(id), 'fkey'))
  end
end

-- Files a job that waits for time only (scheduled or retrying) to become claimable at
-- run_at: at once (after the jobs that fell due before it) or through the delayed set.
-- Returns 1 when it is claimable now.
local function make_due(id, fkey, run_at, now)
  redis.call('HSET', jk(id), 'due', run_at)
  if run_at <= now then
    promote(now, PROMOTE_LIMIT)
    fair_push(id, fkey)
    return 1
  end
  redis.call('ZADD', k('delayed'), run_at, id)
  return 0
end

-- Checks that a job is running under `token` (fairq-core's fencing rule); returns nil when
-- it is, or a refusal: {'stale', current token or ''}, {'notrunning', state}, {'notfound'}.
local function check_lease(h, token)
  local state, current = unpack(redis.call('HMGET', h, 'state', 'token'))
  if not state then return {'notfound'} end
  current = tonumber(current)
  if state == 'running' then
    if current ~= token then return {'stale', tostring(current)} end
    return nil
  end
  local final = state == 'succeeded' or state == 'dead'
  if final and token == current then return {'notrunning', state} end
  if token ~= 0 and token <= current then return {'stale', ''} end
  return {'notrunning', state}
end

-- The last error recorded when a lease expires.
local LEASE_EXPIRED = 'lease expired: the worker stopped renewing it'

-- Records one finished attempt's run time (ms) in log-linear buckets (as fairq-core's
-- Histogram buckets them: exact below 128, then 64 buckets per power of two).
local function record_time(ms)
  if ms < 0 then ms = 0 end
  local low = ms
  if ms >= 128 then
    local shift, m = 0, ms
    while m >= 128 do m = math.floor(m / 2); shift = shift + 1 end
    low = m * 2 ^ shift
  end
  redis.call('HINCRBY', k('hist'), string.format('%d', low), 1)
  local count = redis.call('HINCRBY', k('pstat'), 'count', 1)
  redis.call('HINCRBY', k('pstat'), 'sum', ms)
  local min, max = unpack(redis.call('HMGET', k('pstat'), 'min', 'max'))
  if count == 1 or ms < tonumber(min) then redis.call('HSET', k('pstat'), 'min', ms) end
  if count == 1 or ms > tonumber(max) then redis.call('HSET', k('pstat'), 'max', ms) end
end

-- Gives up a unique key held by a job that finished.
local function release_unique(h, id)
  local u = redis.call('HGET', h, 'uniq')
  if u and redis.call('HGET', k('uniq'), u) == id then redis.call('HDEL', k('uniq'), u) end
end

-- Moves a job that just finished (succeeded or dead) to the finished index.
local function finish(id, now)
  redis.call('ZADD', k('finished'), now, id)
end

-- Releases the blocked dependents of a job that succeeded; returns how many became ready.
local function release_dependents(id, now)
  local released = 0
  local deps = k('deps:' .. id)
  for _, d in ipairs(redis.call('SMEMBERS', deps)) do
    local dh = jk(d)
    if redis.call('HGET', dh, 'state') == 'blocked' then
      redis.call('HSET', dh, 'state', 'scheduled', 'run_at', 0)
      set_status(d, 'blocked', 'scheduled')
      released = released + make_due(d, redis.call('HGET', dh, 'fkey'), now, now)
    end
  end
  redis.call('DEL', deps)
  return released
end

-- Applies a failure (handler failure or expired lease) to a running job: decision is 'retry'
-- (with run_at), 'dead' or 'discard'. Returns how many jobs became ready.
local function apply_failure(id, h, now, decision, run_at, message, reason)
  local attempts = tonumber(redis.call('HGET', h, 'attempts'))
  redis.call('ZREM', k('leased'), id)
  redis.call('HDEL', h, 'deadline', 'claimed_at')
  redis.call('HINCRBY', k('rstat'), 'failures', 1)
  if message then redis.call('HSET', h, 'last_error', message) end
  local first = redis.call('HGET', h, 'first_error_at')
  if not first then
    first = now
    redis.call('HSET', h, 'first_error_at', now)
  end
  if decision == 'retry' then
    redis.call('HSET', h, 'state', 'retrying', 'run_at', run_at)
    set_status(id, 'running', 'retrying')
    redis.call('ZADD', k('errs'), first, id)
    return make_due(id, redis.call('HGET', h, 'fkey'), run_at, now)
  end
  redis.call('HSET', h, 'state', 'dead', 'at', now, 'reason', reason)
  set_status(id, 'running', 'dead')
  redis.call('ZREM', k('errs'), id)
  redis.call('HINCRBY', k('rstat'), 'dead', 1)
  redis.call('HINCRBY', k('rstat'), 'retries', attempts - 1)
  release_unique(h, id)
  finish(id, now)
  return 0
end

-- Deletes a job that is not running from every structure (its dependents stay blocked).
local function delete_job(id)
  local h = jk(id)
  local state, dep, fkey = unpack(redis.call('HMGET', h, 'state', 'dep', 'fkey'))
  if not state then return end
  fair_remove(id)
  redis.call('ZREM', k('delayed'), id)
  redis.call('ZREM', k('errs'), id)
  redis.call('ZREM', k('finished'), id)
  redis.call('ZREM', k('all'), id)
  set_status(id, state, nil)
  release_unique(h, id)
  if dep then redis.call('SREM', k('deps:' .. dep), id) end
  redis.call('DEL', h, k('deps:' .. id), k('xdeps:' .. id))
end
