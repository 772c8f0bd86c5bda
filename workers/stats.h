/* What one sandbox uses right now, read from the host: its cgroups (the
 * ones runsc made, cgroupsPath /sbx/ID: CPU time, memory, host tasks and
 * their limits), its disk image (the ext4 mounted at disk/) and the
 * interface counters of its network namespace. Cheap: a handful of small
 * file reads and one statvfs, no process, no thawing (a frozen sandbox's
 * counters read the same). The node agent samples it (node_stats.c). */
#ifndef SBX_WORKER_STATS_H
#define SBX_WORKER_STATS_H

#include "err.h"
#include "sandbox.h"

/* -1 in any field: not known here (no such cgroup controller, no
 * namespace to read); limits of -1 also mean "none". */
struct sandbox_usage {
	long long cpu_usec;   /* CPU time used since the cgroup was made (a resume makes a new one) */
	long long cpu_quota_usec, cpu_period_usec; /* the CFS limit: quota/period cores */
	long long mem_bytes;  /* in use, page cache the kernel may drop at once left out */
	long long mem_limit;
	long long disk_used;  /* on its disk image's filesystem (everything it writes: root, /tmp) */
	long long disk_total; /* the image's size (specs.disk GB) */
	long long pids, pids_max; /* host tasks of the sandbox (gVisor's sentry threads, its gofer) */
	long long net_rx, net_tx; /* bytes through its interfaces (loopback left out) */
	long long born_ms;        /* wall ms its memory cgroup was made: the counters were 0 then */
};

/* Fills u for sandbox id (a placement). < 0 only when it has no memory
 * cgroup at all (not running here); any other part missing is -1. */
int sandbox_usage_read(const struct sandbox_node_cfg *c, const char *id, struct sandbox_usage *u, sbx_err *err);

/* The CPU time (µs) sandbox id's cgroup has used (v1 or v2); -1 when
 * unreadable, or when its sentry is stopped (runsc_sentry_stopped: its
 * stubs may spin then, so the time says nothing). One small file read and
 * the sentry's stat: the liveness pass and the relay's op deadline tell a
 * busy sandbox from a stopped one by it. */
long long sandbox_cpu_usec(const struct sandbox_node_cfg *c, const char *id);

/* A sandbox whose cgroup used this much CPU since the last look runs (its
 * sbx-init may only be unscheduled); how long from the first miss it may
 * stay unanswering while it runs (node_health.c liveness, relay.c ops). */
#define SANDBOX_BUSY_MIN_USEC 1000
#define SANDBOX_BUSY_GRACE_MS 60000

#endif
