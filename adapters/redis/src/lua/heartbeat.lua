-- Extends a lease to max(now + lease, current deadline), fenced by the token.
-- ARGV: id, token, now, lease_ms. Returns {'ok', deadline} or a refusal as in complete.
local id, token, now, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local h = jk(id)
local refused = check_lease(h, token)
if refused then return refused end
local deadline = now + lease
local current = tonumber(redis.call('HGET', h, 'deadline'))
if current > deadline then deadline = current end
redis.call('HSET', h, 'deadline', deadline)
redis.call('ZADD', k('leased'), deadline, id)
return {'ok', string.format('%d', deadline)}
