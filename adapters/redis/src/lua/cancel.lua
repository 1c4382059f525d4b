-- Operator cancel: deletes one job that is not running, as purge deletes a job (its ready
-- entry, indexes, counters and unique key go; jobs blocked on it keep waiting; a dependency
-- it was the last blocked dependent of loses its mark, see delete_job).
-- ARGV: id, retried ('1' when this call repeats one whose reply was lost).
-- Returns {'ok'}, {'ok', dep_id} (the job was blocked on dep_id of another queue, where the
-- caller drops its registration), {'running'} or {'notfound'}.
local id, retried = ARGV[1], ARGV[2] == '1'
local state = redis.call('HGET', jk(id), 'state')
if not state then
  -- A repeated call whose first try deleted the job answers as that try did (but for the
  -- registration to drop, which that try's reply named: it stays, see deps.rs).
  if retried then return {'ok'} end
  return {'notfound'}
end
if state == 'running' then return {'running'} end
local other = delete_job(id)
flush()
if other then return {'ok', other} end
return {'ok'}
