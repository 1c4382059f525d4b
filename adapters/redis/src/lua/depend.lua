-- Cross-queue dependencies, run on the queue of the job depended on.
-- ARGV: mode ('register' or 'check'), dep_id, dependent ('<queue>\n<id>', mode 'register').
-- Returns 'missing', 'succeeded' or 'pending'.
local mode, dep = ARGV[1], ARGV[2]
local state = redis.call('HGET', jk(dep), 'state')
if not state then return 'missing' end
if state == 'succeeded' then return 'succeeded' end
if mode == 'register' then redis.call('SADD', k('xdeps:' .. dep), ARGV[3]) end
return 'pending'
