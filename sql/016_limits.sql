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

-- Volume GB-hours (usage metering): a volume's row goes once its node has
-- removed the image (h_volumes.c), so what it cost is kept here first: its
-- size and life, for GET /usage and sbx-admin usage (src/lib/usage.c).
-- The trigger keeps it whatever path deletes the row.
CREATE TABLE volumes_gone (
	id              char(24) PRIMARY KEY,
	org_id          char(24) NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
	size_gb         integer NOT NULL,
	created_at      timestamptz NOT NULL,
	deleted_at      timestamptz NOT NULL
);
CREATE INDEX volumes_gone_org ON volumes_gone(org_id, deleted_at);

CREATE FUNCTION sbx_volume_gone() RETURNS trigger
	LANGUAGE plpgsql AS
$$ BEGIN
	INSERT INTO volumes_gone (id, org_id, size_gb, created_at, deleted_at)
	VALUES (OLD.id, OLD.org_id, OLD.size_gb, OLD.created_at, coalesce(OLD.deleted_at, now()))
	ON CONFLICT (id) DO NOTHING;
	RETURN NULL;
END $$;

CREATE TRIGGER volumes_gone_keep
	AFTER DELETE ON volumes
	FOR EACH ROW EXECUTE FUNCTION sbx_volume_gone();
