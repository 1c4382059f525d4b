-- Takes back jobs whose lease expired. For each candidate the caller passes the token it
-- decided for and fairq-core's verdict for that attempt; a job whose lease was extended,
-- finished or re-claimed meanwhile is left alone.
-- ARGV: now, then 5 fields per job: id, token, verdict ('retry', 'dead' or 'corrupt'), run_at,
-- reason. 'corrupt' is a job whose token or attempt counter the caller could not read (its
-- token is then ''): still running under an expired lease with one of them unreadable, it is
-- set aside as dead, as a claim sets aside an unreadable job; gone, it leaves `leased`.
-- Returns the number of jobs rescued or set aside.
local now = tonumber(ARGV[1])
local rescued = 0
for o = 2, #ARGV, 5 do
  local id, verdict = ARGV[o], ARGV[o + 2]
  local h = jk(id)
  local f = redis.call('HMGET', h, unpack(SETTLE_FIELDS))
  -- `leased` says the lease ended; a deadline field that is not a number does not hold it.
  local deadline = tonumber(redis.call('HGET', h, 'deadline'))
  local expired = deadline == nil or deadline <= now
  if verdict == 'corrupt' then
    if not f[1] then
      zrem('leased', id)
    elseif f[1] == 'running' and expired and not (whole(f[2]) and whole(f[3])) then
      set_aside(id, h, 'running', now, 'corrupt record: attempts or token unreadable')
      rescued = rescued + 1
    end
  elseif not fence(f[1], f[2], tonumber(ARGV[o + 1])) and expired then
    apply_failure(id, h, f, now, verdict, tonumber(ARGV[o + 3]), ARGV[o + 4], LEASE_EXPIRED)
    rescued = rescued + 1
  end
end
flush()
return rescued
