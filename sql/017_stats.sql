-- Stats samples and snapshot storage metering (issue 15).
--
-- A sandbox's resource use over time (GET /sandboxes/{id}/stats): the node
-- agent samples each ready sandbox's cgroups, disk and interfaces every
-- 15 s and writes the samples here, batched, off its loop
-- (workers/node_stats.c); the API reads them back (src/api/h_stats.c), so
-- a restart of the agent loses no history. Counters are cumulative (CPU
-- time, bytes), so any two samples give the mean rate between them. NULL:
-- the node could not read it. The reaper deletes samples older than the
-- setting stats_retention_hours, in bounded batches (workers/reaper.c).
-- Keyed by the record, not the placement: the history goes on across a
-- pause and a resume, and outlives the sandbox until the retention.
CREATE TABLE sandbox_stats (
	sandbox_id      char(24) NOT NULL,
	t               timestamptz NOT NULL,
	cpu_usec        bigint,
	mem_bytes       bigint,
	disk_bytes      bigint,
	pids            bigint,
	net_rx          bigint,
	net_tx          bigint,
	PRIMARY KEY (sandbox_id, t)
);
CREATE INDEX sandbox_stats_t ON sandbox_stats(t);

-- Snapshot storage (GB-hours, GET /usage and sbx-admin usage): a snapshot
-- costs its size (size_bytes, the layer it adds in the registry) from its
-- creation to its delete. A deleted snapshot's row goes, so what it cost is
-- kept here first, whatever path deletes it (the API, the pruning of
-- automatic snapshots), like volumes_gone (016_limits.sql).
CREATE TABLE snapshots_gone (
	id              char(24) PRIMARY KEY,
	org_id          char(24) NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
	size_bytes      bigint NOT NULL,
	created_at      timestamptz NOT NULL,
	deleted_at      timestamptz NOT NULL
);
CREATE INDEX snapshots_gone_org ON snapshots_gone(org_id, deleted_at);

CREATE FUNCTION sbx_snapshot_gone() RETURNS trigger
	LANGUAGE plpgsql AS
$$ BEGIN
	IF OLD.size_bytes IS NOT NULL THEN
		INSERT INTO snapshots_gone (id, org_id, size_bytes, created_at, deleted_at)
		VALUES (OLD.id, OLD.org_id, OLD.size_bytes, OLD.created_at, now())
		ON CONFLICT (id) DO NOTHING;
	END IF;
	RETURN NULL;
END $$;

CREATE TRIGGER snapshots_gone_keep
	AFTER DELETE ON snapshots
	FOR EACH ROW EXECUTE FUNCTION sbx_snapshot_gone();
