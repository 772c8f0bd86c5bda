/* Proves: the public stats (GET /sandboxes/{id}/stats) made of a node's
 * samples have a point per sample after the first, with the CPU as a
 * percentage of the sandbox's allotment and the network as bytes per
 * second over the time between samples, memory in MB; a counter that went
 * down (a new cgroup after a resume) is no negative use; the averages are
 * the means of the points; `current` is the last sample with its limits
 * (unknown ones null, no CPU quota: the host's CPUs); one sample alone
 * gives no points but its memory; a malformed node answer is a 502. */
#include "config.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "stats_view.h"
#include "../tap.h"

#define MIB 1048576LL

static double at(json_t *o, const char *path)
{
	json_t *v = o;
	char key[64];

	for (const char *p = path, *dot; v && *p; p = dot ? dot + 1 : p + strlen(p)) {
		dot = strchr(p, '.');
		snprintf(key, sizeof(key), "%.*s", (int)(dot ? (size_t)(dot - p) : strlen(p)), p);
		v = json_is_array(v) ? json_array_get(v, (size_t)atoi(key)) : json_object_get(v, key);
	}
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *str_at(json_t *o, const char *k1, size_t i, const char *k2)
{
	return json_string_value(json_object_get(json_array_get(json_object_get(o, k1), i), k2));
}

int main(void)
{
	sbx_err err = SBX_ERR_INIT;
	json_t *st, *out = NULL;
	const long long t0 = 1700000000000LL; /* 2023-11-14T22:13:20Z */

	st = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:[[I,I,I,I,I,I,I], [I,I,I,I,I,I,I], [I,I,I,I,I,I,I]]}",
		       "cpu_quota_usec", (json_int_t)50000, "cpu_period_usec", (json_int_t)100000, "host_cpus",
		       (json_int_t)2, "mem_limit", (json_int_t)(512 * MIB), "disk_total", (json_int_t)(2048 * MIB),
		       "pids_max", (json_int_t)-1, "points",
		       /* baseline */
		       (json_int_t)t0, (json_int_t)1000000, (json_int_t)(100 * MIB), (json_int_t)(10 * MIB),
		       (json_int_t)20, (json_int_t)1000, (json_int_t)0,
		       /* 10 s later: 2.5 CPU s (a quarter core: half of its 0.5), 10000 bytes in */
		       (json_int_t)(t0 + 10000), (json_int_t)3500000, (json_int_t)(200 * MIB), (json_int_t)(20 * MIB),
		       (json_int_t)21, (json_int_t)6000, (json_int_t)5000,
		       /* resumed: its counter started again; no network known */
		       (json_int_t)(t0 + 20000), (json_int_t)500000, (json_int_t)(300 * MIB), (json_int_t)(30 * MIB),
		       (json_int_t)22, (json_int_t)-1, (json_int_t)-1);
	ok(st && sbx_stats_view(st, &out, &err) == 0, "three samples make a view (%s)", err.msg);
	is_int((long long)json_array_size(json_object_get(out, "results")), 2, "a point per sample after the first");
	ok(!strcmp(str_at(out, "results", 0, "date"), "2023-11-14T22:13:30.000Z"), "dates are RFC 3339 UTC with ms");
	ok(at(out, "results.0.cpu") == 50, "CPU: a quarter core of a half-core allotment is 50 %%");
	ok(at(out, "results.0.memory") == 200, "memory in MB");
	ok(at(out, "results.0.network.bytesPerSecond") == 1000, "network: bytes in and out per second");
	ok(at(out, "results.1.cpu") == 0, "a counter that went down is no use, never negative");
	ok(at(out, "results.1.network.bytesPerSecond") == 0, "unknown network counters: 0");
	ok(at(out, "average.memory.size") == 250 && at(out, "average.memory.totalInPercentage") == 48.83,
	   "average memory: 250 MB, 48.83 %% of 512");
	ok(at(out, "average.cpu.totalInPercentage") == 25 && at(out, "average.cpu.size") == 0.13,
	   "average CPU: 25 %%, 0.13 cores");
	ok(at(out, "average.network.bytesPerSecond") == 500, "average network");
	ok(at(out, "replicaCount") == 1 && json_is_null(json_object_get(out, "responseTime")),
	   "replicaCount 1, responseTime null");
	ok(at(out, "current.cpuCount") == 0.5 && at(out, "current.cpuSeconds") == 0.5 &&
		   at(out, "current.memUsed") == 300 * MIB && at(out, "current.memTotal") == 512 * MIB &&
		   at(out, "current.diskUsed") == 30 * MIB && at(out, "current.diskTotal") == 2048 * MIB &&
		   at(out, "current.pids") == 22,
	   "current: the last sample and the limits, in bytes");
	ok(json_is_null(json_object_get(json_object_get(out, "current"), "pidsMax")) &&
		   json_is_null(json_object_get(json_object_get(out, "current"), "networkRxBytes")),
	   "current: what is unknown or unlimited is null");
	json_decref(out);
	out = NULL;

	/* one sample, no CPU quota */
	json_object_set_new(st, "cpu_quota_usec", json_integer(-1));
	json_array_remove(json_object_get(st, "points"), 0);
	json_array_remove(json_object_get(st, "points"), 0);
	ok(sbx_stats_view(st, &out, &err) == 0 && json_array_size(json_object_get(out, "results")) == 0 &&
		   at(out, "average.memory.size") == 300 && at(out, "current.cpuCount") == 2,
	   "one sample: no points, its memory as the average; no quota: the host's CPUs");
	json_decref(out);
	out = NULL;

	json_array_clear(json_object_get(st, "points"));
	ok(sbx_stats_view(st, &out, &err) < 0 && err.http == 502, "no samples: 502");
	json_array_append_new(json_object_get(st, "points"), json_pack("[I,I]", (json_int_t)t0, (json_int_t)1));
	ok(sbx_stats_view(st, &out, &err) < 0 && err.http == 502, "a short sample: 502");
	json_array_clear(json_object_get(st, "points"));
	json_array_append_new(json_object_get(st, "points"), json_pack("[I,I,I,I,I,I,I]", (json_int_t)t0,
								       (json_int_t)1, (json_int_t)1, (json_int_t)1,
								       (json_int_t)1, (json_int_t)1, (json_int_t)1));
	json_object_set_new(st, "surprise", json_integer(1));
	ok(sbx_stats_view(st, &out, &err) < 0 && err.http == 502, "an unknown field: 502");
	json_decref(st);
	return done_testing();
}
