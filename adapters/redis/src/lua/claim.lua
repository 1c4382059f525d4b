-- Promotes due delayed jobs, then claims up to `max` jobs fairly under a lease.
-- ARGV: now, max, lease_ms, promote_limit. Returns claim_jobs' rows.
return claim_jobs(tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
