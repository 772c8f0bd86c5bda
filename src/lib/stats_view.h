/* GET /sandboxes/{id}/stats in the public shape (API.md "Sandboxes") from
 * what the sandbox's node agent sends (doc/internal-protocol.md `stats`):
 * its samples with cumulative counters, oldest first, the last one read as
 * the request arrived. A point's rates are the means since the point
 * before it (the first point is only the baseline of the second).
 *
 * Compatible fields: results[] {date, memory (MB in use), cpu (% of the
 * sandbox's CPU allotment), network.bytesPerSecond (in and out)}, and their
 * means in average (memory.size MB, memory.totalInPercentage of the limit;
 * cpu.size cores, cpu.totalInPercentage of the allotment; network).
 * Extension: `current`, what it uses now and its limits, in bytes (the
 * names of E2B-style metrics: cpuCount, cpuUsedPct, memUsed, ...; null for
 * what the node could not tell). */
#ifndef SBX_STATS_VIEW_H
#define SBX_STATS_VIEW_H

#include <jansson.h>
#include "err.h"

/* st: the node's object {cpu_quota_usec, cpu_period_usec, host_cpus,
 * mem_limit, disk_total, pids_max, points} (borrowed). -1 (502 bad_reply)
 * when it is malformed. */
int sbx_stats_view(json_t *st, json_t **out, sbx_err *err);

#endif
