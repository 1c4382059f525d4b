-- Adds run times aggregated by a client into the queue's histogram (buckets as fairq-core's
-- Histogram makes them: exact below 128, then 64 per power of two) and exact totals.
-- ARGV: count, sum, min, max, then bucket low, count pairs. Returns the queue's count of run
-- times, or 0 when the queue was removed since the times were taken (its `counts` and `all`
-- are gone, see remove.lua): the times are dropped rather than bringing back a `pstat` and a
-- `hist` that would list the removed queue in `stats` again.
if redis.call('EXISTS', k('counts'), k('all')) == 0 then return 0 end
local count, sum, min, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local total = hincrby(k('pstat'), 'count', count)
hincrby(k('pstat'), 'sum', sum)
local old_min, old_max = unpack(redis.call('HMGET', k('pstat'), 'min', 'max'))
if total == count or min < tonumber(old_min) then hset(k('pstat'), 'min', min) end
if total == count or max > tonumber(old_max) then hset(k('pstat'), 'max', max) end
for o = 5, #ARGV, 2 do
  hincrby(k('hist'), ARGV[o], tonumber(ARGV[o + 1]))
end
return total
