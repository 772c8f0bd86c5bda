-- Egress (issue 11): the addresses the node resolved for each hostname of a
-- restricted sandbox's allow list, kept current by the node
-- ({"host": ["A.B.C.D", ...]}), shown as egress.resolved (extension).
-- The sandbox view is redefined whole (as in 006) with that one addition.
ALTER TABLE sandboxes ADD COLUMN IF NOT EXISTS egress_resolved jsonb NOT NULL DEFAULT '{}';

CREATE OR REPLACE FUNCTION sbx_sandbox_json(s sandboxes) RETURNS jsonb
	LANGUAGE sql STABLE AS
$$ SELECT jsonb_build_object(
	'id', s.id, 'name', s.name, 'template', s.template, 'status', s.status,
	'region', s.region,
	'specs', jsonb_build_object('cpu', s.cpu, 'memory', s.memory_mb, 'disk', s.disk_gb),
	'team', s.org_id, 'project_environment', s.project_environment,
	'auto_destroy', s.auto_destroy, 'destroy_timeout', s.destroy_timeout,
	'one_shot', s.one_shot, 'block_outbound', s.block_outbound,
	'egress', jsonb_build_object('mode', s.egress_mode, 'allow', s.egress_allow,
				     'resolved', s.egress_resolved),
	'persistent', s.persistent, 'persistent_disk_gb', s.persistent_disk_gb,
	'paused_at', sbx_time(s.paused_at), 'from_snapshot', s.from_snapshot,
	'snapshot_mode', s.snapshot_mode, 'snapshot_frequency', s.snapshot_frequency,
	'created_at', sbx_time(s.created_at), 'last_activity_at', sbx_time(s.last_activity_at),
	'expires_at', sbx_time(s.expires_at), 'destroyed_at', sbx_time(s.destroyed_at),
	'destroy_reason', s.destroy_reason,
	'volume_id', s.volume_id, 'mount_path', s.mount_path, 'failure_reason', s.failure_reason,
	'env', (SELECT coalesce(jsonb_agg(k ORDER BY k), '[]'::jsonb) FROM jsonb_object_keys(s.env) k),
	'metadata', s.metadata, 'pause_kind', s.pause_kind,
	'idle_timeout', s.idle_timeout_s, 'oom_kills', s.oom_kills) $$;
