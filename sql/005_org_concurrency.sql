-- Per-organisation overrides of the API's concurrency limits (issue 8):
-- requests in flight at once, and long-running ones among them (exec,
-- output follow, file transfers, wait). NULL: the settings
-- api_org_max_requests / api_org_max_streams apply. The API counts them with
-- advisory locks on its own connections (src/api/limits.c), not in a table.
ALTER TABLE orgs
	ADD COLUMN max_concurrent_requests integer
		CHECK (max_concurrent_requests BETWEEN 1 AND 10000),
	ADD COLUMN max_concurrent_streams integer
		CHECK (max_concurrent_streams BETWEEN 1 AND 10000);
