/* runsc for one sandbox (runsc.h): its command lines, starting and removing
 * the container, what runsc and the kernel know of it (its state, the
 * sentry's pid, the cgroups runsc made, their OOM kills). */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "err.h"
#include "host.h"
#include "log.h"
#include "runsc.h"

#define DESTROY_TIMEOUT_MS 20000
#define CGROUP_ROOT "/sys/fs/cgroup"

static const struct host_run_opts tool_opts = HOST_RUN_OPTS("sandbox");

/* ---- command lines ------------------------------------------------------- */

/* runsc's global flags, then the command's arguments (NULL-terminated). */
static void runsc_argv(const struct sandbox_node_cfg *c, const struct sandbox_paths *p,
		       const char **argv, size_t max, char *logflag, size_t logsz, ...)
{
	static char rootflag[600], platflag[64];
	size_t n = 0;
	va_list ap;
	const char *a;

	snprintf(rootflag, sizeof(rootflag), "--root=%s", p->runsc_root);
	snprintf(platflag, sizeof(platflag), "--platform=%s", c->platform);
	argv[n++] = c->runsc;
	argv[n++] = rootflag;
	argv[n++] = "--rootless=false";
	argv[n++] = "--overlay2=none";
	argv[n++] = platflag;
	argv[n++] = "--network=sandbox";
	/* sbx-init listens on its channel inside; the host connects to the
	 * socket file in chan/ (doc/sandbox-node.md). */
	argv[n++] = sandbox_has_init(c) ? "--host-uds=create" : "--host-uds=none";
	if (logflag) {
		argv[n++] = logflag;
		(void)logsz;
	}
	va_start(ap, logsz);
	while ((a = va_arg(ap, const char *)) && n + 1 < max)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
}

/* ---- runsc state, pids, cgroups ------------------------------------------ */

/* /proc/<pid>/<what> into buf, NUL-terminated: its length, or -1 when
 * the process is gone or the file empty. */
static ssize_t proc_file(pid_t pid, const char *what, char *buf, size_t cap)
{
	char path[64];
	cleanup_close int fd = -1;
	ssize_t r;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	r = read(fd, buf, cap - 1);
	if (r <= 0)
		return -1;
	buf[r] = 0;
	return r;
}

/* pid's state letter from /proc/<pid>/stat (it follows the last ')', the
 * command name may hold any), or 0 when it cannot be read. */
static char proc_state(pid_t pid)
{
	char st[600];
	const char *rp;

	if (proc_file(pid, "stat", st, sizeof(st)) < 0 || !(rp = strrchr(st, ')')) || rp[1] != ' ')
		return 0;
	return rp[2];
}

static bool state_dead(char st)
{
	return st == 'Z' || st == 'X';
}

/* A SIGKILL waits for pid: a task the cgroup v1 freezer holds (an idle
 * sandbox, a waiting warm pool member: idle.c) takes it only once thawed,
 * so until then it looks alive but is as good as dead. */
static bool kill_pending(pid_t pid)
{
	char buf[4096];
	const char *k[] = { "\nSigPnd:", "\nShdPnd:" };

	if (proc_file(pid, "status", buf, sizeof(buf)) < 0)
		return false;
	for (size_t i = 0; i < 2; i++) {
		const char *p = strstr(buf, k[i]);
		unsigned long long mask;
		if (p && sscanf(p + strlen(k[i]), "%llx", &mask) == 1 && (mask & (1ull << (SIGKILL - 1))))
			return true;
	}
	return false;
}

/* Is pid the sentry of sandbox id (and not a zombie, nor killed)? */
bool runsc_sentry_alive(pid_t pid, const char *id)
{
	char buf[4096], st;
	ssize_t r;

	if (pid <= 0)
		return false;
	st = proc_state(pid);
	if (!st || state_dead(st) || kill_pending(pid))
		return false;
	r = proc_file(pid, "cmdline", buf, sizeof(buf));
	/* cmdline is NUL-separated: look for the id as one argument's text */
	for (ssize_t i = 0; i < r; i += (ssize_t)strlen(buf + i) + 1)
		if (strstr(buf + i, id))
			return true;
	return false;
}

