-- Operator revival: dead jobs become claimable now with a fresh retry budget. A job whose
-- unique key is held by another job meanwhile stays dead.
-- ARGV: now, request id, keep_ms (how long the reply is kept under the request id), then
-- 'one', id  -> {'ok', 1}, {'dup', key, holder}, {'notdead', state}, {'notfound'}
-- 'all', limit, after -> {'ok', revived, last id looked at (or ''), looked at}
-- The reply is kept under the request id for the client's retry window, and every try answers
-- it when it is there: the first try's revival left a live job, which a repeat would find not
-- dead (or, for 'all', not in the dead set, and count nothing).
local now, rid, keep_ms, mode = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
local prior = recall(rid)
if prior then return prior end

-- Returns nil when revived, or the id holding the job's unique key.
local function revive(id)
  local h = jk(id)
  local u, fkey = unpack(redis.call('HMGET', h, 'uniq', 'fkey'))
  if u then
    local holder = redis.call('HGET', k('uniq'), u)
    if holder and holder ~= id then return holder end
    hset(k('uniq'), u, id)
  end
  redis.call('ZREM', k('st:dead'), id)
  redis.call('ZREM', k('dead_at'), id)
  -- Where an older version of this crate indexed its death.
  redis.call('ZREM', k('finished'), id)
  count('dead', -1)
  count('scheduled', 1)
  local member = make_due(id, fkey, now, now)
  hset(h, 'state', 'scheduled', 'run_at', now, 'due', now, 'attempts', 0,
    'rmember', member)
  redis.call('HDEL', h, 'at', 'reason', 'first_error_at')
  return nil
end

if mode == 'one' then
  local id = ARGV[5]
  local h = jk(id)
  local state = redis.call('HGET', h, 'state')
  if not state then return {'notfound'} end
  if state ~= 'dead' then return {'notdead', state} end
  local holder = revive(id)
  if holder then return {'dup', string.sub(redis.call('HGET', h, 'uniq'), 2), holder} end
  flush()
  return remember(rid, {'ok', 1}, keep_ms)
end

local from = '-inf'
if ARGV[6] ~= '' then from = '(' .. ARGV[6] end
local ids = redis.call('ZRANGEBYSCORE', k('st:dead'), from, '+inf', 'LIMIT', 0, tonumber(ARGV[5]))
local revived = 0
for _, id in ipairs(ids) do
  if not revive(id) then revived = revived + 1 end
end
flush()
return remember(rid, {'ok', revived, ids[#ids] or '', #ids}, keep_ms)
