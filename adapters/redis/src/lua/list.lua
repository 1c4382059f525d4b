-- Pages through an index by id (`all`, or a status's own set), keeping the jobs in `status`
-- ('' for any), looking at most `budget` ids.
-- ARGV: index, after ('' = from the start), limit, budget, status.
-- Returns {last id looked at, or '' when the walk reached the end; matching ids...}.
local index, after, limit, budget, status = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local from = '-inf'
if after ~= '' then from = '(' .. after end
local ids = redis.call('ZRANGEBYSCORE', k(index), from, '+inf', 'LIMIT', 0, budget)
local reply = {''}
local last = nil
for _, id in ipairs(ids) do
  if #reply > limit then break end
  last = id
  if status == '' or redis.call('HGET', jk(id), 'state') == status then
    reply[#reply + 1] = id
  end
end
if last and (#ids == budget or last ~= ids[#ids]) then reply[1] = last end
return reply
