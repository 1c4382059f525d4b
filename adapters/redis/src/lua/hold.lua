-- Holds back the queue's retries (a worker's retry sweep stopped at a failed retry): every job
-- waiting for a retry that would be due before `until` becomes due at `until`, whether it still
-- waits for its time or already waits in the fair order (fairq-core's
-- Lifecycle::postpone_retry). Jobs waiting for a first run, running jobs and later retries stay.
-- ARGV: now, until. Returns how many moved.
local now, hold = tonumber(ARGV[1]), tonumber(ARGV[2])
local ids = redis.call('ZRANGEBYSCORE', k('retry_at'), '-inf', '(' .. string.format('%d', hold))
-- In id order, as the reference store moves them (the order matters when `until` is now:
-- they join the fair order one after another).
table.sort(ids, function(a, b) return tonumber(a) < tonumber(b) end)
local moved = 0
for _, id in ipairs(ids) do
  local h = jk(id)
  local state, fkey = unpack(redis.call('HMGET', h, 'state', 'fkey'))
  if state == 'retrying' and fkey then
    -- Out of the delayed set, or out of the fair order: a member already there is superseded
    -- by the new `rmember` (see the prelude), as the reference supersedes its entry.
    redis.call('ZREM', k('delayed'), id)
    zadd('retry_at', hold, id)
    local new_member = ''
    if hold <= now then
      new_member = fair_push(id, fkey)
    else
      redis.call('ZADD', k('delayed'), hold, id)
    end
    hset(h, 'run_at', hold, 'due', hold, 'rmember', new_member)
    moved = moved + 1
  else
    -- An index entry left behind (the job moved on): drop it.
    zrem('retry_at', id)
  end
end
flush()
return moved
