/* The statements of the requests that come most (auth, a sandbox read, the
 * list, a template lookup, a create), named so that the handlers and the
 * warm-up of a new Postgres session (warm.c) say the same text: a
 * prepared statement is looked up by its text (src/lib/db.c). */
#ifndef SBX_API_SQL_H
#define SBX_API_SQL_H

/* $1: the key's keyed hash as bytea text */
#define SQL_AUTH_KEY                                                                                     \
	"SELECT k.id, k.org_id, k.hash, k.is_admin, o.max_sandboxes, o.max_memory_mb, "                   \
	"k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute', "                        \
	"coalesce(o.max_concurrent_requests, 0), coalesce(o.max_concurrent_streams, 0), "                 \
	"coalesce(o.key_rate_per_s, -1), coalesce(o.key_burst, -1), coalesce(o.max_sandbox_execs, 0) "   \
	"FROM api_keys k JOIN orgs o ON o.id = k.org_id "                                                 \
	"WHERE k.hash = $1::bytea AND k.revoked_at IS NULL"

/* The public Sandbox object of row ALIAS in SQL: the record's JSON, the
 * region object (REGION: a parameter, api_region_json as text) and the
 * default snapshot_mode, as api_sandbox_public adds them in C
 * (h_sandboxes.c). */
#define SANDBOX_PUBLIC_SQL(alias, region)                                                        \
	"(sbx_sandbox_json(" alias ") || jsonb_build_object('region', " region "::jsonb, "        \
	"'snapshot_mode', coalesce(" alias ".snapshot_mode, 'manual')))"

/* $1 sandbox, $2 organisation */
#define SQL_SANDBOX_JSON "SELECT sbx_sandbox_json(s) FROM sandboxes s WHERE s.id = $1 AND s.org_id = $2"

/* $1 sandbox, $2 organisation, $3 the region object */
#define SQL_SANDBOX_GET \
	"SELECT " SANDBOX_PUBLIC_SQL("s", "$3") " FROM sandboxes s WHERE s.id = $1 AND s.org_id = $2"

/* $1 organisation, $2 status or NULL, $3 metadata filter, $4 limit, $5
 * offset, $6 the region object */
#define SQL_SANDBOX_LIST                                                        \
	"WITH f AS (SELECT * FROM sandboxes s WHERE s.org_id = $1 "              \
	"  AND ($2::sandbox_status IS NULL OR s.status = $2::sandbox_status) "   \
	"  AND s.metadata @> $3::jsonb) "                                        \
	"SELECT (SELECT count(*) FROM f), "                                      \
	"  (SELECT coalesce(jsonb_agg(" SANDBOX_PUBLIC_SQL("p", "$6") " "        \
	"     ORDER BY p.created_at DESC, p.id), '[]') "                         \
	"   FROM (SELECT * FROM f ORDER BY created_at DESC, id LIMIT $4::int OFFSET $5::bigint) p)"

/* What can run: templates some live node has unpacked, and the aliases their
 * definitions declare. An alias never hides a real template's name (one
 * that any node ever registered), so a name is never silently something
 * else; when two templates declare one alias, the first by name has it.
 * $1 is the default template (listed first). */
#define AVAILABLE_SQL                                                                                            \
	"WITH avail AS (SELECT t.name, t.display_name, t.description, t.aliases FROM templates t "                 \
	"WHERE EXISTS (SELECT 1 FROM nodes n WHERE t.name = ANY(n.templates) "                                     \
	"AND n.heartbeat_at > now() - interval '2 minutes')), "                                                    \
	"al AS (SELECT DISTINCT ON (a.alias) a.alias AS name, t.name AS target, t.display_name "                  \
	"FROM avail t, unnest(t.aliases) a(alias) WHERE a.alias NOT IN (SELECT name FROM templates) "              \
	"ORDER BY a.alias, t.name), "                                                                              \
	"names AS (SELECT name, name AS target, display_name, description, CASE WHEN name = $1 THEN 0 ELSE 1 END k " \
	"FROM avail UNION ALL SELECT name, target, display_name, 'alias of ' || target, 2 FROM al) "

/* $1 the default template, $2 the name asked for: the template it names
 * (NULL: none) and the names there are */
#define SQL_TEMPLATE_LOOKUP                                                              \
	AVAILABLE_SQL "SELECT (SELECT target FROM names WHERE name = $2 ORDER BY k LIMIT 1), " \
		      "coalesce((SELECT string_agg(name, ', ' ORDER BY k, name) FROM names), 'none')"

/* a create, in its transaction: the organisation's lock and count ($1) */
#define SQL_CREATE_COUNT                                    \
	"SELECT pg_advisory_xact_lock(hashtext($1)), "      \
	"(SELECT count(*) FROM sandboxes WHERE org_id = $1 AND status NOT IN ('failed', 'destroyed'))"

#define SQL_CREATE_INSERT                                                                                         \
	"INSERT INTO sandboxes (id, org_id, name, template, region, cpu, memory_mb, disk_gb, "                      \
	"auto_destroy, destroy_timeout, one_shot, env, metadata, idle_timeout_s, expires_at, request_id, "          \
	"project_environment, snapshot_mode, egress_mode, egress_allow, block_outbound, from_snapshot, "            \
	"snapshot_frequency) "                                                                                      \
	"VALUES ($1, $2, $3, $4, $5, $6::int, $7::int, $8::int, $9::boolean, $10, $11::boolean, "                   \
	"$12::jsonb, $13::jsonb, $14::int, now() + make_interval(secs => $15::int), $16, $17, $18, "                \
	"$19, coalesce($20::jsonb, '[]'), $19 = 'deny_all', $21, $22)"

#endif
