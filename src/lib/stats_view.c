/* The public shape of a sandbox's stats (stats_view.h). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "stats_view.h"

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

int sbx_stats_view(json_t *st, json_t **out, sbx_err *err)
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

