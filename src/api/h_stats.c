/* GET /sandboxes/{id}/stats?hoursAgo=N (API.md "Sandboxes"): a sandbox's
 * resource use over the last N hours, from the samples its node agent
 * writes to Postgres (workers/node_stats.c, table sandbox_stats), the few
 * it may not have written yet, and one taken as the request arrived (the
 * node answers those two); src/lib/stats_view.c makes the public shape of
 * them. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "page.h"
#include "reply.h"
#include "stats_view.h"

#define HOURS_MAX 720
/* the answer's results, plus the sample before the first (its baseline) */
#define POINTS_MAX 250
/* a sample this close to the live one is left out: a rate over a few ms
 * says nothing */
#define MIN_GAP_MS 1000

/* The samples of the window from Postgres, thinned out in the query to
 * about POINTS_MAX evenly over it (one per bucket of rows, the first and
 * the last kept): counters are cumulative, so no CPU second is lost. */
static const char samples_sql[] =
	"WITH s AS (SELECT t, cpu_usec, mem_bytes, disk_bytes, pids, net_rx, net_tx, "
	"    row_number() OVER (ORDER BY t) - 1 i, count(*) OVER () n FROM sandbox_stats "
	"  WHERE sandbox_id = $1 AND t >= to_timestamp($2::bigint / 1000.0) AND t < to_timestamp($3::bigint / 1000.0)) "
	"SELECT (extract(epoch FROM t) * 1000)::bigint, coalesce(cpu_usec, -1), coalesce(mem_bytes, -1), "
	"  coalesce(disk_bytes, -1), coalesce(pids, -1), coalesce(net_rx, -1), coalesce(net_tx, -1) FROM s "
	"WHERE n <= $4::int OR i = 0 OR i = n - 1 OR i * $4::int / n <> (i - 1) * $4::int / n ORDER BY t";

static json_int_t pt_t(json_t *p)
{
	return json_integer_value(json_array_get(p, 0));
}

static int pt_cmp(const void *a, const void *b)
{
	json_int_t x = pt_t(*(json_t *const *)a), y = pt_t(*(json_t *const *)b);

	return x < y ? -1 : x > y;
}

/* st's points (the node's: its recent samples, the live one last) with
 * the older ones from Postgres before them: in order, one per time, none
 * too close to the live one, at most POINTS_MAX + 1 evenly over them.
 * Postgres not answering leaves the node's alone (logged). */
static int merge_samples(struct api_req *r, json_t *st, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;
	json_t *points = json_object_get(st, "points"), *live, *out;
	cleanup_free json_t **all = NULL;
	size_t n = 0, k = 0, want = POINTS_MAX + 1, np = json_array_size(points);
	char since[24], until[24], max[16];
	json_int_t hours = json_integer_value(json_object_get(st, "hours"));
	sbx_err qerr = SBX_ERR_INIT;

	if (!np || !json_is_array(json_array_get(points, np - 1)))
		return sbx_err_set(err, 502, "bad_reply", "malformed stats from the node");
	live = json_array_get(points, np - 1);
	snprintf(until, sizeof(until), "%lld", (long long)pt_t(live));
	snprintf(since, sizeof(since), "%lld", (long long)(pt_t(live) - hours * 3600000));
	snprintf(max, sizeof(max), "%d", POINTS_MAX);
	if (sbx_db_query(&r->ctx->db, &res, &qerr, samples_sql, 4, r->m.id, since, until, max) < 0) {
		log_warnx("sandbox %s: stats samples: %s (the node's recent ones only)", r->m.id, qerr.msg);
		res = NULL;
	}
	all = calloc(np + (res ? (size_t)PQntuples(res) : 0) + 1, sizeof(*all));
	if (!all)
		return sbx_err_set(err, 500, "nomem", "out of memory");
	for (int i = 0; res && i < PQntuples(res); i++) {
		json_t *p = json_array();
		for (int c = 0; p && c < 7; c++)
			json_array_append_new(p, json_integer(strtoll(PQgetvalue(res, i, c), NULL, 10)));
		if (p)
			all[n++] = p;
	}
	for (size_t i = 0; i < np; i++)
		all[n++] = json_incref(json_array_get(points, i));
	qsort(all, n, sizeof(*all), pt_cmp);
	/* one per time (Postgres may have what the node still keeps) */
	for (size_t i = 0; i < n; i++) {
		if (k && pt_t(all[k - 1]) == pt_t(all[i])) {
			json_decref(all[i]);
			continue;
		}
		all[k++] = all[i];
	}
	/* the live one is the newest (the node reads it last); one just
	 * before it goes, unless it is the only baseline (a sandbox asked
	 * about right after its start: the mean since its start) */
	while (k > 2 && all[k - 1] == live && pt_t(live) - pt_t(all[k - 2]) < MIN_GAP_MS) {
		json_decref(all[k - 2]);
		all[k - 2] = live;
		k--;
	}
	out = json_array();
	for (size_t j = 0; out && j < (k < want ? k : want); j++) {
		size_t i = k <= want ? j : (size_t)((unsigned long long)j * (k - 1) / (want - 1));
		json_array_append(out, all[i]);
	}
	for (size_t i = 0; i < k; i++)
		json_decref(all[i]);
	if (!out)
		return sbx_err_set(err, 500, "nomem", "out of memory");
	json_object_set_new(st, "points", out);
	return 0;
}