bool runsc_sentry_stopped(const struct sandbox_node_cfg *c, const char *id)
{
	struct sandbox_paths p;
	pid_t pid;
	char st;

	sandbox_paths(c, id, &p);
	pid = runsc_read_pidfile(&p);
	if (!runsc_sentry_alive(pid, id))
		return false;
	st = proc_state(pid);
	return st == 'T' || st == 't';
}

pid_t runsc_read_pidfile(const struct sandbox_paths *p)
{
	char path[600], buf[32] = "";
	cleanup_close int fd = -1;
	ssize_t r;

	snprintf(path, sizeof(path), "%s/sandbox.pid", p->dir);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return 0;
	if ((r = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return 0;
	buf[r] = 0;
	return (pid_t)atoi(buf);
}

/* `runsc list -quiet`: what runsc itself says it knows under our --root. */
static int runsc_list_ids(const struct sandbox_node_cfg *c, char ***ids, size_t *n, sbx_err *err)
{
	struct sandbox_paths p;
	const char *argv[16];
	cleanup_host_out struct host_out o = { 0 };
	char *save = NULL, *tok;

	snprintf(p.runsc_root, sizeof(p.runsc_root), "%s/runsc", c->state_dir);
	runsc_argv(c, &p, argv, SBX_ARRAY_LEN(argv), NULL, 0, "list", "-quiet", NULL);
	if (host_run_ok("runsc list", argv, &tool_opts, &o, err) < 0)
		return -1;
	for (tok = strtok_r(o.out, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save)) {
		char **nv = realloc(*ids, (*n + 1) * sizeof(char *));
		if (!nv)
			return sbx_err_set(err, 500, "sandbox", "out of memory");
		*ids = nv;
		(*ids)[(*n)++] = strdup(tok);
	}
	return 0;
}

/* Is name one of runsc's files of a container's record
 * ("<container>_sandbox:<sandbox>.state" or ".lock") or a sandbox's control
 * socket ("runsc-<sandbox>.sock")? *cont gets the container's id of a
 * .state file (what `runsc list` lists), else "". */
static bool runsc_root_file(const char *name, char *cont, size_t contsz)
{
	const char *sb = strstr(name, "_sandbox:");
	size_t l = strlen(name);

	cont[0] = 0;
	if (sb && sb > name && (size_t)(sb - name) < contsz) {
		if (l > 6 && !strcmp(name + l - 6, ".state")) {
			memcpy(cont, name, (size_t)(sb - name));
			cont[sb - name] = 0;
			return true;
		}
		return l > 5 && !strcmp(name + l - 5, ".lock");
	}
	return !strncmp(name, "runsc-", 6) && l > 11 && !strcmp(name + l - 5, ".sock");
}

/* Containers runsc knows under our --root (ids only): the names of its
 * state files, which are what `runsc list` reads, found without starting
 * runsc (the orphan pass asks every reaper_interval: a runsc process each
 * time, ~50 ms of CPU and the node agent's loop waiting for it). Anything
 * else in the root (another runsc's layout) and runsc list decides. */
int runsc_ids(const struct sandbox_node_cfg *c, char ***ids, size_t *n, sbx_err *err)
{
	char root[600], cont[256];
	DIR *d;
	struct dirent *e;
	bool other = false;

	*ids = NULL;
	*n = 0;
	snprintf(root, sizeof(root), "%s/runsc", c->state_dir);
	d = opendir(root);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		return sbx_err_sys(err, "sandbox", "list %s", root);
	}
	while ((e = readdir(d))) {
		char **nv;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!runsc_root_file(e->d_name, cont, sizeof(cont))) {
			other = true;
			break;
		}
		if (!cont[0])
			continue;
		nv = realloc(*ids, (*n + 1) * sizeof(char *));
		if (nv)
			*ids = nv;
		if (!nv || !(nv[*n] = strdup(cont))) {
			closedir(d);
			host_strv_free(*ids, *n);
			*ids = NULL;
			*n = 0;
			return sbx_err_set(err, 500, "sandbox", "out of memory");
		}
		(*n)++;
	}
	closedir(d);
	if (!other)
		return 0;
	host_strv_free(*ids, *n);
	*ids = NULL;
	*n = 0;
	return runsc_list_ids(c, ids, n, err);
}

/* Does runsc's root hold a state file of container id? runsc keeps one
 * "<container>_sandbox:<sandbox>.state" per container there, and that file
 * is what `runsc list` lists: 1 yes, 0 no, -1 the root holds no state file
 * at all (another layout, or nothing: runsc list decides). Reading the
 * directory is O(1) runsc runs where `runsc list` loads every container
 * (~0.1 s of CPU with a thousand), twice per destroy. */
