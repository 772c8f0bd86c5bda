/* Request metrics of all API children together: per route, method and status
 * class a counter and a latency histogram, in one anonymous shared mapping
 * that the master makes before it forks (children inherit it, and a child
 * that is replaced keeps adding to the same numbers). Updated with relaxed
 * atomics; a child killed in the middle of an update loses that one
 * increment, never the others. /metrics (h_meta.c) writes them out in the
 * Prometheus text format with what Postgres and RabbitMQ know. */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "api.h"
#include "metrics.h"

/* seconds; a stream (exec, output follow) counts its whole duration */
static const double bounds[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300 };
#define NB (sizeof(bounds) / sizeof(bounds[0]))
#define NMETHOD 4 /* GET POST PUT DELETE */
#define NCLASS 5  /* 1xx..5xx */

struct series {
	_Atomic uint64_t count[NCLASS];
	_Atomic uint64_t bucket[NB]; /* not cumulative here; summed when written */
	_Atomic uint64_t sum_us;
	_Atomic uint64_t total;
};

struct shared {
	struct series s[SBX_R__COUNT + 1][NMETHOD]; /* [SBX_R__COUNT]: no route matched */
};

static struct shared *M;

int api_metrics_init(sbx_err *err)
{
	void *p = mmap(NULL, sizeof(*M), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return sbx_err_sys(err, "internal", "metrics: mmap of %zu bytes", sizeof(*M));
	M = p;
	return 0;
}

static int method_index(const char *m)
{
	static const char *const names[NMETHOD] = { "GET", "POST", "PUT", "DELETE" };

	for (int i = 0; i < NMETHOD; i++)
		if (m && strcmp(m, names[i]) == 0)
			return i;
	return -1;
}

void api_metrics_observe(int route, const char *method, int status, long long us)
{
	int mi = method_index(method), ci = status / 100 - 1;
	struct series *s;
	size_t b = 0;

	if (!M || mi < 0)
		return;
	if (route < 0 || route >= SBX_R__COUNT || route == SBX_R_NONE)
		route = SBX_R__COUNT;
	if (ci < 0 || ci >= NCLASS)
		ci = 4;
	s = &M->s[route][mi];
	while (b < NB && (double)us / 1e6 > bounds[b])
		b++;
	atomic_fetch_add_explicit(&s->count[ci], 1, memory_order_relaxed);
	if (b < NB)
		atomic_fetch_add_explicit(&s->bucket[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->sum_us, (uint64_t)(us > 0 ? us : 0), memory_order_relaxed);
	atomic_fetch_add_explicit(&s->total, 1, memory_order_relaxed);
}

void api_metrics_write(FILE *f)
{
	static const char *const methods[NMETHOD] = { "GET", "POST", "PUT", "DELETE" };

	if (!M)
		return;
	fprintf(f, "# HELP sbx_http_requests_total Requests answered by sbx-api, by route, method and status class.\n"
		   "# TYPE sbx_http_requests_total counter\n");
	for (int r = 0; r <= SBX_R__COUNT; r++) {
		const char *rn = r == SBX_R__COUNT ? "unmatched" : sbx_route_name((enum sbx_route)r);
		for (int m = 0; m < NMETHOD; m++)
			for (int c = 0; c < NCLASS; c++) {
				uint64_t v = atomic_load_explicit(&M->s[r][m].count[c], memory_order_relaxed);
				if (v)
					fprintf(f, "sbx_http_requests_total{route=\"%s\",method=\"%s\",code=\"%dxx\"} %llu\n",
						rn, methods[m], c + 1, (unsigned long long)v);
			}
	}
	fprintf(f, "# HELP sbx_http_request_duration_seconds Time from the request reaching sbx-api to its last byte "
		   "(streams: their whole duration).\n"
		   "# TYPE sbx_http_request_duration_seconds histogram\n");
	for (int r = 0; r <= SBX_R__COUNT; r++) {
		const char *rn = r == SBX_R__COUNT ? "unmatched" : sbx_route_name((enum sbx_route)r);
		for (int m = 0; m < NMETHOD; m++) {
			struct series *s = &M->s[r][m];
			uint64_t total = atomic_load_explicit(&s->total, memory_order_relaxed), cum = 0;
			if (!total)
				continue;
			for (size_t b = 0; b < NB; b++) {
				cum += atomic_load_explicit(&s->bucket[b], memory_order_relaxed);
				fprintf(f, "sbx_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"%g\"} %llu\n",
					rn, methods[m], bounds[b], (unsigned long long)cum);
			}
			/* total may have moved on since the buckets were read: +Inf never below them */
			if (total < cum)
				total = cum;
			fprintf(f, "sbx_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"+Inf\"} %llu\n",
				rn, methods[m], (unsigned long long)total);
			fprintf(f, "sbx_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\"} %.6f\n", rn,
				methods[m], (double)atomic_load_explicit(&s->sum_us, memory_order_relaxed) / 1e6);
			fprintf(f, "sbx_http_request_duration_seconds_count{route=\"%s\",method=\"%s\"} %llu\n", rn,
				methods[m], (unsigned long long)total);
		}
	}
}
