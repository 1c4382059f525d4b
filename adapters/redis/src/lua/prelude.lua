-- Shared helpers, prepended to every per-queue script.
-- KEYS[1] is the queue's key base "<prefix>:{<queue>}:"; every key a script touches starts with
-- it, so all of them share the queue's hash tag (one Redis Cluster slot). KEYS[2] is a key of the
-- same slot that is never written: declared only so that Redis Cluster refuses the call while the
-- slot is half-moved between masters (see `keys::absent`).
--
-- Writes to the queue-wide structures (sorted sets, counters, fairness tails) are collected in
-- Lua tables while a script runs and applied by flush() as one variadic command per key, so a
-- batch of N jobs costs a few commands per job for its job hashes plus a constant number for the
-- shared structures.
local base = KEYS[1]
local function k(name) return base .. name end
local function jk(id) return base .. 'job:' .. id end

-- A count of a job hash (its attempts, its lease token) as a number, or nil when the stored
-- value is not decimal digits only, at most 15 of them (exact in Lua; the scripts write counts
-- so): missing, fractional ('1.5', which tonumber takes and which then makes a token no
-- settlement presents), negative, or not a number. Such a record was written behind the
-- store's back; the claim and the rescue set it aside. (rescue.rs reads counts by the same
-- rule.)
local function whole(v)
  if type(v) ~= 'string' or #v > 15 or not string.find(v, '^%d+$') then return nil end
  return tonumber(v)
end