static int state_file_of(const struct sandbox_node_cfg *c, const char *id)
{
	char root[600], cont[256];
	DIR *d;
	struct dirent *e;
	int found = -1;

	snprintf(root, sizeof(root), "%s/runsc", c->state_dir);
	d = opendir(root);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (!runsc_root_file(e->d_name, cont, sizeof(cont)) || !cont[0])
			continue;
		if (!strcmp(cont, id)) {
			found = 1;
			break;
		}
		found = 0;
	}
	closedir(d);
	return found;
}

static bool runsc_has(const struct sandbox_node_cfg *c, const char *id, sbx_err *err, int *rc)
{
	char **ids;
	size_t n;
	bool has = false;
	int st = state_file_of(c, id);

	if (st >= 0) {
		*rc = 0;
		return st == 1;
	}
	*rc = runsc_ids(c, &ids, &n, err);
	for (size_t i = 0; i < n; i++)
		if (ids[i] && strcmp(ids[i], id) == 0)
			has = true;
	host_strv_free(ids, n);
	return has;
}

static const char *const cgroup_ctrls[] = { "memory", "cpu", "cpuacct", "cpuset", "pids", "devices",
					     "freezer", "blkio", "systemd", "unified" };

static void cgroup_path(const char *ctrl, const char *id, char *out, size_t n)
{
	snprintf(out, n, CGROUP_ROOT "/%s/" CGROUP_PARENT "/%s", ctrl, id);
}

/* The cgroups runsc made for it (cgroupsPath /sbx/ID) that outlived it.
 * -1 when one is still there after ~1 s of EBUSY (a task in it has not
 * finished exiting: a sentry held to a small CPU quota takes its time),
 * err naming it: the caller keeps the sandbox's directory, so the orphan
 * pass, which finds leftovers by that directory, comes back for it. */
int runsc_cgroups_remove(const char *id, sbx_err *err)
{
	int rc = 0;

	for (size_t i = 0; i < SBX_ARRAY_LEN(cgroup_ctrls); i++) {
		char p[300];
		int t = 0;
		cgroup_path(cgroup_ctrls[i], id, p, sizeof(p));
		while (rmdir(p) < 0) {
			if (errno != EBUSY || ++t >= 20) {
				if (errno != ENOENT && rc == 0)
					rc = sbx_err_sys(err, "sandbox", "remove cgroup %s", p);
				break;
			}
			host_sleep_ms(50);
		}
	}
	return rc;
}

/* oom_kill count of the sandbox's memory cgroup (v1 memory.oom_control, v2
 * memory.events); -1 when unknown. */
