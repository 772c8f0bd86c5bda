/* Usage and cost of an organisation (usage.h). Sandbox time is the overlap
 * of the window with the sandbox's life: from its creation to its
 * destruction, to the start of a pause that lasts, or to now; a create that
 * failed costs nothing. A volume's GB-hours are its size times the overlap
 * of the window with its life, from its creation to its delete (a deleted
 * volume is kept in volumes_gone, sql/016_limits.sql). A snapshot's
 * GB-hours are its size_bytes (GiB) times the overlap of the window with its
 * life, from its creation to its delete (snapshots_gone, sql/017_stats.sql);
 * one still creating or failed has no size and costs nothing. Prices are the
 * operator's settings, in thousandths of a cent per hour. */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "usage.h"

static const char usage_sql[] =
	"WITH w AS (SELECT coalesce($2::timestamptz, date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') f, "
	"                  coalesce($3::timestamptz, now()) t), "
	"s AS (SELECT x.cpu, x.memory_mb, greatest(0, extract(epoch FROM least(CASE "
	"        WHEN x.status = 'failed' THEN coalesce(x.destroyed_at, x.created_at) "
	"        WHEN x.status = 'paused' THEN coalesce(x.paused_at, now()) "
	"        ELSE coalesce(x.destroyed_at, now()) END, w.t) - greatest(x.created_at, w.f)))::float8 secs "
	"      FROM sandboxes x, w WHERE x.org_id = $1 AND x.created_at < w.t), "
	"sz AS (SELECT cpu, memory_mb, count(*) FILTER (WHERE secs > 0) n, sum(secs) secs FROM s "
	"       GROUP BY 1, 2 HAVING sum(secs) > 0), "
	"tot AS (SELECT coalesce(sum(n), 0) n, coalesce(sum(secs), 0) secs, "
	"        coalesce(sum(secs * cpu / 1000.0), 0) cpu_s, coalesce(sum(secs * memory_mb / 1024.0), 0) mem_s FROM sz), "
	"e AS (SELECT count(*) n, coalesce(sum(duration_ms), 0) / 1000.0 secs FROM execs, w "
	"      WHERE org_id = $1 AND started_at >= w.f AND started_at < w.t), "
	"vl AS (SELECT x.size_gb, greatest(0, extract(epoch FROM least(coalesce(x.deleted_at, now()), w.t) "
	"        - greatest(x.created_at, w.f)))::float8 secs "
	"      FROM (SELECT size_gb, created_at, deleted_at FROM volumes WHERE org_id = $1 "
	"            UNION ALL SELECT size_gb, created_at, deleted_at FROM volumes_gone WHERE org_id = $1) x, w "
	"      WHERE x.created_at < w.t), "
	"v AS (SELECT count(*) FILTER (WHERE secs > 0) n, coalesce(sum(size_gb * secs), 0) / 3600.0 gbh FROM vl), "
"sl AS (SELECT x.size_bytes / 1073741824.0 gb, greatest(0, extract(epoch FROM least(coalesce(x.deleted_at, now()), w.t) "
	"        - greatest(x.created_at, w.f)))::float8 secs "
	"      FROM (SELECT size_bytes, created_at, NULL::timestamptz deleted_at FROM snapshots "
	"            WHERE org_id = $1 AND size_bytes IS NOT NULL "
	"            UNION ALL SELECT size_bytes, created_at, deleted_at FROM snapshots_gone WHERE org_id = $1) x, w "
	"      WHERE x.created_at < w.t), "
	"sn AS (SELECT count(*) FILTER (WHERE secs > 0) n, coalesce(sum(gb * secs), 0)::float8 / 3600.0 gbh FROM sl) "
	"SELECT jsonb_build_object('from', sbx_time(w.f), 'to', sbx_time(w.t), "
	" 'sandboxes', jsonb_build_object('count', tot.n, 'seconds', round(tot.secs::numeric, 3), "
	"   'cpu_core_seconds', round(tot.cpu_s::numeric, 3), 'memory_gb_seconds', round(tot.mem_s::numeric, 3), "
	"   'by_size', (SELECT coalesce(jsonb_agg(jsonb_build_object('cpu', cpu, 'memory_mb', memory_mb, "
	"     'sandboxes', n, 'seconds', round(secs::numeric, 3)) ORDER BY cpu, memory_mb), '[]') FROM sz)), "
	" 'execs', jsonb_build_object('count', e.n, 'seconds', round(e.secs::numeric, 3)), "
	" 'volumes', jsonb_build_object('count', v.n, 'gb_hours', round(v.gbh::numeric, 6)), "
