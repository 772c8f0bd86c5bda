/* sbx-api's request metrics, shared by all children (metrics.c). */
#ifndef SBX_API_METRICS_H
#define SBX_API_METRICS_H

#include <stdio.h>

#include "err.h"

/* In the master, before the children are forked. */
int api_metrics_init(sbx_err *err);
/* One answered request: route (enum sbx_route; SBX_R_NONE when none
 * matched), method, HTTP status, microseconds. */
void api_metrics_observe(int route, const char *method, int status, long long us);
/* The counters and histograms in the Prometheus text format. */
void api_metrics_write(FILE *f);

#endif
