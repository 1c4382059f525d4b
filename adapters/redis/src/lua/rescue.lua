-- Takes back jobs whose lease expired. For each candidate the caller passes the token it
-- decided for and fairq-core's verdict for that attempt; a job whose lease was extended,
-- finished or re-claimed meanwhile is left alone.
-- ARGV: now, then 5 fields per job: id, token, verdict ('retry' or 'dead'), run_at, reason.
-- Returns the number of jobs rescued.
local now = tonumber(ARGV[1])
local rescued = 0
for o = 2, #ARGV, 5 do
  local id, token = ARGV[o], tonumber(ARGV[o + 1])
  local h = jk(id)
  local f = redis.call('HMGET', h, unpack(SETTLE_FIELDS))
  if not fence(f[1], f[2], token) and tonumber(redis.call('HGET', h, 'deadline')) <= now then
    apply_failure(id, h, f, now, ARGV[o + 2], tonumber(ARGV[o + 3]), ARGV[o + 4], LEASE_EXPIRED)
    rescued = rescued + 1
  end
end
flush()
return rescued