void h_sandbox_stats(struct api_req *r)
{
	static const char *const extra[] = { "stats", NULL };
	cleanup_pgres PGresult *res = NULL;
	cleanup_json json_t *msg = NULL, *st = NULL;
	cleanup_reply struct sbx_reply rep = { 0 };
	sbx_err err = SBX_ERR_INIT;
	json_error_t jerr;
	json_t *data = NULL;
	char buf[16], status[32], node[256], place[SBX_ID_LEN + 1];
	long hours = 1;
	const char *text;
	int q = sbx_query_get(r->m.query, "hoursAgo", buf, sizeof(buf), &err);

	if (q < 0 || (q == 1 && (!buf[0] || strlen(buf) > 4 || strspn(buf, "0123456789") != strlen(buf) ||
				 (hours = atol(buf)) < 1 || hours > HOURS_MAX))) {
		sbx_err_set(&err, 400, "invalid_query", "hoursAgo must be an integer between 1 and %d", HOURS_MAX);
		goto fail;
	}
	if (sbx_db_query(&r->ctx->db, &res, &err,
			 "SELECT status, coalesce(node_id, ''), coalesce(placement_id, '') FROM sandboxes "
			 "WHERE id = $1 AND org_id = $2",
			 2, r->m.id, r->org.org_id) < 0)
		goto fail;
	if (PQntuples(res) != 1) {
		sbx_err_set(&err, 404, "not_found", "Sandbox not found");
		goto fail;
	}
	snprintf(status, sizeof(status), "%s", PQgetvalue(res, 0, 0));
	snprintf(node, sizeof(node), "%s", PQgetvalue(res, 0, 1));
	snprintf(place, sizeof(place), "%s", PQgetvalue(res, 0, 2));
	if (strcmp(status, "ready") || !node[0] || !place[0]) {
		sbx_err_set(&err, 400, "bad_state", "Sandbox is %s; its stats are read only while it is ready", status);
		goto fail;
	}
	msg = json_pack("{s:s, s:s, s:i}", "sandbox_id", r->m.id, "placement_id", place, "hours", (int)hours);
	if (!msg) {
		sbx_err_set(&err, 500, "nomem", "out of memory");
		goto fail;
	}
	if (api_mq(r, &err) < 0 ||
	    sbx_msg_call(r->ctx->mq, SBX_MSG_STATS, node, msg, (int)sbx_cfg_int(r->ctx->cfg, "rpc_timeout") * 1000,
			 extra, &rep, &err) < 0) {
		log_warnx("sandbox %s: stats from node %s: %s", r->m.id, node, err.msg);
		sbx_err_set(&err, 503, "stats_unavailable", "The sandbox's node did not answer with its stats");
		goto fail;
	}
	if (!rep.ok) {
		/* the record moved on meanwhile (a pause begun, a destroy) */
		if (rep.code && !strcmp(rep.code, "bad_state"))
			sbx_err_set(&err, 400, "bad_state", "Sandbox is %s; its stats are read only while it is ready",
				    rep.error ? rep.error : "not ready");
		else if (rep.code && !strcmp(rep.code, "not_found"))
			sbx_err_set(&err, 400, "bad_state", "Sandbox is not running on its node");
		else
			sbx_err_set(&err, 503, "stats_unavailable", "The sandbox's stats could not be read: %s",
				    rep.error ? rep.error : "no reason given");
		goto fail;
	}
	text = sbx_reply_str(&rep, "stats");
	st = text ? json_loads(text, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	if (!st) {
		sbx_err_set(&err, 502, "bad_reply", "malformed stats from the node");
		goto fail;
	}
	json_object_set_new(st, "hours", json_integer(hours));
	if (merge_samples(r, st, &err) < 0)
		goto fail;
	json_object_del(st, "hours");
	if (sbx_stats_view(st, &data, &err) < 0)
		goto fail;
	api_send_data(r, 200, "Sandbox stats", data);
	return;
fail:
	if (!err.http)
		sbx_err_set(&err, 500, "internal", "stats failed");
	api_send_error(r, &err);
}
