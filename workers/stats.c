/* A sandbox's resource use from the host (stats.h). Both cgroup layouts
 * runsc uses are read: v1 (one hierarchy per controller,
 * /sys/fs/cgroup/CTRL/sbx/ID) and v2 (/sys/fs/cgroup/sbx/ID). A sandbox
 * Nomad runs is read the same way from its container's cgroup (where
 * Docker had runsc make it: sandbox_adopted_cgroup). */
#include "config.h"
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include "cleanup.h"
#include "id.h"
#include "runsc.h"
#include "stats.h"

#define CG "/sys/fs/cgroup"

static ssize_t read_file(const char *path, char *buf, size_t cap)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t r;

	if (fd < 0 || (r = read(fd, buf, cap - 1)) < 0)
		return -1;
	buf[r] = 0;
	return r;
}

/* ctrl: "memory", "cpu"... for v1's hierarchies, "" for v2's one; rel: the
 * cgroup below the hierarchy's root (CGROUP_PARENT/ID for ours). */
static void cg_file(char *out, size_t n, const char *ctrl, const char *rel, const char *file)
{
	snprintf(out, n, CG "%s%s/%s/%s", ctrl[0] ? "/" : "", ctrl, rel, file);
}

/* A file holding one number ("max" is no limit: -1); -1 when unreadable. */
static long long read_num(const char *ctrl, const char *rel, const char *file)
{
	char path[700], buf[64], *end;
	long long v;

	cg_file(path, sizeof(path), ctrl, rel, file);
	if (read_file(path, buf, sizeof(buf)) <= 0 || !strncmp(buf, "max", 3))
		return -1;
	v = strtoll(buf, &end, 10);
	return end == buf ? -1 : v;
}

/* The value of "key N" in a flat keyed file (memory.stat, cpu.stat);
 * -1 when absent. */
static long long read_key(const char *ctrl, const char *rel, const char *file, const char *key)
{
	char path[700], buf[8192];
	size_t kl = strlen(key);

	cg_file(path, sizeof(path), ctrl, rel, file);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return -1;
	for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, key, kl) && l[kl] == ' ')
			return strtoll(l + kl + 1, NULL, 10);
	return -1;
}

/* A limit of v1 "no limit" is a huge number (PAGE_COUNTER_MAX pages). */
static long long v1_limit(long long v)
{
	return v < 0 || v >= (1LL << 60) ? -1 : v;
}

/* The wall ms a cgroup directory was made (kernfs sets its times then). */
static long long born(const char *ctrl, const char *rel)
{
	char path[700];
	struct stat st;

	cg_file(path, sizeof(path), ctrl, rel, "");
	if (stat(path, &st) < 0)
		return -1;
	return (long long)st.st_ctim.tv_sec * 1000 + st.st_ctim.tv_nsec / 1000000;
}

/* CPU time in µs: v1's cpuacct counts ns, v2's cpu.stat µs. */
static long long cpu_v1(const char *rel)
{
	long long v = read_num("cpuacct", rel, "cpuacct.usage");

	return v >= 0 ? v / 1000 : -1;
}

static long long cpu_v2(const char *rel)
{
	return read_key("", rel, "cpu.stat", "usage_usec");
}

long long sandbox_cpu_usec(const struct sandbox_node_cfg *c, const char *id)
{
	char rel[64];
	long long v;

	if (runsc_sentry_stopped(c, id))
		return -1;
	snprintf(rel, sizeof(rel), CGROUP_PARENT "/%.24s", id);
	v = cpu_v1(rel);
	return v >= 0 ? v : cpu_v2(rel);
}

