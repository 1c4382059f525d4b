-- Numbers a queue in the deployment's registry, once per queue ever. Job ids carry the
-- number (id = seq * 65536 + number), so a job's queue is known from its id alone.
-- KEYS[1]: the registry hash (fields 'n:<name>' -> number, 'q:<number>' -> name, 'next').
-- ARGV: queue name. Returns the number, or {'full'} when all 65,535 are taken.
local reg, name = KEYS[1], ARGV[1]
local n = redis.call('HGET', reg, 'n:' .. name)
if n then return tonumber(n) end
local next = redis.call('HINCRBY', reg, 'next', 1)
if next > 65535 then
  redis.call('HINCRBY', reg, 'next', -1)
  return {'full'}
end
redis.call('HSET', reg, 'n:' .. name, next, 'q:' .. next, name)
return next
