-- Enqueues a batch of jobs of one queue, all or nothing, and gives each its id:
-- seq * 65536 + the queue's number, seq counting per queue (never below the caller's floor,
-- which keeps one client's ids increasing across queues).
-- ARGV: now, count, request id, keep_ms (how long the reply is kept under the request id: the
-- client's whole retry window, see call::request_keep_ms), queue number, then 10 fields per
-- job: kind, fkey, payload, run_at, retry, uniq ('' or '+' ..
-- key), on_conflict ('error' or 'ignore'), dep ('' or dep_id .. ':' .. mode, mode 'local',
-- 'blocked' (on a job of another queue) or 'ready'), meta, floor.
-- Returns {'ok', id1, id2, ...}, {'dup', unique_key, existing_id} or {'nodep', dep_id}. An
-- ignored duplicate's id is the existing job's, marked with a leading '=' ('=' .. id): nothing
-- was enqueued for it, so the caller has nothing to register (its dependency is not this
-- job's). The reply is kept under the request id for `keep_ms`, and every try looks for it
-- first: a repeated call, and a first try that reaches the server only after its repeat went
-- through, answers the same ids instead of enqueueing twice.
local now, n, rid, keep_ms = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local qnum = tonumber(ARGV[5])
local F = 10
local req = k('req:' .. rid)
if rid ~= '' then
  local prior = redis.call('GET', req)
  if prior then
    local reply = {'ok'}
    for id in string.gmatch(prior, '[^,]+') do reply[#reply + 1] = id end
    return reply
  end
end
local seq, stored = unpack(redis.call('HMGET', k('meta'), 'seq', 'qnum'))
seq = tonumber(seq or '0')
if stored and tonumber(stored) ~= qnum then
  return redis.error_reply('fairq: the queue registry numbers this queue ' .. qnum ..
    ' but its jobs carry number ' .. stored)
end
local MAX_SEQ = 137438953472 -- 2^37: ids stay below 2^53, exact in Lua and in JSON

-- Validate and number everything first, so that a refused batch leaves nothing behind.
local ids, skip, taken = {}, {}, {}
for i = 1, n do
  local o = 5 + (i - 1) * F
  local uniq, conflict, dep, floor = ARGV[o + 6], ARGV[o + 7], ARGV[o + 8], tonumber(ARGV[o + 10])
  -- The dependency first, then the unique key, as the reference store checks them.
  if dep ~= '' then
    local dep_id, mode = string.match(dep, '^(%d+):(%a+)$')
    if mode == 'local' and redis.call('EXISTS', jk(dep_id)) == 0 then
      return {'nodep', dep_id}
    end
  end
  if uniq ~= '' then
    local holder = taken[uniq] or redis.call('HGET', k('uniq'), uniq)
    if holder then
      if conflict == 'ignore' then
        ids[i] = holder
        skip[i] = true
      else
        return {'dup', string.sub(uniq, 2), holder}
      end
    end
  end
  if not skip[i] then
    seq = seq + 1
    if floor > seq then seq = floor end
    if seq >= MAX_SEQ then return redis.error_reply('fairq: job ids of this queue are used up') end
    ids[i] = string.format('%d', seq * 65536 + qnum)
    if uniq ~= '' then taken[uniq] = ids[i] end
  end
end

for i = 1, n do
  if not skip[i] then
    local o = 5 + (i - 1) * F
    local id = ids[i]
    local kind, fkey, payload, run_at, retry = ARGV[o + 1], ARGV[o + 2], ARGV[o + 3],
      tonumber(ARGV[o + 4]), ARGV[o + 5]
    local uniq, dep, meta = ARGV[o + 6], ARGV[o + 8], ARGV[o + 9]
    local sets = {'kind', kind, 'fkey', fkey, 'payload', payload, 'enq', now, 'retry', retry,
      'meta', meta, 'attempts', 0, 'token', 0}
    if uniq ~= '' then
      sets[#sets + 1] = 'uniq'; sets[#sets + 1] = uniq
      hset(k('uniq'), uniq, id)
    end
    local blocked = false
    if dep ~= '' then
      local dep_id, mode = string.match(dep, '^(%d+):(%a+)$')
      sets[#sets + 1] = 'dep'; sets[#sets + 1] = dep_id
      if mode == 'local' then
        local dh = jk(dep_id)
        if redis.call('HGET', dh, 'state') ~= 'succeeded' then
          blocked = true
          redis.call('SADD', k('deps:' .. dep_id), id)
          hset(dh, 'hd', 1)
        end
      elseif mode == 'blocked' then
        blocked = true
        zadd('xwait', now + XWAIT_RECHECK, id)
      end
    end
    if blocked then
      sets[#sets + 1] = 'state'; sets[#sets + 1] = 'blocked'
      -- Its own run time, kept for its release (see release_due in prelude.lua).
      sets[#sets + 1] = 'run_at'; sets[#sets + 1] = run_at
      zadd('st:blocked', id, id)
      count('blocked', 1)
    else
      sets[#sets + 1] = 'state'; sets[#sets + 1] = 'scheduled'
      sets[#sets + 1] = 'run_at'; sets[#sets + 1] = run_at
      sets[#sets + 1] = 'due'; sets[#sets + 1] = run_at
      count('scheduled', 1)
      local member = make_due(id, fkey, run_at, now)
      if member then
        sets[#sets + 1] = 'rmember'; sets[#sets + 1] = member
      end
    end
    zadd('all', id, id)
    hset(jk(id), unpack(sets))
  end
end
hset(k('meta'), 'seq', seq, 'qnum', qnum)
flush()
local answered = {}
for i = 1, n do
  if skip[i] then answered[i] = '=' .. ids[i] else answered[i] = ids[i] end
end
if rid ~= '' then
  redis.call('SET', req, table.concat(answered, ','), 'PX', int(keep_ms))
end
local reply = {'ok'}
for i = 1, n do reply[i + 1] = answered[i] end
return reply
