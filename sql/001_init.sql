-- sbx schema, first version. Applied by `sbx-admin migrate` inside one
-- transaction together with its row in schema_migrations.

CREATE TABLE orgs (
	id              char(24) PRIMARY KEY,
	name            text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
	created_at      timestamptz NOT NULL DEFAULT now(),
	-- plan limits (NULL: unlimited)
	max_sandboxes   integer NOT NULL DEFAULT 10 CHECK (max_sandboxes >= 0),
	max_memory_mb   integer NOT NULL DEFAULT 2048 CHECK (max_memory_mb >= 1),
	max_volume_gb   integer NOT NULL DEFAULT 100 CHECK (max_volume_gb >= 0),
	max_volumes     integer NOT NULL DEFAULT 10 CHECK (max_volumes >= 0),
	monthly_spend_limit_cents bigint CHECK (monthly_spend_limit_cents >= 0)
);

CREATE TABLE api_keys (
	id              char(24) PRIMARY KEY,
	org_id          char(24) NOT NULL REFERENCES orgs(id) ON DELETE CASCADE,
	name            text NOT NULL DEFAULT '',
	prefix          text NOT NULL,          -- first characters of the token, for listing
	hash            bytea NOT NULL UNIQUE,  -- BLAKE2b keyed with auth_secret
	is_admin        boolean NOT NULL DEFAULT false,
	created_at      timestamptz NOT NULL DEFAULT now(),
	last_used_at    timestamptz,
	revoked_at      timestamptz,
	rotated_from    char(24) REFERENCES api_keys(id)
);
CREATE INDEX api_keys_org ON api_keys(org_id);

CREATE TABLE templates (
	name            text PRIMARY KEY,
	display_name    text NOT NULL,
	description     text NOT NULL DEFAULT '',
	created_at      timestamptz NOT NULL DEFAULT now()
);
INSERT INTO templates (name, display_name, description) VALUES
	('debian-12', 'Debian 12', 'Debian bookworm with sh, coreutils, python3, node, git and curl');

CREATE TYPE sandbox_status AS ENUM
	('starting', 'ready', 'pausing', 'paused', 'resuming', 'failed', 'destroyed');

CREATE TABLE sandboxes (
	id              char(24) PRIMARY KEY,
	org_id          char(24) NOT NULL REFERENCES orgs(id),
	name            text NOT NULL,
	template        text NOT NULL,
	status          sandbox_status NOT NULL DEFAULT 'starting',
	region          text NOT NULL,
	cpu             integer NOT NULL,
	memory_mb       integer NOT NULL,
	disk_gb         integer NOT NULL,
	auto_destroy    boolean NOT NULL DEFAULT false,
	destroy_timeout text,
	one_shot        boolean NOT NULL DEFAULT false,
	egress_mode     text NOT NULL DEFAULT 'deny_all',
	egress_allow    jsonb NOT NULL DEFAULT '[]',
	block_outbound  boolean NOT NULL DEFAULT true,
	persistent      boolean NOT NULL DEFAULT false,
	persistent_disk_gb integer,
	volume_id       char(24),
	mount_path      text,
	from_snapshot   char(24),
	snapshot_mode   text,
	snapshot_frequency text,
	env             jsonb NOT NULL DEFAULT '{}',
	metadata        jsonb NOT NULL DEFAULT '{}',
	idle_timeout_s  integer NOT NULL,
	node_id         text,
	container_id    text,
	failure_reason  text,
	pause_kind      text,
	created_at      timestamptz NOT NULL DEFAULT now(),
	last_activity_at timestamptz NOT NULL DEFAULT now(),
	expires_at      timestamptz NOT NULL,
	paused_at       timestamptz,
	destroyed_at    timestamptz,
	destroy_reason  text CHECK (destroy_reason IN
		('user', 'idle_ttl', 'max_lifetime', 'one_shot_stopped', 'failed', 'paused_too_long')),
	request_id      text
);
CREATE INDEX sandboxes_org_created ON sandboxes(org_id, created_at DESC);
CREATE INDEX sandboxes_live ON sandboxes(status) WHERE status NOT IN ('failed', 'destroyed');

-- RFC 3339 UTC with milliseconds, as API.md's times are.
CREATE FUNCTION sbx_time(t timestamptz) RETURNS text
	LANGUAGE sql IMMUTABLE AS
$$ SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') $$;

-- The public Sandbox object (API.md), built in one place.
CREATE FUNCTION sbx_sandbox_json(s sandboxes) RETURNS jsonb
	LANGUAGE sql STABLE AS
$$ SELECT jsonb_build_object(
	'id', s.id, 'name', s.name, 'template', s.template, 'status', s.status,
	'region', s.region,
	'specs', jsonb_build_object('cpu', s.cpu, 'memory', s.memory_mb, 'disk', s.disk_gb),
	'team', s.org_id, 'project_environment', NULL,
	'auto_destroy', s.auto_destroy, 'destroy_timeout', s.destroy_timeout,
	'one_shot', s.one_shot, 'block_outbound', s.block_outbound,
	'egress', jsonb_build_object('mode', s.egress_mode, 'allow', s.egress_allow),
	'persistent', s.persistent, 'persistent_disk_gb', s.persistent_disk_gb,
	'paused_at', sbx_time(s.paused_at), 'from_snapshot', s.from_snapshot,
	'snapshot_mode', s.snapshot_mode, 'snapshot_frequency', s.snapshot_frequency,
	'created_at', sbx_time(s.created_at), 'last_activity_at', sbx_time(s.last_activity_at),
	'expires_at', sbx_time(s.expires_at), 'destroyed_at', sbx_time(s.destroyed_at),
	'destroy_reason', s.destroy_reason,
	'volume_id', s.volume_id, 'mount_path', s.mount_path, 'failure_reason', s.failure_reason,
	'env', (SELECT coalesce(jsonb_agg(k ORDER BY k), '[]'::jsonb) FROM jsonb_object_keys(s.env) k),
	'metadata', s.metadata, 'pause_kind', s.pause_kind,
	'idle_timeout', s.idle_timeout_s) $$;
