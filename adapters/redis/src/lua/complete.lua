-- Marks a running job succeeded, fenced by its lease token, and releases its dependents.
-- ARGV: id, token, now, retried ('1' when this call repeats one whose reply was lost).
-- Returns {'ok', cross-queue dependents...}, {'stale', current}, {'notrunning', state},
-- {'notfound'} or {'done'} (this very lease already completed it: a retried request).
local id, token, now, retried = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4] == '1'
local h = jk(id)
local refused = check_lease(h, token)
if refused then
  if retried and refused[1] == 'notrunning' and refused[2] == 'succeeded'
      and tonumber(redis.call('HGET', h, 'token')) == token then
    return {'done'}
  end
  return refused
end
local attempts, claimed_at = unpack(redis.call('HMGET', h, 'attempts', 'claimed_at'))
redis.call('HSET', h, 'state', 'succeeded', 'at', now)
redis.call('HDEL', h, 'deadline', 'claimed_at', 'first_error_at')
redis.call('ZREM', k('errs'), id)
redis.call('ZREM', k('leased'), id)
set_status(id, 'running', 'succeeded')
finish(id, now)
record_time(now - tonumber(claimed_at))
redis.call('HINCRBY', k('rstat'), 'ok', 1)
redis.call('HINCRBY', k('rstat'), 'retries', tonumber(attempts) - 1)
release_unique(h, id)
signal(release_dependents(id, now))
local reply = {'ok'}
local xdeps = k('xdeps:' .. id)
for _, d in ipairs(redis.call('SMEMBERS', xdeps)) do reply[#reply + 1] = d end
redis.call('DEL', xdeps)
return reply