static void read_cgroups(const char *rel, struct sandbox_usage *u)
{
	char path[700], buf[128];
	long long inactive;

	u->mem_bytes = read_num("memory", rel, "memory.usage_in_bytes");
	if (u->mem_bytes >= 0) {
		/* v1 */
		u->born_ms = born("memory", rel);
		inactive = read_key("memory", rel, "memory.stat", "total_inactive_file");
		u->mem_limit = v1_limit(read_num("memory", rel, "memory.limit_in_bytes"));
		u->cpu_usec = cpu_v1(rel);
		u->cpu_quota_usec = read_num("cpu", rel, "cpu.cfs_quota_us");
		u->cpu_period_usec = read_num("cpu", rel, "cpu.cfs_period_us");
		u->pids = read_num("pids", rel, "pids.current");
		u->pids_max = read_num("pids", rel, "pids.max");
	} else {
		u->mem_bytes = read_num("", rel, "memory.current");
		if (u->mem_bytes < 0)
			return;
		u->born_ms = born("", rel);
		inactive = read_key("", rel, "memory.stat", "inactive_file");
		u->mem_limit = read_num("", rel, "memory.max");
		u->cpu_usec = cpu_v2(rel);
		cg_file(path, sizeof(path), "", rel, "cpu.max");
		if (read_file(path, buf, sizeof(buf)) > 0 && sscanf(buf, "%lld %lld", &u->cpu_quota_usec,
								     &u->cpu_period_usec) != 2) {
			u->cpu_quota_usec = -1; /* "max PERIOD" */
			u->cpu_period_usec = -1;
		}
		u->pids = read_num("", rel, "pids.current");
		u->pids_max = read_num("", rel, "pids.max");
	}
	/* what `docker stats` shows too: cache the kernel can drop is not in use */
	if (inactive > 0 && inactive < u->mem_bytes)
		u->mem_bytes -= inactive;
}

/* /proc/PID/net/dev of the sentry: the counters of the sandbox's own
 * network namespace (runsc --network=sandbox runs it there). */
static void read_net(long pid, struct sandbox_usage *u)
{
	char path[64], buf[4096];
	long long rx = 0, tx = 0;

	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/net/dev", pid);
	if (read_file(path, buf, sizeof(buf)) <= 0)
		return;
	/* two header lines, then "  name: rx_bytes packets ... (8 rx fields) tx_bytes ..." */
	for (char *l = strchr(buf, '\n'); l && (l = strchr(l + 1, '\n'));) {
		char name[32];
		unsigned long long v[9];

		if (sscanf(l + 1, " %31[^:]: %llu %llu %llu %llu %llu %llu %llu %llu %llu", name, &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7], &v[8]) != 10 ||
		    !strcmp(name, "lo"))
			continue;
		rx += (long long)v[0];
		tx += (long long)v[8];
	}
	u->net_rx = rx;
	u->net_tx = tx;
}

int sandbox_usage_read(const struct sandbox_node_cfg *c, const char *id, struct sandbox_usage *u, sbx_err *err)
{
	struct sandbox_paths p;
	struct statvfs vfs;
	struct stat st, top;
	char rel[520];
	long pid;

	memset(u, 0xff, sizeof(*u)); /* every field -1 */
	if (!sbx_id_valid(id))
		return sbx_err_set(err, 400, "sandbox", "invalid sandbox id");
	if (sandbox_adopted(c, id)) {
		/* Nomad's: no disk image of ours (its writable layer is on the
		 * client's disk, without a size of its own) */
		if (sandbox_adopted_cgroup(c, id, rel, sizeof(rel), &pid, err) < 0)
			return -1;
		read_cgroups(rel, u);
		if (u->mem_bytes < 0)
			return sbx_err_set(err, 404, "sandbox", "sandbox %s: no memory cgroup %s here", id, rel);
		read_net(pid, u);
		return 0;
	}
	snprintf(rel, sizeof(rel), CGROUP_PARENT "/%s", id);
	read_cgroups(rel, u);
	if (u->mem_bytes < 0)
		return sbx_err_set(err, 404, "sandbox", "sandbox %s has no memory cgroup here", id);
	sandbox_paths(c, id, &p);
	if (stat(p.disk_img, &st) == 0)
		u->disk_total = (long long)st.st_size;
	/* only when the image is mounted there: else statvfs tells the host's disk */
	if (stat(p.disk_mnt, &st) == 0 && stat(p.dir, &top) == 0 && st.st_dev != top.st_dev &&
	    statvfs(p.disk_mnt, &vfs) == 0)
		u->disk_used = (long long)(vfs.f_blocks - vfs.f_bfree) * (long long)vfs.f_frsize;
	pid = runsc_read_pidfile(&p);
	if (pid > 0)
		read_net(pid, u);
	return 0;
}
