/* cgwarm (workers/cgwarm.c): while a start holds it, a thread writes this
 * process into the cgroup it already is in, so that runsc's own cgroup
 * moves do not wait for a grace period (what that saves is bench/'s:
 * bench/create-latency's runsc step). Here what must hold whatever it
 * saves: the process stays in every cgroup it was in, the thread works
 * only while a start holds it, a child forked meanwhile runs and ends
 * normally, and holds nest. Needs root (it writes cgroup.procs). */
#include "config.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "../tap.h"
#include "cgwarm.h"

static void read_file(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "re");
	size_t r = f ? fread(buf, 1, n - 1, f) : 0;

	buf[r] = 0;
	if (f)
		fclose(f);
}

/* The id of this process's thread other than the main one (0: none). */
static int other_thread(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int tid = 0;

	while (d && (e = readdir(d)))
		if (atoi(e->d_name) > 0 && atoi(e->d_name) != (int)getpid())
			tid = atoi(e->d_name);
	if (d)
		closedir(d);
	return tid;
}

/* How often the thread gave up the CPU of its own accord so far (each of
 * its timed waits between writes is one). */
static long switches(int tid)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	read_file(path, buf, sizeof(buf));
	p = strstr(buf, "voluntary_ctxt_switches:");
	return p && p != buf && p[-1] == '\n' ? atol(p + 24) : -1;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int main(void)
{
	char before[4096], after[4096];
	int tid, status;
	long s0, s1;
	pid_t pid;

	if (geteuid() != 0) {
		printf("1..0 # SKIP needs root (writes cgroup.procs)\n");
		return 0;
	}
	plan(7);
	read_file("/proc/self/cgroup", before, sizeof(before));
	cgwarm_begin();
	sleep_ms(100);
	tid = other_thread();
	ok(tid > 0, "a start that holds the warm-up has its thread beside it");
	read_file("/proc/self/cgroup", after, sizeof(after));
	ok(before[0] && strcmp(before, after) == 0, "its writes leave the process in the cgroups it was in");
	s0 = switches(tid);
	sleep_ms(100);
	s1 = switches(tid);
	ok(s0 >= 0 && s1 - s0 >= 2, "it writes again and again while held (%ld waits in 100 ms)", s1 - s0);

	pid = fork();
	if (pid == 0) {
		/* a forked child has no thread of it: begin and end do nothing */
		cgwarm_begin();
		cgwarm_end();
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	ok(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "a child forked meanwhile starts a program and ends normally");

	cgwarm_begin(); /* a second start beside the first */
	cgwarm_end();
	s0 = switches(tid);
	sleep_ms(100);
	s1 = switches(tid);
	ok(s1 - s0 >= 2, "one of two starts ending leaves it writing for the other (%ld waits)", s1 - s0);

	cgwarm_end();
	sleep_ms(20); /* the wait it was in ends */
	s0 = switches(tid);
	sleep_ms(100);
	s1 = switches(tid);
	ok(s1 == s0, "once no start holds it, it waits without writing (%ld waits in 100 ms)", s1 - s0);
	read_file("/proc/self/cgroup", after, sizeof(after));
	ok(strcmp(before, after) == 0, "and the process is still where it was");
	return done_testing();
}