" 'snapshots', jsonb_build_object('count', sn.n, 'gb_hours', round(sn.gbh::numeric, 6)), "
	" 'prices_millicents_per_hour', jsonb_build_object('cpu_core', $4::bigint, 'memory_gb', $5::bigint, "
	"   'volume_gb', $6::bigint, 'snapshot_gb', $7::bigint), "
	" 'cost_cents', round(((tot.cpu_s * $4::bigint + tot.mem_s * $5::bigint) / 3600.0 / 1000.0 "
	"   + v.gbh * $6::bigint / 1000.0 + sn.gbh * $7::bigint / 1000.0)::numeric, 4), "
	" 'monthly_spend_limit_cents', (SELECT monthly_spend_limit_cents FROM orgs WHERE id = $1)), "
	" w.f > w.t "
	"FROM w, tot, e, v, sn";

static bool digits(const char *s, int n)
{
	for (int i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

bool sbx_usage_time_valid(const char *s)
{
	size_t n = strlen(s);
	const char *p;

	if (n < 10 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2))
		return false;
	if (n == 10)
		return true;
	if ((s[10] != 'T' && s[10] != 't' && s[10] != ' ') || n < 20 || !digits(s + 11, 2) || s[13] != ':' ||
	    !digits(s + 14, 2) || s[16] != ':' || !digits(s + 17, 2))
		return false;
	p = s + 19;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if ((*p == 'Z' || *p == 'z') && p[1] == '\0')
		return true;
	return (*p == '+' || *p == '-') && strlen(p) == 6 && digits(p + 1, 2) && p[3] == ':' && digits(p + 4, 2);
}

int sbx_usage(sbx_db *db, const sbx_config *cfg, const char *org_id, const char *from, const char *to,
	      json_t **out, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;
	char cpu[24], mem[24], vol[24], snap[24];
	json_error_t jerr;

	*out = NULL;
	if ((from && !sbx_usage_time_valid(from)) || (to && !sbx_usage_time_valid(to)))
		return sbx_err_set(err, 400, "invalid_query",
				   "from and to must be RFC 3339 times (2026-11-01T00:00:00Z) or dates (2026-11-01)");
	snprintf(cpu, sizeof(cpu), "%lld", sbx_cfg_int(cfg, "price_cpu_core_hour_millicents"));
	snprintf(mem, sizeof(mem), "%lld", sbx_cfg_int(cfg, "price_memory_gb_hour_millicents"));
	snprintf(vol, sizeof(vol), "%lld", sbx_cfg_int(cfg, "price_volume_gb_hour_millicents"));
	snprintf(snap, sizeof(snap), "%lld", sbx_cfg_int(cfg, "price_snapshot_gb_hour_millicents"));
	if (sbx_db_query(db, &res, err, usage_sql, 7, org_id, from, to, cpu, mem, vol, snap) < 0) {
		/* a date Postgres cannot place (2026-02-30): the caller's, not ours */
		if (!strncmp(err->code, "db:22", 5))
			return sbx_err_set(err, 400, "invalid_query", "from or to is not a valid time");
		return -1;
	}
	if (!strcmp(PQgetvalue(res, 0, 1), "t"))
		return sbx_err_set(err, 400, "invalid_query", "from is after to");
	*out = json_loads(PQgetvalue(res, 0, 0), JSON_DECODE_ANY, &jerr);
	if (!*out)
		return sbx_err_set(err, 500, "internal", "usage: %s", jerr.text);
	return 0;
}

int sbx_usage_month_cents(sbx_db *db, const sbx_config *cfg, const char *org_id, double *cents, sbx_err *err)
{
	json_t *u;

	if (sbx_usage(db, cfg, org_id, NULL, NULL, &u, err) < 0)
		return -1;
	*cents = json_number_value(json_object_get(u, "cost_cents"));
	json_decref(u);
	return 0;
}
