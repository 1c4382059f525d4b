-- Enqueues a batch of jobs of one queue, all or nothing.
-- ARGV: now, count, then 10 fields per job:
--   id, kind, fkey, payload, run_at, retry, uniq ('' or '+' .. key), on_conflict ('error' or
--   'ignore'), dep ('' or id .. ':' .. mode with mode 'local', 'blocked' or 'ready'), meta.
-- Returns {'ok', id1, id2, ...} (an existing id for an ignored duplicate),
-- {'dup', unique_key, existing_id} or {'nodep', dep_id}.
local now = tonumber(ARGV[1])
local count = tonumber(ARGV[2])
local F = 10
local ids = {}
local taken = {}
local skip = {}

-- Validate everything first so that a refused batch leaves nothing behind.
for i = 1, count do
  local o = 2 + (i - 1) * F
  local id, uniq, conflict, dep = ARGV[o + 1], ARGV[o + 7], ARGV[o + 8], ARGV[o + 9]
  ids[i] = id
  if redis.call('EXISTS', jk(id)) == 1 then
    -- Already written by an earlier attempt of this very call (a retried request).
    skip[i] = true
  elseif uniq ~= '' then
    local holder = taken[uniq] or redis.call('HGET', k('uniq'), uniq)
    if holder then
      if conflict == 'ignore' then
        ids[i] = holder
        skip[i] = true
      else
        return {'dup', string.sub(uniq, 2), holder}
      end
    else
      taken[uniq] = id
    end
  end
  if not skip[i] and dep ~= '' then
    local dep_id, mode = string.match(dep, '^(%d+):(%a+)$')
    if mode == 'local' and redis.call('EXISTS', jk(dep_id)) == 0 then
      return {'nodep', dep_id}
    end
  end
end

local ready = 0
for i = 1, count do
  if not skip[i] then
    local o = 2 + (i - 1) * F
    local id, kind, fkey, payload = ARGV[o + 1], ARGV[o + 2], ARGV[o + 3], ARGV[o + 4]
    local run_at, retry, uniq, dep, meta = tonumber(ARGV[o + 5]), ARGV[o + 6], ARGV[o + 7],
      ARGV[o + 9], ARGV[o + 10]
    local h = jk(id)
    redis.call('HSET', h, 'kind', kind, 'fkey', fkey, 'payload', payload, 'enq', now,
      'retry', retry, 'meta', meta, 'attempts', 0, 'token', 0)
    redis.call('ZADD', k('all'), id, id)
    if uniq ~= '' then
      redis.call('HSET', h, 'uniq', uniq)
      redis.call('HSET', k('uniq'), uniq, id)
    end
    local blocked = false
    if dep ~= '' then
      local dep_id, mode = string.match(dep, '^(%d+):(%a+)$')
      redis.call('HSET', h, 'dep', dep_id)
      if mode == 'local' then
        if redis.call('HGET', jk(dep_id), 'state') ~= 'succeeded' then
          blocked = true
          redis.call('SADD', k('deps:' .. dep_id), id)
        end
      elseif mode == 'blocked' then
        blocked = true
      end
    end
    if blocked then
      redis.call('HSET', h, 'state', 'blocked')
      set_status(id, nil, 'blocked')
    else
      redis.call('HSET', h, 'state', 'scheduled', 'run_at', run_at)
      set_status(id, nil, 'scheduled')
      ready = ready + make_due(id, fkey, run_at, now)
    end
  end
end
signal(ready)
local reply = {'ok'}
for i = 1, count do reply[i + 1] = ids[i] end
return reply
