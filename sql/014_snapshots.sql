-- Snapshots (issue 12, API.md "Snapshots"): a sandbox's writable layer packed
-- as an OCI layer on top of its template image and pushed to the registry
-- by the sandbox's node (workers/snapshot.c, workers/sbx-snapshot).
--
-- The record is written first (status creating: the intent), the node
-- moves it to ready (image_digest, size_bytes) or failed (failure_reason).
-- A snapshot's image is repository sbx/snapshots/ID in the registry, so
-- deleting one (by its manifest digest) can never touch another's. The row
-- outlives its sandbox: a snapshot is how a sandbox's work is kept.
CREATE TABLE snapshots (
	id              char(24) PRIMARY KEY,
	org_id          char(24) NOT NULL REFERENCES orgs(id),
	sandbox_id      char(24) NOT NULL,
	name            text NOT NULL CHECK (name ~ '^[a-z0-9-]{1,40}$'),
	status          text NOT NULL DEFAULT 'creating' CHECK (status IN ('creating', 'ready', 'failed')),
	failure_reason  text,
	-- the template the sandbox ran (a restore starts from its image, with
	-- this layer on top) and its manifest digest
	source_template text NOT NULL,
	node_id         text NOT NULL,
	image_repo      text NOT NULL,
	image_digest    text,
	size_bytes      bigint,
	-- taken on the sandbox's schedule (snapshotMode automatic): a bounded
	-- number of these is kept per sandbox (setting snapshot_auto_keep)
	automatic       boolean NOT NULL DEFAULT false,
	created_at      timestamptz NOT NULL DEFAULT now(),
	updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX snapshots_org_created ON snapshots(org_id, created_at DESC);
CREATE INDEX snapshots_sandbox_created ON snapshots(sandbox_id, created_at DESC);
CREATE INDEX snapshots_creating ON snapshots(node_id) WHERE status = 'creating';

-- The next automatic snapshot of a sandbox with snapshotMode automatic: its
-- node computes it from snapshot_frequency (a 5-field cron, UTC) when it is
-- NULL, and moves it on each time it takes one.
ALTER TABLE sandboxes ADD COLUMN next_snapshot_at timestamptz;

-- The public Snapshot object. image_tag names the image in the stack's
-- registry: REPO:latest, and REPO@DIGEST once it is pushed.
CREATE FUNCTION sbx_snapshot_json(p snapshots) RETURNS jsonb
	LANGUAGE sql STABLE AS
$$ SELECT jsonb_build_object(
	'id', p.id, 'sandbox_id', p.sandbox_id, 'name', p.name,
	'image_tag', CASE WHEN p.image_digest IS NULL THEN p.image_repo || ':latest'
		ELSE p.image_repo || '@' || p.image_digest END,
	'source_template', p.source_template, 'status', p.status, 'failure_reason', p.failure_reason,
	'size_bytes', p.size_bytes, 'created_at', sbx_time(p.created_at)) $$;
