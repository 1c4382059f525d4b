-- Deletes up to `limit` jobs in the given statuses (never running ones).
-- ARGV: limit, statuses... Returns the deleted ids.
local limit = tonumber(ARGV[1])
local deleted = {}
for i = 2, #ARGV do
  local status = ARGV[i]
  if status ~= 'running' and #deleted < limit then
    local ids = redis.call('ZRANGE', k('st:' .. status), 0, limit - #deleted - 1)
    for _, id in ipairs(ids) do
      delete_job(id)
      deleted[#deleted + 1] = id
    end
  end
end
return deleted
