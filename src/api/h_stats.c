/* GET /sandboxes/{id}/stats?hoursAgo=N (API.md "Sandboxes"): a sandbox's
 * resource use over the last N hours, from the samples its node agent
 * keeps (workers/node_stats.c), ending with one taken as the request
 * arrived. The node sends cumulative counters; the rates here are the mean
 * between one point and the one before it.
 *
 * Compatible fields: results[] {date, memory (MB in use), cpu (% of the
 * sandbox's CPU allotment), network.bytesPerSecond (in and out)}, and their
 * means in average (memory.size MB, memory.totalInPercentage of the
 * limit; cpu.size cores, cpu.totalInPercentage of the allotment).
 * Extension: `current`, what it uses now and its limits, in bytes (the
 * names of the E2B-style metrics: cpuCount, cpuUsedPct, memUsed, ...). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "api.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "page.h"
#include "reply.h"

#define HOURS_MAX 720
#define MB (1024.0 * 1024.0)

struct pt {
	long long t, cpu, mem, disk, pids, rx, tx;
};

static json_t *num(double v)
{
	/* two decimals are what a chart shows */
	return json_real((double)(long long)(v * 100 + (v < 0 ? -0.5 : 0.5)) / 100);
}

/* -1 (unknown or unlimited) is null. */
static json_t *count(long long v)
{
	return v < 0 ? json_null() : json_integer(v);
}

static json_t *date(long long ms)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char buf[40];

	gmtime_r(&s, &tm);
	snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
	return json_string(buf);
}

static int point(json_t *a, struct pt *p, sbx_err *err)
{
	json_int_t v[7];
	json_error_t jerr;

	if (json_unpack_ex(a, &jerr, JSON_STRICT, "[IIIIIII]", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]) < 0)
		return sbx_err_set(err, 502, "bad_reply", "malformed stats from the node: %s", jerr.text);
	*p = (struct pt){ v[0], v[1], v[2], v[3], v[4], v[5], v[6] };
	return 0;
}

/* The node's answer ({cpu_quota_usec, ..., points}) in the public shape. */
static int stats_json(json_t *st, json_t **out, sbx_err *err)
{
	json_int_t quota, period, cpus, mem_limit, disk_total, pids_max;
	json_t *points, *results, *cur;
	json_error_t jerr;
	struct pt prev = { 0 }, p = { 0 };
	double cores, sum_mem = 0, sum_pct = 0, sum_bps = 0, last_pct = 0;
	size_t i, n, k = 0;

	if (json_unpack_ex(st, &jerr, JSON_STRICT, "{s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "cpu_quota_usec", &quota,
			   "cpu_period_usec", &period, "host_cpus", &cpus, "mem_limit", &mem_limit, "disk_total",
			   &disk_total, "pids_max", &pids_max, "points", &points) < 0 ||
	    !json_is_array(points) || !json_array_size(points))
		return sbx_err_set(err, 502, "bad_reply", "malformed stats from the node");
	/* no CFS quota: it may use every CPU of its host */
	cores = quota > 0 && period > 0 ? (double)quota / (double)period : (double)(cpus > 0 ? cpus : 1);
	results = json_array();
	if (!results)
		return sbx_err_set(err, 500, "nomem", "out of memory");
	n = json_array_size(points);
	for (i = 0; i < n; i++) {
		double dt, used, pct, bps = 0;

		if (point(json_array_get(points, i), &p, err) < 0) {
			json_decref(results);
			return -1;
		}
		if (i == 0 || (dt = (double)(p.t - prev.t) / 1000.0) <= 0) {
			/* the first is the baseline of the next */
			if (i == 0)
				prev = p;
			continue;
		}
		/* a counter that went down started again (a resume makes a new cgroup) */
		used = p.cpu >= prev.cpu && prev.cpu >= 0 ? (double)(p.cpu - prev.cpu) / 1e6 / dt : 0;
		pct = cores > 0 ? 100.0 * used / cores : 0;
		if (p.rx >= 0 && prev.rx >= 0 && p.rx + p.tx >= prev.rx + prev.tx)
			bps = (double)(p.rx + p.tx - prev.rx - prev.tx) / dt;
		json_array_append_new(results, json_pack("{s:o, s:o, s:o, s:{s:o}}", "date", date(p.t), "memory",
							 num((double)p.mem / MB), "cpu", num(pct), "network",
							 "bytesPerSecond", num(bps)));
		sum_mem += (double)p.mem / MB;
		sum_pct += pct;
		sum_bps += bps;
		last_pct = pct;
		k++;
		prev = p;
	}
	if (!k) /* only the live sample: its memory, no rate yet */
		sum_mem = (double)p.mem / MB, k = 1;
	cur = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "timestamp", date(p.t),
			"cpuCount", num(cores), "cpuUsedPct", num(last_pct), "cpuSeconds",
			p.cpu >= 0 ? num((double)p.cpu / 1e6) : json_null(), "memUsed", count(p.mem), "memTotal",
			count(mem_limit), "diskUsed", count(p.disk), "diskTotal", count(disk_total), "pids",
			count(p.pids), "pidsMax", count(pids_max), "networkRxBytes", count(p.rx), "networkTxBytes",
			count(p.tx));
	*out = json_pack("{s:{s:{s:o, s:o}, s:{s:o, s:o}, s:{s:o}}, s:i, s:o, s:n, s:o*}", "average", "memory",
			 "totalInPercentage",
			 num(mem_limit > 0 ? 100.0 * sum_mem / (double)k / ((double)mem_limit / MB) : 0), "size",
			 num(sum_mem / (double)k), "cpu", "totalInPercentage", num(sum_pct / (double)k), "size",
			 num(sum_pct / (double)k * cores / 100.0), "network", "bytesPerSecond", num(sum_bps / (double)k),
			 "replicaCount", 1, "results", results, "responseTime", "current", cur);
	if (!*out)
		return sbx_err_set(err, 500, "nomem", "out of memory");
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
	if (stats_json(st, &data, &err) < 0)
		goto fail;
	api_send_data(r, 200, "Sandbox stats", data);
	return;
fail:
	if (!err.http)
		sbx_err_set(&err, 500, "internal", "stats failed");
	api_send_error(r, &err);
}