-- Numbers written to Redis ----------------------------------------------------------------------
-- Redis 7.2.0 to 7.2.4 hand a Lua number argument to the command in its shortest form, and for
-- a multiple of 10^8 that is exponent notation (1700000000000 becomes "1.7e+12"; fixed in 7.2.5,
-- redis/redis#13113). Written into a job's hash, such a time or count would not read back as an
-- integer (the store would set the job aside as damaged), and HINCRBY refuses it. So every hash
-- write and every integer argument goes through these, which pass integral numbers as decimal
-- digits; strings and fractions go as they are. (A unit test in scripts.rs checks that no
-- script writes a hash without them.)
local function int(v)
  if type(v) == 'number' and v == math.floor(v) and v >= -9007199254740992
      and v <= 9007199254740992 then
    return string.format('%d', v)
  end
  return v
end

-- HSET key field value [field value ...], integral numbers as digits.
local function hset(key, ...)
  local n = select('#', ...)
  local args = {...}
  for i = 1, n do args[i] = int(args[i]) end
  return redis.call('HSET', key, unpack(args, 1, n))
end

-- HINCRBY key field n, n as digits.
local function hincrby(key, field, n)
  return redis.call('HINCRBY', key, field, int(n))
end

-- Repeated calls --------------------------------------------------------------------------------
-- A call whose reply was lost is repeated (see call.rs). A script whose effect a repeat cannot
-- recognise from the jobs alone keeps its reply under the call's request id for the client's
-- whole retry window (`keep_ms`, passed by the client: call::request_keep_ms), and every try
-- looks for it first: a repeat, and also a first try that reaches the server only after its
-- repeat went through, answers the kept reply instead of running again.

-- The reply kept for request `rid`, else nil.
local function recall(rid)
  if rid == '' then return nil end
  local kept = redis.call('GET', k('req:' .. rid))
  if kept then return cjson.decode(kept) end
  return nil
end

-- Keeps `reply` (an array of strings, numbers and such arrays) for request `rid` for `keep_ms`
-- milliseconds; returns it.
local function remember(rid, reply, keep_ms)
  if rid ~= '' then
    redis.call('SET', k('req:' .. rid), cjson.encode(reply), 'PX', int(keep_ms))
  end
  return reply
end

-- Collected writes ----------------------------------------------------------------------------
local zadds = {}    -- key name -> {score, member, score, member, ...}
local zrems = {}    -- key name -> {member, ...}
local counts = {}   -- status -> change of its counter
local rstat = {}    -- retry counter -> change
local ready_now = 0 -- jobs made claimable (one wake-up signal each)

local function zadd(name, score, member)
  local t = zadds[name]
  if not t then t = {}; zadds[name] = t end
  t[#t + 1] = score
  t[#t + 1] = member
end

local function zrem(name, member)
  local t = zrems[name]
  if not t then t = {}; zrems[name] = t end
  t[#t + 1] = member
end

local function count(status, n)
  counts[status] = (counts[status] or 0) + n
end

local function bump(field, n)
  rstat[field] = (rstat[field] or 0) + n
end

-- The fair order's state, read once per script (see fair_push).
local meta_loaded, current, pushseq, pushseq0 = false, 0, 0, 0
local tails, tails_dirty = {}, {}

local function load_meta()
  if meta_loaded then return end
  local c, p = unpack(redis.call('HMGET', k('meta'), 'current', 'pushseq'))
  current, pushseq = tonumber(c or '0'), tonumber(p or '0')
  pushseq0 = pushseq
  meta_loaded = true
end

-- Big sorted-set writes go out in slices: Lua's unpack has a stack limit.
local SLICE = 4000
local function variadic(cmd, key, items)
  for i = 1, #items, SLICE do
    local last = math.min(i + SLICE - 1, #items)
    redis.call(cmd, key, unpack(items, i, last))
  end
end

-- Set when a job joined the delayed set ahead of every job waiting there (see make_due).
local sooner = false

-- Wakes one blocked waiter per ready job, keeping the signal list short.
local function signal(n)
  if n > 0 then
    local items = {}
    for i = 1, math.min(n, 64) do items[i] = '1' end
    redis.call('LPUSH', k('signal'), unpack(items))
    redis.call('LTRIM', k('signal'), 0, 63)
  end
end

-- Applies the collected writes to the queue's structures (sorted sets, fairness tails, the
-- push sequence): a script calls it before reading a structure it changed (the claim after a
-- settlement reads `ready`).
local function flush_sets()
  for name, items in pairs(zrems) do variadic('ZREM', k(name), items) end
  zrems = {}
  for name, items in pairs(zadds) do variadic('ZADD', k(name), items) end
  zadds = {}
  local fields = {}
  for fkey in pairs(tails_dirty) do
    fields[#fields + 1] = 't' .. fkey
    fields[#fields + 1] = tails[fkey]
  end
  if #fields > 0 then variadic('HSET', k('keys'), fields) end
  tails_dirty = {}
  if meta_loaded and pushseq ~= pushseq0 then
    hset(k('meta'), 'pushseq', pushseq)
    pushseq0 = pushseq
  end
end

-- Applies every collected write; scripts call it at their end. Counters are only ever added
-- to, so changes that cancel out within one script (a settled job's running slot taken by
-- the next claim) cost nothing.
local function flush()
  flush_sets()
  for status, n in pairs(counts) do
    if n ~= 0 then hincrby(k('counts'), status, n) end
  end
  counts = {}
  for field, n in pairs(rstat) do
    if n ~= 0 then hincrby(k('rstat'), field, n) end
  end
  rstat = {}
  -- One more token when the queue's next due time moved earlier: a waiter sleeps until the
  -- due time it saw, so it wakes to look again (a delayed job, a retry, a rescue).
  signal(ready_now + (sooner and 1 or 0))
  ready_now = 0
  sooner = false
end

-- Fairness ------------------------------------------------------------------------------------
-- The fair ready set mirrors the round engine of fairq-core (core/src/fair/engine.rs): a job
-- joins the round after its key's last queued job, but never a round before current + 1 (the
-- snapshot being served is closed). Members sort by a per-queue push sequence inside a round
-- (equal scores sort by member). Returns the member, which the caller stores in the job hash
-- as `rmember` (so the job can be taken out of the set again).
local function fair_push(id, fkey)
  load_meta()
  local tail = tails[fkey]
  if tail == nil then
    tail = tonumber(redis.call('HGET', k('keys'), 't' .. fkey) or '0')
  end
  local round = tail + 1
  if round < current + 1 then round = current + 1 end
  tails[fkey] = round
  tails_dirty[fkey] = true
  pushseq = pushseq + 1
  local member = string.format('%016d:%s', pushseq, id)
  zadd('ready', round, member)
  ready_now = ready_now + 1
  return member
end

-- A job taken out of the fair order (purged, or its retry held back) leaves its member in the
-- ready set, superseded: the claim skips a member that is not its job's current `rmember`, as
-- the reference store skips a superseded entry of its fair queue. The rounds then stay exactly
-- the reference's (the key's tail and the round being served move as if the entry were there).

-- Most delayed jobs one call promotes into the fair order (claims pass their own limit).
local PROMOTE_LIMIT = 10000
local promoted = false

-- Moves delayed jobs whose time has come into the fair order, by run time, then id. Runs at
-- most once per script: time does not move while a script runs.
local function promote(now, limit)
  if promoted then return end
  promoted = true
  local due = redis.call('ZRANGEBYSCORE', k('delayed'), '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  if #due == 0 then return end
  local batch, ids = {}, {}
  for i = 1, #due, 2 do
    batch[#batch + 1] = {tonumber(due[i + 1]), tonumber(due[i]), due[i]}
    ids[#ids + 1] = due[i]
  end
  table.sort(batch, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
  variadic('ZREM', k('delayed'), ids)
  for _, entry in ipairs(batch) do
    local id = entry[3]
    local h = jk(id)
    local fkey = redis.call('HGET', h, 'fkey')
    if fkey then
      hset(h, 'rmember', fair_push(id, fkey))
    end
  end
end

-- Files a job that waits for time only (scheduled or retrying) to become claimable at run_at:
-- at once (after the jobs that fell due before it) or through the delayed set. Returns the
-- ready-set member when it is claimable now (the caller stores it as `rmember`), else nil.
local function make_due(id, fkey, run_at, now)
  if run_at <= now then
    promote(now, PROMOTE_LIMIT)
    return fair_push(id, fkey)
  end
  if not sooner then
    local first = redis.call('ZRANGE', k('delayed'), 0, 0, 'WITHSCORES')
    sooner = #first == 0 or tonumber(first[2]) > run_at
  end
  redis.call('ZADD', k('delayed'), run_at, id)
  return nil
end

-- Leases ----------------------------------------------------------------------------------------
-- fairq-core's fencing rule (Lifecycle::running_lease) on a job's stored state and token:
-- returns nil when `token` holds the running lease, or a refusal: {'stale', current token or
-- ''}, {'notrunning', state} or {'notfound'}. A stored token that is not a whole number
-- fences every token out.
local function fence(state, current, token)
  if not state then return {'notfound'} end
  current = whole(current)
  if state == 'running' then
    if current ~= token then return {'stale', current and tostring(current) or ''} end
    return nil
  end
  if not current then return {'notrunning', state} end
  local final = state == 'succeeded' or state == 'dead'
  if final and token == current then return {'notrunning', state} end
  if token ~= 0 and token <= current then return {'stale', ''} end
  return {'notrunning', state}
end

-- The last error recorded when a lease expires.
local LEASE_EXPIRED = 'lease expired: the worker stopped renewing it'

-- How long a job blocked on another queue's job waits before its dependency is looked at again
-- (see maintain.lua).
local XWAIT_RECHECK = 60000

-- Gives up a unique key held by a job that finished or was deleted.
local function release_unique(u, id)
  if u and redis.call('HGET', k('uniq'), u) == id then redis.call('HDEL', k('uniq'), u) end
end

-- Sets aside as dead a job in `state` (scheduled, retrying or running) whose record cannot
-- run (see claim_jobs and rescue.lua), with `why` as its last error: out of its state's
-- indexes, its unique key given up, its counts written whole.
local function set_aside(id, h, state, now, why)
  local attempts, token, uniq, first_error = unpack(redis.call('HMGET', h, 'attempts', 'token',
    'uniq', 'first_error_at'))
  count(state, -1)
  count('dead', 1)
  if state == 'retrying' then zrem('st:retrying', id); zrem('retry_at', id) end
  if state == 'running' then zrem('leased', id) end
  if first_error then zrem('errs', id) end
  zadd('st:dead', id, id)
  zadd('dead_at', now, id)
  release_unique(uniq, id)
  hset(h, 'state', 'dead', 'at', now, 'reason', 'discarded',
    'attempts', whole(attempts) or 0, 'token', whole(token) or 0, 'last_error', why)
end

-- When a blocked job released at `now` is due: the later of its own run time (kept in its
-- `run_at` while it is blocked; a job blocked before the field was kept has none) and `now`,
-- as fairq-core's Lifecycle::dependency_succeeded rules.
local function release_due(run_at, now)
  local own = tonumber(run_at)
  if own and own > now then return own end
  return now
end

-- Releases the blocked dependents in this queue of a job that succeeded and returns its
-- dependents in other queues ('<queue>\n<id>' each) for the caller to release there.
local function release_dependents(id, now)
  local deps = k('deps:' .. id)
  -- In id order, which is enqueue order, as the reference store releases them: a set lists
  -- its members in no set order once it outgrows the integer encoding. Ids are decimal
  -- strings without leading zeros, so the shorter is the smaller.
  local waiting = redis.call('SMEMBERS', deps)
  table.sort(waiting, function(a, b) return #a < #b or (#a == #b and a < b) end)
  for _, d in ipairs(waiting) do
    local dh = jk(d)
    local state, fkey, run_at = unpack(redis.call('HMGET', dh, 'state', 'fkey', 'run_at'))
    if state == 'blocked' then
      redis.call('ZREM', k('st:blocked'), d)
      count('blocked', -1)
      count('scheduled', 1)
      local due = release_due(run_at, now)
      local member = make_due(d, fkey, due, now)
      hset(dh, 'state', 'scheduled', 'run_at', due, 'due', due, 'rmember', member or '')
    end
  end
  redis.call('DEL', deps)
  local xdeps = k('xdeps:' .. id)
  local others = redis.call('SMEMBERS', xdeps)
  redis.call('DEL', xdeps)
  return others
end

-- Applies core's verdict for a failed attempt (a handler failure or an expired lease) to a
-- running job whose fields `f` were read by the caller (see SETTLE_FIELDS). `verdict` is
-- 'retry' (with run_at) or 'dead' (with its reason); nothing here decides between them.
local function apply_failure(id, h, f, now, verdict, run_at, reason, message)
  local attempts, first_error, uniq, fkey = f[3], f[5], f[7], f[8]
  zrem('leased', id)
  count('running', -1)
  bump('failures', 1)
  local sets = {'last_error', message}
  if not first_error then
    sets[#sets + 1] = 'first_error_at'
    sets[#sets + 1] = now
  end
  if verdict == 'retry' then
    sets[#sets + 1] = 'state'; sets[#sets + 1] = 'retrying'
    sets[#sets + 1] = 'run_at'; sets[#sets + 1] = run_at
    sets[#sets + 1] = 'due'; sets[#sets + 1] = run_at
    count('retrying', 1)
    zadd('st:retrying', id, id)
    zadd('retry_at', run_at, id)
    if not first_error then zadd('errs', now, id) end
    local member = make_due(id, fkey, run_at, now)
    if member then
      sets[#sets + 1] = 'rmember'
      sets[#sets + 1] = member
    end
  else
    sets[#sets + 1] = 'state'; sets[#sets + 1] = 'dead'
    sets[#sets + 1] = 'at'; sets[#sets + 1] = now
    sets[#sets + 1] = 'reason'; sets[#sets + 1] = reason
    count('dead', 1)
    zadd('st:dead', id, id)
    zadd('dead_at', now, id)
    if first_error then zrem('errs', id) end
    bump('dead', 1)
    bump('retries', (whole(attempts) or 1) - 1)
    release_unique(uniq, id)
  end
  hset(h, unpack(sets))
end

-- The job fields settle, release and rescue read, in this order.
local SETTLE_FIELDS = {'state', 'token', 'attempts', 'claimed_at', 'first_error_at', 'hd', 'uniq', 'fkey'}

-- Clears job `id`'s mark that it has dependents (`hd`: its success is kept, and looks them
-- up) once no job is left waiting for it: its `deps:<id>` and `xdeps:<id>` sets are gone (Redis
-- deletes a set emptied by its last SREM). Called where a dependent leaves one of those sets
-- without `id` succeeding (the dependent purged or cancelled, a stale registration dropped),
-- so that a store not keeping successes deletes `id`'s success as if it never had dependents,
-- as the reference store does. Every dependent is in one of the sets from the script that
-- marks `id` on (enqueue.lua, depend.lua's 'register') until `id` succeeds, so an empty pair
-- means none waits.
local function unmark_dependents(id)
  if redis.call('EXISTS', k('deps:' .. id), k('xdeps:' .. id)) == 0 then
    redis.call('HDEL', jk(id), 'hd')
  end
end

-- Deletes a job that is not running from every structure (its dependents stay blocked). For
-- an id whose job is gone, drops what the walks by id and the prune's indexes still hold.
-- A blocked job leaves its dependency's `deps:<id>` set, and the dependency's mark is cleared
-- when it was the last (unmark_dependents). A blocked job whose dependency is in another queue
-- is registered there, where no script of this queue can reach (another Cluster slot): its
-- dependency's id is returned, for the caller to drop the registration in that queue
-- (deps.rs, `forget_registrations`); else nil.
local function delete_job(id)
  local h = jk(id)
  local state, dep, uniq = unpack(redis.call('HMGET', h, 'state', 'dep', 'uniq'))
  if not state then
    redis.call('ZREM', k('all'), id)
    redis.call('ZREM', k('finished'), id)
    redis.call('ZREM', k('dead_at'), id)
    redis.call('ZREM', k('st:dead'), id)
    return nil
  end
  redis.call('ZREM', k('delayed'), id)
  redis.call('ZREM', k('errs'), id)
  -- A dead job is in `dead_at`, or in `finished` when an older version wrote it.
  redis.call('ZREM', k('finished'), id)
  redis.call('ZREM', k('dead_at'), id)
  redis.call('ZREM', k('all'), id)
  redis.call('ZREM', k('xwait'), id)
  if state == 'blocked' or state == 'retrying' or state == 'dead' then
    redis.call('ZREM', k('st:' .. state), id)
  end
  if state == 'retrying' then redis.call('ZREM', k('retry_at'), id) end
  count(state, -1)
  release_unique(uniq, id)
  local other = nil
  if dep then
    if redis.call('SREM', k('deps:' .. dep), id) == 1 then
      unmark_dependents(dep)
    elseif state == 'blocked' then
      -- A job id is seq * 65536 + its queue's number (keys.rs): is the dependency another
      -- queue's?
      local dn, idn = tonumber(dep), tonumber(id)
      if dn and idn and dn % 65536 ~= idn % 65536 then other = dep end
    end
  end
  redis.call('DEL', h, k('deps:' .. id), k('xdeps:' .. id), k('xrel:' .. id))
  return other
end

-- Claims ----------------------------------------------------------------------------------------
-- Claims up to `max` due jobs fairly, each under a lease ending at now + lease. Returns one
-- array per job: {id, kind, fkey, payload, attempt, token, deadline, enq, due, retry, meta}.
-- A popped job whose record cannot run (missing or unreadable fields) is set aside as dead
-- with an error saying so, and the claim goes on with the next job.
local function claim_jobs(now, max, lease, limit)
  promote(now, limit)
  flush_sets()
  local out = {}
  -- A paused queue hands out nothing (lua/pause.lua).
  if max > 0 and redis.call('EXISTS', k('paused')) == 1 then max = 0 end
  if max <= 0 then
    flush()
    return out
  end
  local deadline = now + lease
  local deadline_s = string.format('%d', deadline)
  local last_round
  -- Superseded members do not count: pop again until `max` jobs or an empty set.
  while #out < max do
    local popped = redis.call('ZPOPMIN', k('ready'), max - #out)
    if #popped == 0 then break end
    last_round = popped[#popped]
    for i = 1, #popped, 2 do
      local member = popped[i]
      local id = string.match(member, ':(%d+)$')
      local h = jk(id)
      local f = redis.call('HMGET', h, 'state', 'attempts', 'token', 'kind', 'fkey', 'payload',
        'enq', 'due', 'retry', 'meta', 'rmember')
      local state, attempts, token = f[1], whole(f[2]), whole(f[3])
      local current_member = (not f[11]) or f[11] == member
      if current_member and (state == 'scheduled' or state == 'retrying') then
        if attempts and token and f[4] and f[5] and f[6] and f[7] and f[8] and f[9] then
          attempts, token = attempts + 1, token + 1
          hset(h, 'state', 'running', 'attempts', attempts, 'token', token,
            'deadline', deadline, 'claimed_at', now)
          count(state, -1)
          count('running', 1)
          if state == 'retrying' then zrem('st:retrying', id); zrem('retry_at', id) end
          zadd('leased', deadline, id)
          out[#out + 1] = {id, f[4], f[5], f[6], string.format('%d', attempts),
            string.format('%d', token), deadline_s, f[7], f[8], f[9], f[10] or '{}'}
        else
          set_aside(id, h, state, now, 'corrupt record: attempts, token or job fields unreadable')
        end
      end
    end
  end
  if not last_round then
    flush()
    return out
  end
  load_meta()
  current = tonumber(last_round)
  hset(k('meta'), 'current', last_round)
  flush()
  return out
end
