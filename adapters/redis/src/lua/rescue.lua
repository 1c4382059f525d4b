-- Takes back jobs whose lease expired. For each candidate the caller passes the token it
-- decided for and fairq-core's decision for that attempt; a job whose lease was extended,
-- finished or re-claimed meanwhile is left alone.
-- ARGV: now, then 4 fields per job: id, token, decision ('retry' or 'dead'), run_at.
-- Returns the number of jobs rescued.
local now = tonumber(ARGV[1])
local rescued, ready = 0, 0
for o = 2, #ARGV, 4 do
  local id, token, decision, run_at = ARGV[o], tonumber(ARGV[o + 1]), ARGV[o + 2], tonumber(ARGV[o + 3])
  local h = jk(id)
  if not check_lease(h, token) and tonumber(redis.call('HGET', h, 'deadline')) <= now then
    ready = ready + apply_failure(id, h, now, decision, run_at, LEASE_EXPIRED, 'lease_expired')
    rescued = rescued + 1
  end
end
signal(ready)
return rescued
