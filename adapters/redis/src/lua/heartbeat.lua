-- Extends leases to max(now + lease, current deadline), each fenced by its token.
-- ARGV: now, lease_ms, then id, token per claim.
-- Returns one answer per claim: {'ok', deadline} or a refusal as in settle.
local now, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local answers = {}
for o = 3, #ARGV, 2 do
  local id, token = ARGV[o], tonumber(ARGV[o + 1])
  local h = jk(id)
  local state, current, deadline = unpack(redis.call('HMGET', h, 'state', 'token', 'deadline'))
  local refused = fence(state, current, token)
  if refused then
    answers[#answers + 1] = refused
  else
    local until_ = now + lease
    if tonumber(deadline) > until_ then until_ = tonumber(deadline) end
    hset(h, 'deadline', until_)
    zadd('leased', until_, id)
    answers[#answers + 1] = {'ok', string.format('%d', until_)}
  end
end
flush()
return answers
