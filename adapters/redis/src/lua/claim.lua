-- Promotes due delayed jobs, then claims up to `max` jobs fairly under a lease.
-- ARGV: now, max, lease_ms, promote_limit.
-- Returns one array per job:
--   {id, kind, fkey, payload, attempt, token, deadline, enq, due, retry, meta}
-- where `due` is when the job last became due.
local now = tonumber(ARGV[1])
local max = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])

promote(now, limit)

local out = {}
while #out < max do
  local popped = redis.call('ZPOPMIN', k('ready'))
  if #popped == 0 then break end
  local member, round = popped[1], popped[2]
  redis.call('HSET', k('meta'), 'current', round)
  local id = string.match(member, ':(%d+)$')
  local h = jk(id)
  local state, fkey = unpack(redis.call('HMGET', h, 'state', 'fkey'))
  if not state then
    return redis.error_reply('fairq: ready job ' .. id .. ' has no record')
  end
  fair_forget(fkey)
  if state ~= 'scheduled' and state ~= 'retrying' then
    return redis.error_reply('fairq: ready job ' .. id .. ' is ' .. state)
  end
  local attempt = redis.call('HINCRBY', h, 'attempts', 1)
  local token = redis.call('HINCRBY', h, 'token', 1)
  local deadline = now + lease
  redis.call('HSET', h, 'state', 'running', 'deadline', deadline, 'claimed_at', now)
  redis.call('HDEL', h, 'rmember')
  redis.call('ZADD', k('leased'), deadline, id)
  set_status(id, state, 'running')
  local kind, payload, enq, due, retry, meta =
    unpack(redis.call('HMGET', h, 'kind', 'payload', 'enq', 'due', 'retry', 'meta'))
  out[#out + 1] = {id, kind, fkey, payload, tostring(attempt), tostring(token),
    string.format('%d', deadline), enq, due, retry, meta}
end
return out
