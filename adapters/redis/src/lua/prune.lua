-- Deletes the finished jobs a retention no longer keeps, looking at up to `limit` ids per call.
-- Succeeded jobs are indexed in `finished` and dead ones in `dead_at`, each by finish time, so
-- each outcome is read only up to its own cutoff and a kept outcome is never read at all.
-- Versions of this crate before `dead_at` indexed dead jobs in `finished` too; steps 1 and 2
-- move such entries to `dead_at`, so each is read at most once more.
-- 1. With a succeeded cutoff: the entries of `finished` at or before it. A succeeded job is
--    deleted; a dead one (written by an older version) is deleted when the dead cutoff covers
--    it, else moved to `dead_at` with its finish time. Every entry read leaves `finished`.
-- 2. With a dead cutoff: a walk by id over `st:dead`, resumed from the cursor `dwalk` in
--    `meta`, that moves every dead job missing from `dead_at` there (with its time in
--    `finished`, else its `at` field). A walk starts only when `st:dead` holds more ids than
--    `dead_at` (some dead job is not indexed by death time: an older version wrote it, maybe
--    while this one runs) and the caller allows it (once per prune of the queue), so a queue
--    whose dead jobs are all indexed costs two ZCARDs here.
-- 3. With a dead cutoff: the entries of `dead_at` at or before it; each dead job is deleted.
-- An entry whose job is gone is cleaned up, and one whose job is no longer finished (an older
-- version revived it without knowing `dead_at`) is dropped from the index: never deleted.
-- A dead job that jobs wait for (blocked on it) is kept, in `dead_at`: those of its own queue
-- are in `deps:<id>`; those of other queues are registered in `xdeps:<id>`, where an entry
-- stays when its job is purged, so the call returns them for the caller to check in their
-- queues (dropping stale ones with depend.lua's 'forget' before pruning again).
-- ARGV: now, succeeded cutoff ('' keeps succeeded jobs), dead cutoff ('' keeps dead jobs),
-- limit, walk ('1' when a walk may start), skip (the entries of `dead_at` up to the cutoff
-- that earlier calls of this prune kept: step 3 starts after them).
-- Returns {more, walked, kept, n, n deleted ids..., then id, dependent pairs}: more is 1 when
-- the call used its whole budget (call again), walked is 1 when the call decided whether to
-- start a walk (the caller then allows no other start in this prune, so a prune walks
-- `st:dead` at most once from the start), kept counts the dead jobs step 3 kept because jobs
-- wait for them, and each pair names a kept job and a registered dependent of another queue.
local now, cs, cd = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local budget, may_walk = tonumber(ARGV[4]), ARGV[5] == '1'
local skip = tonumber(ARGV[6]) or 0
local deleted = {}
local walked = 0
local kept = 0
local held = {}

-- Whether jobs wait for dead job `id`, and its registered dependents in other queues.
local function waited_on(id)
  if redis.call('SCARD', k('deps:' .. id)) > 0 then return true, {} end
  local others = redis.call('SMEMBERS', k('xdeps:' .. id))
  return #others > 0, others
end

if cs then
  local entries = redis.call('ZRANGEBYSCORE', k('finished'), '-inf', cs, 'WITHSCORES', 'LIMIT', 0, budget)
  for i = 1, #entries, 2 do
    local id, at = entries[i], entries[i + 1]
    local state = redis.call('HGET', jk(id), 'state')
    if state == 'succeeded'
      or (state == 'dead' and cd and tonumber(at) <= cd and not waited_on(id)) then
      delete_job(id)
      deleted[#deleted + 1] = id
    elseif state == 'dead' then
      redis.call('ZADD', k('dead_at'), at, id)
      redis.call('ZREM', k('finished'), id)
    elseif not state then
      delete_job(id)
    else
      redis.call('ZREM', k('finished'), id)
    end
  end
  budget = budget - #entries / 2
end

if cd and budget > 0 then
  local cursor = redis.call('HGET', k('meta'), 'dwalk')
  -- A walk left part way by an earlier prune goes on; after it, this prune may start one.
  if not cursor then walked = 1 end
  if not cursor and may_walk
    and redis.call('ZCARD', k('st:dead')) > redis.call('ZCARD', k('dead_at')) then
    cursor = ''
  end
  if cursor then
    local from = '-inf'
    if cursor ~= '' then from = '(' .. cursor end
    local ids = redis.call('ZRANGEBYSCORE', k('st:dead'), from, '+inf', 'LIMIT', 0, budget)
    for _, id in ipairs(ids) do
      if not redis.call('ZSCORE', k('dead_at'), id) then
        local state, at = unpack(redis.call('HMGET', jk(id), 'state', 'at'))
        if state == 'dead' then
          local score = redis.call('ZSCORE', k('finished'), id) or tonumber(at) or now
          redis.call('ZADD', k('dead_at'), score, id)
          redis.call('ZREM', k('finished'), id)
        elseif not state then
          delete_job(id)
        else
          redis.call('ZREM', k('st:dead'), id)
        end
      end
    end
    if #ids < budget then
      redis.call('HDEL', k('meta'), 'dwalk')
    else
      hset(k('meta'), 'dwalk', ids[#ids])
    end
    budget = budget - #ids
  end
end

if cd and budget > 0 then
  local ids = redis.call('ZRANGEBYSCORE', k('dead_at'), '-inf', cd, 'LIMIT', skip, budget)
  for _, id in ipairs(ids) do
    local state = redis.call('HGET', jk(id), 'state')
    local waited, others = false, {}
    if state == 'dead' then waited, others = waited_on(id) end
    if waited then
      kept = kept + 1
      for _, other in ipairs(others) do
        held[#held + 1] = id
        held[#held + 1] = other
      end
    elseif state == 'dead' then
      delete_job(id)
      deleted[#deleted + 1] = id
    elseif not state then
      delete_job(id)
    else
      redis.call('ZREM', k('dead_at'), id)
    end
  end
  budget = budget - #ids
end

flush()
local more = 0
if budget <= 0 then more = 1 end
local reply = {more, walked, kept, #deleted}
for i = 1, #deleted do reply[#reply + 1] = deleted[i] end
for i = 1, #held do reply[#reply + 1] = held[i] end
return reply
