-- Removes a queue that has no live job, in slices: each call deletes up to `budget` of its
-- jobs (all finished: a live one stops the removal); the call that finds none left deletes the
-- queue's own structures (its pause too). `meta` stays: it holds the queue's id sequence, so a job id is never
-- handed out twice, and nothing that stats or listings read.
-- ARGV: budget. Returns {'unknown'}, {'live', n}, or {'more' or 'done', deleted ids...}.
local budget = tonumber(ARGV[1])
local c = redis.call('HMGET', k('counts'), 'blocked', 'scheduled', 'running', 'retrying')
local live = 0
for i = 1, 4 do live = live + tonumber(c[i] or '0') end
if live > 0 then return {'live', live} end
if redis.call('EXISTS', k('counts'), k('rstat'), k('pstat'), k('hist'), k('all'), k('paused')) == 0 then
  return {'unknown'}
end
local ids = redis.call('ZRANGE', k('all'), 0, budget - 1)
local reply = {'more'}
for _, id in ipairs(ids) do
  delete_job(id)
  reply[#reply + 1] = id
end
flush()
if #ids < budget then
  redis.call('DEL', k('counts'), k('rstat'), k('pstat'), k('hist'), k('all'), k('finished'),
    k('dead_at'), k('st:blocked'), k('st:retrying'), k('st:dead'), k('errs'), k('uniq'),
    k('xwait'), k('keys'), k('ready'), k('delayed'), k('retry_at'), k('leased'), k('signal'),
    k('paused'))
  -- The prune's walk over `st:dead` (lua/prune.lua) has nothing left to walk.
  redis.call('HDEL', k('meta'), 'dwalk')
  reply[1] = 'done'
end
return reply
