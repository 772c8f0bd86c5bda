-- Limits and metering (issue 15, the rest).
--
-- Requests per second per API key: the organisation's own rate and burst;
-- NULL: sbx-api's settings api_key_rate_per_s / api_key_burst; a rate of 0:
-- no limit for this organisation. Read with the key (sbx-api caches it;
-- orgs_auth_notify of 013 empties the caches when these change).
ALTER TABLE orgs ADD COLUMN key_rate_per_s integer CHECK (key_rate_per_s >= 0);
ALTER TABLE orgs ADD COLUMN key_burst integer CHECK (key_burst >= 0);

-- Execs (exec, code) one sandbox may run at once: the organisation's own
-- number; NULL: sbx-api's setting sandbox_max_execs. Counted with advisory
-- locks like the organisation's streams (src/api/limits.c).
ALTER TABLE orgs ADD COLUMN max_sandbox_execs integer CHECK (max_sandbox_execs BETWEEN 1 AND 10000);
