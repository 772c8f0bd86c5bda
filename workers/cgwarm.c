/* Cgroup migrations without a grace period while runsc starts a sandbox.
 *
 * `runsc run` (and `restore`) moves itself into the sandbox's new cgroups
 * before it starts the gofer and the sentry, and back to its own ones
 * afterwards. Each move takes the kernel's cgroup_threadgroup_rwsem for
 * writing; the first writer after a quiet spell waits for an RCU grace
 * period while the semaphore leaves its readers' fast path (rcu_sync), and
 * writers that follow within about a grace period of the last pass at once.
 * Measured on this machine kind (doc/sandbox-node.md): a process's first
 * move into a new cgroup 7-26 ms, the next one 0.05-0.1 ms; `runsc run`
 * makes two such first moves (its join, and its return ~70 ms later), ~20
 * ms of a bare start of ~130.
 *
 * So a start keeps a writer going: a thread writes this process's id into
 * the cgroup.procs of the cgroup it already is in (a move that moves
 * nothing) every WARM_PERIOD_MS while a start is under way. The node agent
 * holds it from the moment it forks a start or a resume (node_op.c) until
 * that process has answered; sandbox_start and sandbox_resume hold it
 * themselves when they run in a process of their own making (a forked
 * child of a holder has no thread, and its holds do nothing). Its first
 * write pays the grace period while the start makes its disk and network;
 * runsc's moves pass. A kernel mounted with favordynmods keeps the semaphore slow
 * for readers all the time: the writes are then cheap and pointless, not
 * wrong. The cost: a write holds the semaphore for a few microseconds, in
 * which no process on the machine forks or exits.
 *
 * The thread takes no lock that a forked child could need (no malloc, no
 * stdio, no logging): only its own mutex, a write and a timed wait; its
 * process forks while it runs. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cgwarm.h"
#include "log.h"

#define CG "/sys/fs/cgroup"
#define WARM_PERIOD_MS 4

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static int holds;
static bool tried, started, parked; /* started: the thread runs */
static int fd = -1, write_errno;
static char pid_s[24];
static size_t pid_len;
static pid_t owner; /* the process the thread is in */

/* The cgroup.procs of the cgroup this process is in: a v1 hierarchy with
 * a controller (pids first), else the v2 one. */
static int own_procs_file(char *out, size_t n)
{
	char line[512], v1[512] = "", v2[512] = "";
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *ctrl = strchr(line, ':'), *path;
		if (!ctrl || !(path = strchr(++ctrl, ':')))
			continue;
		*path++ = 0;
		path[strcspn(path, "\n")] = 0;
		if (!*ctrl) {
			snprintf(v2, sizeof(v2), "%s", path);
		} else if (strncmp(ctrl, "name=", 5) && (!v1[0] || !strcmp(ctrl, "pids"))) {
			int k = snprintf(v1, sizeof(v1), "%s%s", ctrl, path);
			if (k < 0 || (size_t)k >= sizeof(v1))
				v1[0] = 0;
		}
	}
	fclose(f);
	if (v1[0] && v1[strlen(v1) - 1] == '/')
		snprintf(out, n, CG "/%scgroup.procs", v1);
	else if (v1[0])
		snprintf(out, n, CG "/%s/cgroup.procs", v1);
	else if (v2[0] && access(CG "/cgroup.controllers", F_OK) == 0)
		snprintf(out, n, CG "%s/cgroup.procs", strcmp(v2, "/") ? v2 : "");
	else if (v2[0])
		snprintf(out, n, CG "/unified%s/cgroup.procs", strcmp(v2, "/") ? v2 : "");
	else
		return -1;
	return 0;
}

static void *warm_run(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	parked = true;
	pthread_cond_broadcast(&cv);
	for (;;) {
		struct timespec ts;

		while (holds == 0 || write_errno)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
		if (write(fd, pid_s, pid_len) < 0) {
			pthread_mutex_lock(&mu);
			write_errno = errno ? errno : EIO;
			continue;
		}
		pthread_mutex_lock(&mu);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += WARM_PERIOD_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&cv, &mu, &ts);
	}
	return NULL;
}

/* The thread and its file, once per process; false when there is none. */
static bool warm_start(void)
{
	char path[600];
	pthread_condattr_t ca;
	pthread_t th;

	if (tried)
		return started;
	tried = true;
	if (own_procs_file(path, sizeof(path)) < 0) {
		log_info("cgroup warm-up off: no cgroup of this process found in /proc/self/cgroup");
		return false;
	}
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		log_info("cgroup warm-up off: %s: %s", path, strerror(errno));
		return false;
	}
	owner = getpid();
	pid_len = (size_t)snprintf(pid_s, sizeof(pid_s), "%d", (int)owner);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&th, NULL, warm_run, NULL) != 0) {
		log_info("cgroup warm-up off: no thread");
		close(fd);
		fd = -1;
		return false;
	}
	pthread_detach(th);
	/* back only once the thread waits on its own mutex: whatever its
	 * start does in the C library (or a sanitizer's runtime) is done
	 * before this process forks again */
	pthread_mutex_lock(&mu);
	while (!parked)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	started = true;
	return true;
}

void cgwarm_init(void)
{
	(void)warm_start();
}

void cgwarm_begin(void)
{
	/* a child forked from a process that had the thread has none */
	if (started && owner != getpid())
		return;
	if (!warm_start())
		return;
	pthread_mutex_lock(&mu);
	if (holds++ == 0)
		pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

void cgwarm_end(void)
{
	int e = 0;

	if (!started || owner != getpid())
		return;
	pthread_mutex_lock(&mu);
	if (holds > 0)
		holds--;
	if (write_errno > 0) {
		e = write_errno;
		write_errno = -1; /* said once; the thread stays idle */
	}
	pthread_mutex_unlock(&mu);
	if (e)
		log_info("cgroup warm-up off: writing to this process's cgroup.procs: %s", strerror(e));
}
