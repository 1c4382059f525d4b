-- Records a failed attempt, fenced by the lease token. The retry decision was made by
-- fairq-core's policy for the attempt this token ran.
-- ARGV: id, token, now, decision ('retry', 'dead' or 'discard'), run_at, message, retried
-- ('1' when this call repeats one whose reply was lost).
-- Returns {'ok'}, {'stale', current}, {'notrunning', state}, {'notfound'} or, for a repeated
-- call that already went through, {'done', state, run_at}.
local id, token, now = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local decision, run_at, message, retried = ARGV[4], tonumber(ARGV[5]), ARGV[6], ARGV[7] == '1'
local h = jk(id)
if retried then
  local state, current, due = unpack(redis.call('HMGET', h, 'state', 'token', 'run_at'))
  if tonumber(current) == token and (state == 'retrying' or state == 'dead') then
    return {'done', state, due or '0'}
  end
end
local refused = check_lease(h, token)
if refused then return refused end
local claimed_at = tonumber(redis.call('HGET', h, 'claimed_at'))
record_time(now - claimed_at)
local reason = 'retries_exhausted'
if decision == 'discard' then reason = 'discarded' end
signal(apply_failure(id, h, now, decision, run_at, message, reason))
return {'ok'}
