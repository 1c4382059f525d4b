-- Deletes jobs in the given statuses (never running ones), walking an index by id: `all`, or
-- a status's own set when only that status is purged.
-- ARGV: index, after ('' = from the start), budget (ids looked at), statuses...
-- Returns {last id looked at, or '' when the walk reached the end; {deleted ids...};
-- {id, dep_id, ...}}: the last, for each deleted job that was blocked on a job of another
-- queue, the pair whose registration the caller drops in that queue (see delete_job).
local index, after, budget = ARGV[1], ARGV[2], tonumber(ARGV[3])
local wanted = {}
for i = 4, #ARGV do wanted[ARGV[i]] = true end
wanted['running'] = nil
local from = '-inf'
if after ~= '' then from = '(' .. after end
local ids = redis.call('ZRANGEBYSCORE', k(index), from, '+inf', 'LIMIT', 0, budget)
local deleted, others = {}, {}
for _, id in ipairs(ids) do
  local state = redis.call('HGET', jk(id), 'state')
  if state == nil then
    delete_job(id)
  elseif wanted[state] then
    local other = delete_job(id)
    deleted[#deleted + 1] = id
    if other then
      others[#others + 1] = id
      others[#others + 1] = other
    end
  end
end
local cursor = ''
if #ids == budget then cursor = ids[#ids] end
flush()
return {cursor, deleted, others}