long runsc_oom_kills(const char *id)
{
	/* v1 memory.oom_control; v2 memory.events (hybrid or unified mount) */
	char files[3][300];

	snprintf(files[0], sizeof(files[0]), CGROUP_ROOT "/memory/" CGROUP_PARENT "/%s/memory.oom_control", id);
	snprintf(files[1], sizeof(files[1]), CGROUP_ROOT "/unified/" CGROUP_PARENT "/%s/memory.events", id);
	snprintf(files[2], sizeof(files[2]), CGROUP_ROOT "/" CGROUP_PARENT "/%s/memory.events", id);
	for (size_t i = 0; i < SBX_ARRAY_LEN(files); i++) {
		char buf[1024];
		cleanup_close int fd = -1;
		ssize_t r;
		const char *k;

		if ((fd = open(files[i], O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		if ((r = read(fd, buf, sizeof(buf) - 1)) <= 0)
			continue;
		buf[r] = 0;
		if ((k = strstr(buf, "oom_kill ")))
			return atol(k + 9);
	}
	return -1;
}

/* ---- start --------------------------------------------------------------- */

/* runsc VERB... as a launcher (setsid, a private mount namespace for
 * --network=sandbox, PID 1's output in console.log), by deadline. */
static int runsc_launch(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id,
			long long deadline, const char *verb, const char *extra, sbx_err *err)
{
	char logflag[700], pidfile[600], console[600], tail[HOST_TAIL_MAX], bundleflag[600], pidflag[700];
	const char *argv[24];
	cleanup_close int cfd = -1;
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("sandbox");
	long long left = deadline - sbx_now_ms();

	snprintf(logflag, sizeof(logflag), "--log=%s/runsc.log", p->dir);
	snprintf(pidfile, sizeof(pidfile), "%s/sandbox.pid", p->dir);
	snprintf(pidflag, sizeof(pidflag), "--pid-file=%s", pidfile);
	snprintf(bundleflag, sizeof(bundleflag), "--bundle=%s", p->bundle);
	snprintf(console, sizeof(console), "%s/console.log", p->dir);
	/* The detached sandbox keeps runsc's stdio as PID 1's: an append-only
	 * file (a pipe would fill, a non-append file gets overwritten). */
	cfd = open(console, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (cfd < 0)
		return sbx_err_sys(err, "sandbox", "create %s", console);
	ro.launcher = true;
	ro.out_fd = cfd;
	ro.timeout_ms = left > 1000 ? (int)left : 1000;
	if (extra)
		runsc_argv(c, p, argv, SBX_ARRAY_LEN(argv), logflag, sizeof(logflag), verb, "--detach", extra,
			   bundleflag, pidflag, id, NULL);
	else
		runsc_argv(c, p, argv, SBX_ARRAY_LEN(argv), logflag, sizeof(logflag), verb, "--detach", bundleflag,
			   pidflag, id, NULL);
	if (host_run(argv, &ro, &o, err) < 0) {
		host_file_tail(console, tail, sizeof(tail));
		return sbx_err_ctx(err, "runsc %s (%s)", verb, tail);
	}
	if (o.status != 0) {
		host_file_tail(console, tail, sizeof(tail));
		if (!tail[0]) {
			snprintf(logflag, sizeof(logflag), "%s/runsc.log", p->dir);
			host_file_tail(logflag, tail, sizeof(tail));
		}
		return sbx_err_set(err, 500, "sandbox", "runsc %s exited %d: %s", verb, o.status, tail);
	}
	return 0;
}

int runsc_start(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
		const struct sandbox_paths *p, long long deadline, sbx_err *err)
{
	return runsc_launch(c, p, s->id, deadline, "run", NULL, err);
}

int runsc_restore(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id,
		  const char *image_dir, long long deadline, sbx_err *err)
{
	char imgflag[700];

	snprintf(imgflag, sizeof(imgflag), "--image-path=%s", image_dir);
	return runsc_launch(c, p, id, deadline, "restore", imgflag, err);
}

int runsc_checkpoint(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id,
		     const char *image_dir, int timeout_ms, sbx_err *err)
{
	char logflag[700], imgflag[700];
	const char *argv[24];
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("sandbox");

	snprintf(logflag, sizeof(logflag), "--log=%s/runsc.log", p->dir);
	snprintf(imgflag, sizeof(imgflag), "--image-path=%s", image_dir);
	ro.timeout_ms = timeout_ms;
	runsc_argv(c, p, argv, SBX_ARRAY_LEN(argv), logflag, sizeof(logflag), "checkpoint", imgflag, id, NULL);
	return host_run_ok("runsc checkpoint", argv, &ro, &o, err);
}

int runsc_signal(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id, const char *sig,
		 sbx_err *err)
{
	const char *argv[24];
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("sandbox");

	ro.timeout_ms = 10000;
	runsc_argv(c, p, argv, SBX_ARRAY_LEN(argv), NULL, 0, "kill", id, sig, NULL);
	return host_run_ok("runsc kill", argv, &ro, &o, err);
}

int runsc_sync(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id, sbx_err *err)
{
	const char *argv[24];
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("sandbox");

	ro.timeout_ms = 30000;
	runsc_argv(c, p, argv, SBX_ARRAY_LEN(argv), NULL, 0, "exec", id, "/bin/sync", NULL);
	return host_run_ok("runsc exec sync", argv, &ro, &o, err);
}

/* ---- remove -------------------------------------------------------------- */

/* Live (non-zombie) runsc processes of this sandbox, found in /proc by their
 * command line (the sentry ends with the id; sentry and gofer name the
 * sandbox's directory in --bundle/--log); with kill_them, SIGKILL each. */
/* Is pid a runsc process of this sandbox: its command line names the
 * sandbox's directory, or the id as an argument of its own? */
static bool proc_mine(pid_t pid, const char *marker, const char *id)
{
	char buf[8192];
	ssize_t r = proc_file(pid, "cmdline", buf, sizeof(buf));

	if (r < 0 || !strstr(buf, "runsc"))
		return false;
	for (ssize_t i = 0; i < r; i += (ssize_t)strlen(buf + i) + 1)
		if (strstr(buf + i, marker) || (i > 0 && strcmp(buf + i, id) == 0))
			return true;
	return false;
}

/* Counts (and with kill_them SIGKILLs) pid if it is a live process of the
 * sandbox; a dead one is reaped when it is ours. */
static int proc_count(pid_t pid, const char *marker, const char *id, bool kill_them)
{
	char st;

	if (!proc_mine(pid, marker, id) || !(st = proc_state(pid)))
		return 0;
	if (state_dead(st)) {
		waitpid(pid, NULL, WNOHANG); /* ours when we are its subreaper */
		return 0;
	}
	if (kill_them)
		kill(pid, SIGKILL);
	return 1;
}

#define PROCS_TRACK 64

/* The sandbox's live runsc processes. A scan of /proc reads every task's
 * command line (~6,000 at a thousand sandboxes), so while the ones it found
 * (*found, up to PROCS_TRACK) are dying they are looked at alone
 * (track = true); the caller scans again once they are gone, for any that
 * appeared meanwhile. A pid is counted only while its command line is still
 * the sandbox's, so a pid reused meanwhile is never killed. */
static int sandbox_procs(const struct sandbox_paths *p, const char *id, bool kill_them, pid_t *found,
			 int *nfound, bool track)
{
	DIR *d;
	struct dirent *e;
	char marker[600];
	int n = 0, nf = 0;

	snprintf(marker, sizeof(marker), "%s/", p->dir);
	if (track) {
		for (int i = 0; i < *nfound; i++)
			if (proc_count(found[i], marker, id, kill_them))
				found[nf++] = found[i];
		*nfound = nf;
		return nf;
	}
	d = opendir("/proc");
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name);

		if (pid <= 0 || pid == getpid() || !proc_count(pid, marker, id, kill_them))
			continue;
		if (nf < PROCS_TRACK)
			found[nf++] = pid;
		n++;
	}
	closedir(d);
	/* more than can be tracked: every look is a scan */
	*nfound = n <= PROCS_TRACK ? nf : 0;
	return n;
}

/* The tasks of the sandbox's cgroup (sentry, gofer, the platform's stubs:
 * runsc puts them all in cgroupsPath /sbx/ID), found in O(1) where a /proc
 * scan reads every process of the node; with kill_them each is SIGKILLed
 * and goes to found (up to PROCS_TRACK) for the caller to watch. *has_pid
 * says whether pid (the sentry of sandbox.pid) was among them. The number
 * of tasks, 0 when there is no such cgroup. */
static int cgroup_tasks(const char *id, bool kill_them, pid_t *found, int *nfound, pid_t pid, bool *has_pid)
{
	static const char *const ctrls[] = { "pids/", "freezer/", "memory/", "" };
	int n = 0;

	if (nfound)
		*nfound = 0;
	if (has_pid)
		*has_pid = false;
	for (size_t i = 0; i < SBX_ARRAY_LEN(ctrls); i++) {
		char path[300];
		FILE *f;
		long t;

		snprintf(path, sizeof(path), CGROUP_ROOT "/%s" CGROUP_PARENT "/%s/cgroup.procs", ctrls[i], id);
		if (!(f = fopen(path, "re")))
			continue;
		while (fscanf(f, "%ld", &t) == 1) {
			if (t <= 1 || t == getpid())
				continue;
			n++;
			if (has_pid && pid > 0 && t == pid)
				*has_pid = true;
			if (!kill_them || kill((pid_t)t, SIGKILL) < 0)
				continue;
			if (*nfound < PROCS_TRACK)
				found[(*nfound)++] = (pid_t)t;
		}
		fclose(f);
		break; /* one hierarchy holds them all */
	}
	return n;
}

/* runsc's record of a container whose processes are gone: the state and
 * lock files and the control socket under --root (state_file_of's
 * layout), and the cgroups runsc made (tried once each: one still busy is
 * the teardown's cgroups step's to wait for), as `runsc delete` removes
 * them. false when the layout is not the one known here. */
static bool runsc_forget(const struct sandbox_node_cfg *c, const char *id)
{
	char path[3][700];

	if (state_file_of(c, id) != 1)
		return false;
	snprintf(path[0], sizeof(path[0]), "%s/runsc/%s_sandbox:%s.state", c->state_dir, id, id);
	snprintf(path[1], sizeof(path[1]), "%s/runsc/%s_sandbox:%s.lock", c->state_dir, id, id);
	snprintf(path[2], sizeof(path[2]), "%s/runsc/runsc-%s.sock", c->state_dir, id);
	for (size_t i = 0; i < SBX_ARRAY_LEN(path); i++)
		if (unlink(path[i]) < 0 && errno != ENOENT)
			log_warnx("sandbox %s: remove %s: %s", id, path[i], strerror(errno));
	for (size_t i = 0; i < SBX_ARRAY_LEN(cgroup_ctrls); i++) {
		char cg[300];
		cgroup_path(cgroup_ctrls[i], id, cg, sizeof(cg));
		(void)rmdir(cg);
	}
	return state_file_of(c, id) != 1;
}

/* The sandbox's processes are killed by us, not by `runsc delete -force`:
 * that is a Go process of ~120 ms of CPU that then polls for the sentry's
 * end (~200 ms a destroy at a thousand sandboxes, bench/density). The
 * cgroup names the processes; a /proc scan then proves none is left, with
 * or without a cgroup (a start killed before runsc made it). runsc's own
 * record goes last: runsc_forget, or `runsc delete` of the dead container
 * when its root has another layout. */
int runsc_remove(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id,
		 sbx_err *err)
{
	const char *argv[24];
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("sandbox");
	sbx_err e2 = SBX_ERR_INIT;
	int rc, left = 0;
	bool known;

	ro.timeout_ms = DESTROY_TIMEOUT_MS;
	ro.reap_all = true;
	known = runsc_has(c, id, &e2, &rc);
	if (rc < 0)
		log_warnx("sandbox %s: %s (deleting anyway)", id, e2.msg);
	/* Whatever runsc thinks: no process of the sandbox may outlive this
	 * (a start killed between fork and pidfile, runsc's state lost). When
	 * the sentry of sandbox.pid was in the cgroup, the start was whole and
	 * the cgroup holds every process: an empty cgroup proves they are gone.
	 * Otherwise a scan of /proc does (O(processes of the node): ~60 ms of
	 * a destroy at a thousand sandboxes). */
	{
		pid_t found[PROCS_TRACK];
		int nfound = 0;
		bool track, done = false, whole = false;

		track = cgroup_tasks(id, true, found, &nfound, runsc_read_pidfile(p), &whole) > 0 && nfound > 0;
		for (int i = 0; whole && i < 500; i++) {
			/* killed again if still there: a SIGKILL more is harmless */
			if ((left = cgroup_tasks(id, true, found, &nfound, 0, NULL)) == 0) {
				done = true;
				break;
			}
			host_sleep_ms(i < 20 ? 2 : 10);
		}
		for (int i = 0; i < 300 && !done; i++) {
			bool scan = !track;
			left = sandbox_procs(p, id, true, found, &nfound, track);
			done = left == 0 && scan; /* a scan found none */
			/* the ones found are gone: scan again; else look at them alone */
			track = left > 0 && nfound > 0;
			if (left == 0)
				continue;
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
			host_sleep_ms(i < 20 ? 2 : 10);
		}
		if (!done && left == 0)
			left = sandbox_procs(p, id, true, found, &nfound, false);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	if (left > 0)
		return sbx_err_set(err, 500, "sandbox", "%d runsc process(es) survive SIGKILL", left);
	if ((known || rc < 0) && !runsc_forget(c, id) && runsc_has(c, id, &e2, &rc)) {
		/* the processes are gone: this only drops runsc's record */
		runsc_argv(c, p, argv, SBX_ARRAY_LEN(argv), NULL, 0, "delete", "-force", id, NULL);
		if (host_run(argv, &ro, &o, err) < 0 || runsc_has(c, id, err, &rc)) {
			char tail[HOST_TAIL_MAX];
			host_tail(o.errs, tail, sizeof(tail));
			return sbx_err_set(err, 500, "sandbox", "runsc delete exited %d: %s", o.status, tail);
		}
	}
	return 0;
}
