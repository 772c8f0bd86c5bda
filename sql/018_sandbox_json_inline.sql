-- GET /sandboxes/{id} and the list: the sandbox view is inlined into the
-- query. A LANGUAGE sql function whose body holds a sub-SELECT is
-- never inlined, and then Postgres parses and plans its body on every call
-- (every row, every request, prepared statement or not): that was half of
-- the database's CPU on a GET (perf: base_yyparse, core_yylex). The env
-- keys' sub-SELECT moves to a plpgsql function (its plan is kept per
-- session); the view is redefined whole (as in 008) without it.
-- Measured with pgbench -M prepared on this machine: the GET's query
-- 8,325 -> 16,894 tps, the list's (10 rows) 1,886 -> 4,448.

-- The object's keys, sorted, as a jsonb array ([] for none).
CREATE OR REPLACE FUNCTION sbx_json_keys(j jsonb) RETURNS jsonb
	LANGUAGE plpgsql IMMUTABLE AS
$$ BEGIN
	RETURN coalesce((SELECT jsonb_agg(k ORDER BY k) FROM jsonb_object_keys(j) k), '[]'::jsonb);
END $$;

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
	'env', sbx_json_keys(s.env),
	'metadata', s.metadata, 'pause_kind', s.pause_kind,
	'idle_timeout', s.idle_timeout_s, 'oom_kills', s.oom_kills) $$;
