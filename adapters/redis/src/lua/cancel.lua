-- Operator cancel: deletes one job that is not running, as purge deletes a job (its ready
-- entry, indexes, counters and unique key go; jobs blocked on it keep waiting).
-- ARGV: id, retried ('1' when this call repeats one whose reply was lost).
-- Returns {'ok'}, {'running'} or {'notfound'}.
local id, retried = ARGV[1], ARGV[2] == '1'
local state = redis.call('HGET', jk(id), 'state')
if not state then
  -- A repeated call whose first try deleted the job answers as that try did.
  if retried then return {'ok'} end
  return {'notfound'}
end
if state == 'running' then return {'running'} end
delete_job(id)
flush()
return {'ok'}
