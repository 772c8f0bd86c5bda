/* One sandbox on this node: its disk image, overlay root, network, OCI bundle
 * and runsc container; made in order, unmade in reverse. See sandbox.h for the
 * layout and doc/sandbox-node.md for why each step is done the way it is.
 *
 * Every step leaves something findable from the outside (a directory, a
 * mount in /proc/self/mountinfo, a loop device whose backing file is under
 * the sandbox's directory, a runsc container under STATE/runsc, a cgroup,
 * the network's own leftovers), so destroy and list never depend on a record
 * having been written: they look. A failed start calls the same teardown as
 * destroy, which undoes whatever exists, last made first.
 *
 * Tools (mkfs, runsc) run through host.c's runner. */
#include "config.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/loop.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "err.h"
#include "frame.h"
#include "host.h"
#include "log.h"
#include "sandbox.h"

#define DEFAULT_START_TIMEOUT_MS 30000
#define DESTROY_TIMEOUT_MS 20000
#define CGROUP_ROOT "/sys/fs/cgroup"
#define CGROUP_PARENT "sbx"
#define INIT_IN_SANDBOX "/.sbx/sbx-init"
#define CHAN_IN_SANDBOX "/run/sbx"
#define CHAN_SOCK_NAME "channel.sock"

/* How mkfs and runsc run when nothing special is asked. */
static const struct host_run_opts tool_opts = HOST_RUN_OPTS("sandbox");

/* ---- small helpers ----------------------------------------------------- */

static bool id_ok(const char *id)
{
	if (!id || strlen(id) != SBX_ID_LEN)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static bool template_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 63 || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '.' ||
		      s[i] == '_' || s[i] == '-'))
			return false;
	return true;
}

/* Paths end up in mount options (overlay's lowerdir is split on ',' and ':')
 * and in runsc's flags: refuse anything odd rather than escape it. */
static bool path_ok(const char *s)
{
	if (!s || s[0] != '/')
		return false;
	for (const char *p = s; *p; p++)
		if (!(isalnum((unsigned char)*p) || strchr("/._-+", *p)))
			return false;
	return true;
}

/* ---- paths --------------------------------------------------------------- */

void sandbox_paths(const struct sandbox_node_cfg *c, const char *id, struct sandbox_paths *p)
{
	/* check_cfg keeps state_dir under 300 characters and id at 24 */
#define SB "%.300s/sandboxes/%.24s"
	snprintf(p->dir, sizeof(p->dir), SB, c->state_dir, id);
	snprintf(p->disk_img, sizeof(p->disk_img), SB "/disk.img", c->state_dir, id);
	snprintf(p->disk_mnt, sizeof(p->disk_mnt), SB "/disk", c->state_dir, id);
	snprintf(p->rootfs, sizeof(p->rootfs), SB "/rootfs", c->state_dir, id);
	snprintf(p->chan_dir, sizeof(p->chan_dir), SB "/chan", c->state_dir, id);
	snprintf(p->chan_sock, sizeof(p->chan_sock), SB "/chan/" CHAN_SOCK_NAME, c->state_dir, id);
	snprintf(p->bundle, sizeof(p->bundle), SB "/bundle", c->state_dir, id);
	snprintf(p->runsc_root, sizeof(p->runsc_root), "%.300s/runsc", c->state_dir);
#undef SB
}

static void sub_path(const struct sandbox_paths *p, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", p->dir, name);
}

static int check_cfg(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	if (!id_ok(id))
		return sbx_err_set(err, 400, "sandbox", "bad sandbox id '%s'", id ? id : "");
	if (!path_ok(c->state_dir) || strlen(c->state_dir) > 300)
		return sbx_err_set(err, 500, "sandbox_config", "state_dir must be a plain absolute path");
	if (!path_ok(c->runsc))
		return sbx_err_set(err, 500, "sandbox_config", "runsc must be a plain absolute path");
	if (c->init_path && *c->init_path && !path_ok(c->init_path))
		return sbx_err_set(err, 500, "sandbox_config", "init_path must be a plain absolute path");
	if (!c->platform || (strcmp(c->platform, "systrap") && strcmp(c->platform, "ptrace")))
		return sbx_err_set(err, 500, "sandbox_config", "platform must be systrap or ptrace");
	if (!c->net)
		return sbx_err_set(err, 500, "sandbox_config", "no network configuration");
	return 0;
}

static bool have_init(const struct sandbox_node_cfg *c)
{
	return c->init_path && *c->init_path;
}

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
	argv[n++] = have_init(c) ? "--host-uds=create" : "--host-uds=none";
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

/* ---- loop devices and mounts -------------------------------------------- */

/* Attaches img to a free loop device with autoclear (it detaches itself when
 * the last user, the mount, goes) and mounts it at mnt. */
static int loop_mount(const char *img, const char *mnt, sbx_err *err)
{
	cleanup_close int ctl = -1, file = -1;
	char dev[64];

	file = open(img, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (file < 0)
		return sbx_err_sys(err, "sandbox", "open %s", img);
	ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return sbx_err_sys(err, "sandbox", "open /dev/loop-control");
	for (int tries = 0; tries < 20; tries++) {
		cleanup_close int lfd = -1;
		struct loop_config lc;
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (n < 0)
			return sbx_err_sys(err, "sandbox", "LOOP_CTL_GET_FREE");
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		/* devtmpfs makes the node; give it a moment */
		for (int i = 0; i < 50 && (lfd = open(dev, O_RDWR | O_CLOEXEC)) < 0 && errno == ENOENT; i++)
			host_sleep_ms(2);
		if (lfd < 0)
			return sbx_err_sys(err, "sandbox", "open %s", dev);
		memset(&lc, 0, sizeof(lc));
		lc.fd = (unsigned)file;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		snprintf((char *)lc.info.lo_file_name, sizeof(lc.info.lo_file_name), "%.63s", img);
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) < 0) {
			if (errno == EBUSY)
				continue; /* someone else took it first */
			return sbx_err_sys(err, "sandbox", "LOOP_CONFIGURE %s", dev);
		}
		/* noinit_itable: the image is sparse and fresh, its inode tables
		 * read as zeros; zeroing them would only fill the host's disk. */
		if (mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "noinit_itable") < 0) {
			int e = errno;
			/* closing lfd (autoclear, no mount) detaches the device */
			errno = e;
			return sbx_err_sys(err, "sandbox", "mount %s on %s", dev, mnt);
		}
		return 0;
	}
	return sbx_err_set(err, 500, "sandbox", "no free loop device");
}

/* Mount points at or below dir in our namespace, deepest (last mounted)
 * first. /proc/self/mountinfo escapes space, tab, newline and backslash as
 * octal. */
static int mounts_under(const char *dir, char ***out, size_t *n)
{
	cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0, dl = strlen(dir);
	char **v = NULL;

	*out = NULL;
	*n = 0;
	if (!f)
		return -1;
	while (getline(&line, &cap, f) > 0) {
		char raw[PATH_MAX + 1], mp[PATH_MAX + 1];
		size_t j = 0;

		if (sscanf(line, "%*s %*s %*s %*s %4096s", raw) != 1)
			continue;
		for (size_t i = 0; raw[i] && j < PATH_MAX; i++) {
			if (raw[i] == '\\' && isdigit((unsigned char)raw[i + 1]) && raw[i + 2] && raw[i + 3]) {
				mp[j++] = (char)(((raw[i + 1] - '0') << 6) | ((raw[i + 2] - '0') << 3) |
						 (raw[i + 3] - '0'));
				i += 3;
			} else {
				mp[j++] = raw[i];
			}
		}
		mp[j] = 0;
		if (strncmp(mp, dir, dl) == 0 && (mp[dl] == 0 || mp[dl] == '/')) {
			char **nv = realloc(v, (*n + 1) * sizeof(*v));
			if (!nv)
				break;
			v = nv;
			v[(*n)++] = strdup(mp);
		}
	}
	free(line);
	/* mountinfo lists in mount order: reverse it */
	for (size_t i = 0; i < *n / 2; i++) {
		char *t = v[i];
		v[i] = v[*n - 1 - i];
		v[*n - 1 - i] = t;
	}
	*out = v;
	return 0;
}

/* Unmounts everything at or below dir. A busy mount is detached lazily (the
 * container is gone by then; what holds it is a namespace on its way out). */
static int umount_all(const char *dir, sbx_err *err)
{
	for (int pass = 0; pass < 3; pass++) {
		char **m;
		size_t n;
		bool busy = false;

		if (mounts_under(dir, &m, &n) < 0)
			return sbx_err_sys(err, "sandbox", "read /proc/self/mountinfo");
		if (n == 0) {
			free(m);
			return 0;
		}
		for (size_t i = 0; i < n; i++) {
			if (m[i] && umount2(m[i], UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT) {
				busy = true;
				if (pass == 2 && umount2(m[i], UMOUNT_NOFOLLOW | MNT_DETACH) < 0) {
					sbx_err_sys(err, "sandbox", "umount %s", m[i]);
					host_strv_free(m, n);
					return -1;
				}
			}
		}
		host_strv_free(m, n);
		if (busy)
			host_sleep_ms(100);
	}
	return 0;
}

/* Loop devices whose backing file is under dir (the kernel keeps the path it
 * was given; " (deleted)" when the file is gone). */
static int loops_under(const char *dir, int **devs, char ***files, size_t *n)
{
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	size_t dl = strlen(dir);

	*devs = NULL;
	*files = NULL;
	*n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char p[300], bf[PATH_MAX + 1];
		int num;
		cleanup_close int fd = -1;
		ssize_t r;

		if (sscanf(e->d_name, "loop%d", &num) != 1)
			continue;
		snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", e->d_name);
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		if ((r = read(fd, bf, sizeof(bf) - 1)) <= 0)
			continue;
		bf[r] = 0;
		bf[strcspn(bf, "\n")] = 0;
		if (strncmp(bf, dir, dl) == 0 && (bf[dl] == '/' || bf[dl] == 0)) {
			int *nd = realloc(*devs, (*n + 1) * sizeof(int));
			char **nf = realloc(*files, (*n + 1) * sizeof(char *));
			if (nd)
				*devs = nd;
			if (nf)
				*files = nf;
			if (!nd || !nf)
				break;
			(*devs)[*n] = num;
			(*files)[(*n)++] = strdup(bf);
		}
	}
	closedir(d);
	return 0;
}

/* Detaches loop devices still backed by files under dir (normally none:
 * autoclear frees them with the last mount). */
static int loops_free(const char *dir, sbx_err *err)
{
	/* up to 10 s: the last user can be a sentry's mount namespace that
	 * the kernel releases only after its (orphaned) zombie is reaped */
	for (int pass = 0; pass < 100; pass++) {
		int *devs;
		char **files;
		size_t n;

		if (loops_under(dir, &devs, &files, &n) < 0)
			return sbx_err_sys(err, "sandbox", "list /sys/block");
		for (size_t i = 0; i < n && pass >= 50; i++) {
			char dev[64];
			int fd;
			snprintf(dev, sizeof(dev), "/dev/loop%d", devs[i]);
			if ((fd = open(dev, O_RDWR | O_CLOEXEC)) >= 0) {
				ioctl(fd, LOOP_CLR_FD, 0);
				close(fd);
			}
		}
		free(devs);
		host_strv_free(files, n);
		if (n == 0)
			return 0;
		/* a dying sandbox's mount namespace may still hold the mount */
		host_sleep_ms(100);
	}
	return sbx_err_set(err, 500, "sandbox", "a loop device of %s stays attached", dir);
}

/* ---- removing the directory, never leaving it ----------------------------- */

/* Removes everything in dirfd, staying on device dev: a path that is still a
 * mount point (another device) or a symlink is never entered. On failure,
 * *bad names the entry that stayed (and errno says why). Entries that vanish
 * meanwhile are fine. */
static int rm_tree_at(int dirfd, dev_t dev, int depth, const char **bad)
{
	DIR *d;
	struct dirent *e;
	int rc = 0, fd = dup(dirfd), saved = 0;
	static char badname[256];

	if (fd < 0 || depth > 64)
		return -1;
	if (!(d = fdopendir(fd))) {
		close(fd);
		return -1;
	}
	while ((e = readdir(d))) {
		struct stat st;
		bool fail = false;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub;
			if (st.st_dev != dev) {
				errno = EBUSY; /* still mounted: leave it */
				fail = true;
			} else if ((sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
				fail = errno != ENOENT;
			} else {
				fchmod(sub, 0700); /* unpacked trees may hold 0555 dirs */
				if (rm_tree_at(sub, dev, depth + 1, bad) < 0) {
					saved = errno;
					rc = -1;
				}
				close(sub);
				if (unlinkat(dirfd, e->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && rc == 0)
					fail = true;
			}
		} else if (unlinkat(dirfd, e->d_name, 0) < 0 && errno != ENOENT) {
			fail = true;
		}
		if (fail) {
			saved = errno;
			snprintf(badname, sizeof(badname), "%s", e->d_name);
			*bad = badname;
			rc = -1;
		}
	}
	closedir(d);
	errno = saved;
	return rc;
}

static int rm_sandbox_dir(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	char parent[512];
	cleanup_close int pfd = -1, dfd = -1;
	struct stat st;
	const char *bad = "?";

	snprintf(parent, sizeof(parent), "%s/sandboxes", c->state_dir);
	pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (pfd < 0)
		return errno == ENOENT ? 0 : sbx_err_sys(err, "sandbox", "open %s", parent);
	dfd = openat(pfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ENOTDIR || errno == ELOOP) /* not ours to follow: drop the name */
			return unlinkat(pfd, id, 0) < 0 ? sbx_err_sys(err, "sandbox", "unlink %s/%s", parent, id) : 0;
		return sbx_err_sys(err, "sandbox", "open %s/%s", parent, id);
	}
	if (fstat(dfd, &st) < 0)
		return sbx_err_sys(err, "sandbox", "stat %s/%s", parent, id);
	if (rm_tree_at(dfd, st.st_dev, 0, &bad) < 0)
		return sbx_err_sys(err, "sandbox", "remove %s/%s: %s stays", parent, id, bad);
	if (unlinkat(pfd, id, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return sbx_err_sys(err, "sandbox", "remove %s/%s", parent, id);
	return 0;
}

/* ---- runsc state, pids, cgroups ------------------------------------------- */

/* Is pid the sentry of sandbox id (and not a zombie)? */
static bool sentry_alive(pid_t pid, const char *id)
{
	char p[64], buf[4096], st[600];
	cleanup_close int fd = -1;
	ssize_t r;
	const char *rp;

	if (pid <= 0)
		return false;
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	r = read(fd, st, sizeof(st) - 1);
	if (r <= 0)
		return false;
	st[r] = 0;
	rp = strrchr(st, ')');
	if (!rp || rp[1] != ' ' || rp[2] == 'Z' || rp[2] == 'X')
		return false;
	close(fd);
	snprintf(p, sizeof(p), "/proc/%d/cmdline", (int)pid);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	r = read(fd, buf, sizeof(buf) - 1);
	if (r <= 0)
		return false;
	buf[r] = 0;
	/* cmdline is NUL-separated: look for the id as one argument's text */
	for (ssize_t i = 0; i < r; i += (ssize_t)strlen(buf + i) + 1)
		if (strstr(buf + i, id))
			return true;
	return false;
}

static pid_t read_pidfile(const struct sandbox_paths *p)
{
	char path[600], buf[32] = "";
	cleanup_close int fd = -1;
	ssize_t r;

	sub_path(p, "sandbox.pid", path, sizeof(path));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return 0;
	if ((r = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return 0;
	buf[r] = 0;
	return (pid_t)atoi(buf);
}

/* Containers runsc knows under our --root (ids only). */
static int runsc_ids(const struct sandbox_node_cfg *c, char ***ids, size_t *n, sbx_err *err)
{
	struct sandbox_paths p;
	const char *argv[16];
	cleanup_host_out struct host_out o = { 0 };
	char *save = NULL, *tok;

	*ids = NULL;
	*n = 0;
	snprintf(p.runsc_root, sizeof(p.runsc_root), "%s/runsc", c->state_dir);
	if (access(p.runsc_root, F_OK) < 0)
		return 0;
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

static bool runsc_has(const struct sandbox_node_cfg *c, const char *id, sbx_err *err, int *rc)
{
	char **ids;
	size_t n;
	bool has = false;

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

/* The cgroups runsc made for it (cgroupsPath /sbx/ID) that outlived it. */
static void cgroups_remove(const char *id)
{
	for (size_t i = 0; i < SBX_ARRAY_LEN(cgroup_ctrls); i++) {
		char p[300];
		cgroup_path(cgroup_ctrls[i], id, p, sizeof(p));
		for (int t = 0; t < 20 && rmdir(p) < 0 && errno == EBUSY; t++)
			host_sleep_ms(50);
	}
}

/* oom_kill count of the sandbox's memory cgroup (v1 memory.oom_control, v2
 * memory.events); -1 when unknown. */
static long oom_kills(const char *id)
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

/* ---- the OCI bundle --------------------------------------------------------- */

/* KEY=VALUE list with later entries replacing earlier ones of the same KEY. */
static void env_put(json_t *env, const char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t kl, i;
	json_t *v;

	if (!eq || eq == kv)
		return;
	kl = (size_t)(eq - kv) + 1;
	json_array_foreach(env, i, v) {
		if (strncmp(json_string_value(v), kv, kl) == 0) {
			json_array_set_new(env, i, json_string(kv));
			return;
		}
	}
	json_array_append_new(env, json_string(kv));
}

static json_t *mount_entry(const char *dst, const char *type, const char *src, const char *opts)
{
	json_t *m = json_pack("{s:s, s:s, s:s, s:[]}", "destination", dst, "type", type, "source", src,
			      "options");
	json_t *o = json_object_get(m, "options");
	char buf[256], *save = NULL, *t;

	snprintf(buf, sizeof(buf), "%s", opts);
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_array_append_new(o, json_string(t));
	return m;
}

static json_t *oci_spec(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
			const struct sandbox_paths *p, json_t *image_env)
{
	static const char *const caps[] = {
		/* Docker's default set for root, without NET_RAW (gVisor offers
		 * no raw sockets without --net-raw anyway). */
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
		"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
		"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
	};
	static const char *const masked[] = { "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware" };
	static const char *const ro[] = { "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
					  "/proc/sysrq-trigger" };
	json_t *env = json_array(), *args, *capv = json_array(), *mounts, *spec, *v;
	char hostname[32], netns[128], cgpath[64];
	size_t i;
	int64_t mem = (int64_t)s->memory_mb * 1024 * 1024;

	env_put(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	env_put(env, "HOME=/root");
	env_put(env, "LANG=C.UTF-8");
	json_array_foreach(image_env, i, v)
		if (json_is_string(v))
			env_put(env, json_string_value(v));
	for (const char *const *e = s->env; e && *e; e++)
		env_put(env, *e);
	for (i = 0; i < SBX_ARRAY_LEN(caps); i++)
		json_array_append_new(capv, json_string(caps[i]));
	if (have_init(c))
		args = json_pack("[s,s,s]", INIT_IN_SANDBOX, "--channel", CHAN_IN_SANDBOX "/" CHAN_SOCK_NAME);
	else
		args = json_pack("[s,s]", "/bin/sleep", "infinity");
	snprintf(hostname, sizeof(hostname), "sbx-%.12s", s->id);
	snprintf(netns, sizeof(netns), "/run/netns/sbx-%s", s->id);
	snprintf(cgpath, sizeof(cgpath), "/" CGROUP_PARENT "/%s", s->id);

	mounts = json_array();
	json_array_append_new(mounts, mount_entry("/proc", "proc", "proc", "nosuid,noexec,nodev"));
	json_array_append_new(mounts, mount_entry("/dev", "tmpfs", "tmpfs", "nosuid,strictatime,mode=755,size=65536k"));
	json_array_append_new(mounts, mount_entry("/dev/pts", "devpts", "devpts",
						  "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620"));
	json_array_append_new(mounts, mount_entry("/dev/shm", "tmpfs", "shm", "nosuid,noexec,nodev,mode=1777,size=65536k"));
	json_array_append_new(mounts, mount_entry("/dev/mqueue", "mqueue", "mqueue", "nosuid,noexec,nodev"));
	json_array_append_new(mounts, mount_entry("/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro"));
	json_array_append_new(mounts, mount_entry(CHAN_IN_SANDBOX, "bind", p->chan_dir, "rbind,rw,nosuid,nodev,noexec"));
	if (have_init(c))
		json_array_append_new(mounts, mount_entry(INIT_IN_SANDBOX, "bind", c->init_path, "bind,ro,nosuid,nodev"));

	spec = json_pack(
		"{s:s, s:{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:{s:o, s:o, s:o, s:o}, s:[{s:s, s:i, s:i}, {s:s, s:i, s:i}], s:b},"
		" s:{s:s, s:b}, s:s, s:o,"
		" s:{s:s, s:{s:{s:I, s:I}, s:{s:I, s:I, s:I}, s:{s:I}},"
		"    s:[{s:s}, {s:s}, {s:s}, {s:s}, {s:s, s:s}], s:[], s:[]}}",
		"ociVersion", "1.0.2",
		"process", "terminal", 0, "user", "uid", 0, "gid", 0, "args", args, "env", env, "cwd", "/",
		"capabilities", "bounding", capv, "effective", json_deep_copy(capv), "permitted",
		json_deep_copy(capv), "inheritable", json_array(),
		"rlimits", "type", "RLIMIT_NPROC", "hard", c->nproc_limit, "soft", c->nproc_limit,
		"type", "RLIMIT_NOFILE", "hard", 524288, "soft", 1024,
		"noNewPrivileges", 1,
		"root", "path", p->rootfs, "readonly", 0,
		"hostname", hostname,
		"mounts", mounts,
		"linux", "cgroupsPath", cgpath,
		"resources", "memory", "limit", (json_int_t)mem, "swap", (json_int_t)mem,
		"cpu", "shares", (json_int_t)s->cpu * 1024 / 1000, "quota", (json_int_t)s->cpu * 100,
		"period", (json_int_t)100000,
		"pids", "limit", (json_int_t)c->pids_max,
		"namespaces", "type", "pid", "type", "ipc", "type", "uts", "type", "mount",
		"type", "network", "path", netns,
		"maskedPaths", "readonlyPaths");
	if (!spec)
		return NULL;
	{
		json_t *lx = json_object_get(spec, "linux");
		json_t *mp = json_object_get(lx, "maskedPaths"), *rp = json_object_get(lx, "readonlyPaths");
		for (i = 0; i < SBX_ARRAY_LEN(masked); i++)
			json_array_append_new(mp, json_string(masked[i]));
		for (i = 0; i < SBX_ARRAY_LEN(ro); i++)
			json_array_append_new(rp, json_string(ro[i]));
	}
	return spec;
}

/* ---- the steps ----------------------------------------------------------------- */

/* templates/NAME/current -> DIGESTHEX, resolved once: a later unpack cannot
 * change a running sandbox's lower layer. */
static int template_resolve(const struct sandbox_node_cfg *c, const char *name, char *rootfs,
			    size_t rsz, char *digest, size_t dsz, json_t **env, sbx_err *err)
{
	char link[600], hex[80], ij[700];
	ssize_t r;
	json_t *img;
	json_error_t je;

	*env = NULL;
	if (!template_name_ok(name))
		return sbx_err_set(err, 400, "template", "bad template name '%s'", name ? name : "");
	snprintf(link, sizeof(link), "%s/templates/%s/current", c->state_dir, name);
	r = readlink(link, hex, sizeof(hex) - 1);
	if (r < 0)
		return errno == ENOENT ? sbx_err_set(err, 400, "template", "template '%s' is not on this node", name)
				       : sbx_err_sys(err, "template", "readlink %s", link);
	hex[r] = 0;
	if (r != 64 || strspn(hex, "0123456789abcdef") != 64)
		return sbx_err_set(err, 500, "template", "%s points at '%s', not a digest", link, hex);
	snprintf(rootfs, rsz, "%s/templates/%s/%s/rootfs", c->state_dir, name, hex);
	snprintf(digest, dsz, "sha256:%.64s", hex);
	if (access(rootfs, F_OK) < 0)
		return sbx_err_sys(err, "template", "%s", rootfs);
	snprintf(ij, sizeof(ij), "%s/templates/%s/%s/image.json", c->state_dir, name, hex);
	img = json_load_file(ij, 0, &je);
	if (img) {
		json_t *e = json_object_get(img, "env");
		*env = json_is_array(e) ? json_incref(e) : NULL;
		json_decref(img);
	}
	if (!*env)
		*env = json_array();
	return 0;
}

static int write_intent(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
			const struct sandbox_paths *p, const char *digest, sbx_err *err)
{
	json_t *env = json_array(), *j;
	char path[600];
	int rc;

	for (const char *const *e = s->env; e && *e; e++)
		json_array_append_new(env, json_string(*e));
	j = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:o, s:s, s:I}", "id", s->id, "template", s->template,
		      "template_digest", digest, "cpu", s->cpu, "memory_mb", s->memory_mb, "disk_gb",
		      s->disk_gb, "env", env, "platform", c->platform, "created", (json_int_t)time(NULL));
	if (!j)
		return sbx_err_set(err, 500, "sandbox", "cannot build sandbox.json");
	sub_path(p, "sandbox.json", path, sizeof(path));
	rc = json_dump_file(j, path, JSON_SORT_KEYS | JSON_INDENT(1));
	json_decref(j);
	return rc < 0 ? sbx_err_sys(err, "sandbox", "write %s", path) : 0;
}

static int make_disk(const struct sandbox_spec *s, const struct sandbox_paths *p, sbx_err *err)
{
	cleanup_close int fd = -1;
	cleanup_host_out struct host_out o = { 0 };
	const char *mkfs[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
			       "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0",
			       p->disk_img, NULL };
	char up[600];

	fd = open(p->disk_img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return sbx_err_sys(err, "sandbox", "create %s", p->disk_img);
	if (ftruncate(fd, (off_t)s->disk_gb << 30) < 0)
		return sbx_err_sys(err, "sandbox", "disk image of %d GB", s->disk_gb);
	close(sbx_steal_fd(&fd));
	if (host_run_ok("mkfs.ext4", mkfs, &tool_opts, &o, err) < 0)
		return -1;
	if (mkdir(p->disk_mnt, 0700) < 0)
		return sbx_err_sys(err, "sandbox", "mkdir %s", p->disk_mnt);
	if (loop_mount(p->disk_img, p->disk_mnt, err) < 0)
		return -1;
	snprintf(up, sizeof(up), "%s/upper", p->disk_mnt);
	if (mkdir(up, 0755) < 0)
		return sbx_err_sys(err, "sandbox", "mkdir %s", up);
	snprintf(up, sizeof(up), "%s/work", p->disk_mnt);
	if (mkdir(up, 0700) < 0)
		return sbx_err_sys(err, "sandbox", "mkdir %s", up);
	return 0;
}

static int make_rootfs(const struct sandbox_paths *p, const char *lower, bool with_init, sbx_err *err)
{
	char opts[2048], path[700];
	int n;

	if (mkdir(p->rootfs, 0755) < 0)
		return sbx_err_sys(err, "sandbox", "mkdir %s", p->rootfs);
	n = snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s/upper,workdir=%s/work", lower,
		     p->disk_mnt, p->disk_mnt);
	if (n < 0 || (size_t)n >= sizeof(opts))
		return sbx_err_set(err, 500, "sandbox", "overlay options too long");
	if (mount("overlay", p->rootfs, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
		return sbx_err_sys(err, "sandbox", "mount overlay on %s", p->rootfs);
	/* Mount points of the bundle's binds, made now (in the upper layer) so
	 * the container never has to. */
	snprintf(path, sizeof(path), "%s/run/sbx", p->rootfs);
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, "sandbox", "mkdir %s", path);
	if (with_init) {
		cleanup_close int fd = -1;
		snprintf(path, sizeof(path), "%s/.sbx", p->rootfs);
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return sbx_err_sys(err, "sandbox", "mkdir %s", path);
		snprintf(path, sizeof(path), "%s" INIT_IN_SANDBOX, p->rootfs);
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0555);
		if (fd < 0)
			return sbx_err_sys(err, "sandbox", "create %s", path);
	}
	return 0;
}

static int write_bundle(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
			const struct sandbox_paths *p, json_t *image_env, sbx_err *err)
{
	json_t *spec;
	char path[600];
	int rc;

	if (mkdir(p->bundle, 0700) < 0)
		return sbx_err_sys(err, "sandbox", "mkdir %s", p->bundle);
	if (!(spec = oci_spec(c, s, p, image_env)))
		return sbx_err_set(err, 500, "sandbox", "cannot build config.json");
	snprintf(path, sizeof(path), "%s/config.json", p->bundle);
	rc = json_dump_file(spec, path, JSON_SORT_KEYS | JSON_INDENT(1));
	json_decref(spec);
	return rc < 0 ? sbx_err_sys(err, "sandbox", "write %s", path) : 0;
}

static int runsc_start(const struct sandbox_node_cfg *c, const struct sandbox_spec *s,
		       const struct sandbox_paths *p, long long deadline, sbx_err *err)
{
	char logflag[700], pidfile[600], console[600], tail[HOST_TAIL_MAX], bundleflag[600], pidflag[700];
	const char *argv[24];
	cleanup_close int cfd = -1;
	cleanup_host_out struct host_out o = { 0 };
	struct host_run_opts ro = HOST_RUN_OPTS("sandbox");
	long long left = deadline - sbx_now_ms();

	snprintf(logflag, sizeof(logflag), "--log=%s/runsc.log", p->dir);
	sub_path(p, "sandbox.pid", pidfile, sizeof(pidfile));
	snprintf(pidflag, sizeof(pidflag), "--pid-file=%s", pidfile);
	snprintf(bundleflag, sizeof(bundleflag), "--bundle=%s", p->bundle);
	sub_path(p, "console.log", console, sizeof(console));
	/* The detached sandbox keeps runsc's stdio as PID 1's: an append-only
	 * file (a pipe would fill, a non-append file gets overwritten). */
	cfd = open(console, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (cfd < 0)
		return sbx_err_sys(err, "sandbox", "create %s", console);
	ro.launcher = true;
	ro.out_fd = cfd;
	ro.timeout_ms = left > 1000 ? (int)left : 1000;
	runsc_argv(c, p, argv, SBX_ARRAY_LEN(argv), logflag, sizeof(logflag), "run", "--detach",
		   bundleflag, pidflag, s->id, NULL);
	if (host_run(argv, &ro, &o, err) < 0) {
		host_file_tail(console, tail, sizeof(tail));
		return sbx_err_ctx(err, "runsc run (%s)", tail);
	}
	if (o.status != 0) {
		host_file_tail(console, tail, sizeof(tail));
		if (!tail[0]) {
			snprintf(logflag, sizeof(logflag), "%s/runsc.log", p->dir);
			host_file_tail(logflag, tail, sizeof(tail));
		}
		return sbx_err_set(err, 500, "sandbox", "runsc run exited %d: %s", o.status, tail);
	}
	return 0;
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Connects to the channel socket and checks sbx-init's HELLO. */
static int chan_connect_once(const char *sock, int timeout_ms, int *out, sbx_err *err)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	cleanup_close int fd = -1;
	uint8_t buf[64];
	size_t got = 0;
	long deadline = sbx_now_ms() + timeout_ms;
	uint32_t ver;

	if (strlen(sock) >= sizeof(a.sun_path))
		return sbx_err_set(err, 500, "sandbox", "channel path too long: %s", sock);
	memcpy(a.sun_path, sock, strlen(sock) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sbx_err_sys(err, "sandbox", "socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		return sbx_err_sys(err, "sandbox", "connect %s", sock);
	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		long left = deadline - sbx_now_ms();
		ssize_t r;

		if (left <= 0)
			return sbx_err_set(err, 500, "sandbox", "no HELLO from sbx-init");
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		r = read(fd, buf + got, SBX_FRAME_HDR + 4 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return sbx_err_set(err, 500, "sandbox", "channel closed before HELLO");
		got += (size_t)r;
		/* HELLO is one fixed frame: len 9, type, stream 0, u32 version
		 * (frame.h). Anything else first is a protocol error. */
		if (got < SBX_FRAME_HDR + 4)
			continue;
		if (rd32(buf) != 9 || buf[4] != SBX_F_HELLO || rd32(buf + 5) != 0)
			return sbx_err_set(err, 500, "sandbox", "first frame from sbx-init is not HELLO");
		if ((ver = rd32(buf + 9)) != SBX_FRAME_VERSION)
			return sbx_err_set(err, 500, "sandbox", "sbx-init speaks version %u, not %u", ver,
					   SBX_FRAME_VERSION);
		if (got != SBX_FRAME_HDR + 4)
			return sbx_err_set(err, 500, "sandbox", "bytes after HELLO before any request");
		*out = sbx_steal_fd(&fd);
		return 0;
	}
}

int sandbox_connect(const struct sandbox_node_cfg *c, const char *id, int timeout_ms, int *fd,
		    sbx_err *err)
{
	struct sandbox_paths p;
	long deadline;
	pid_t pid;

	if (check_cfg(c, id, err) < 0)
		return -1;
	if (!have_init(c))
		return sbx_err_set(err, 500, "no_init", "sandboxes run without sbx-init (init_path is empty)");
	sandbox_paths(c, id, &p);
	deadline = sbx_now_ms() + (timeout_ms > 0 ? timeout_ms : 5000);
	for (;;) {
		long left = deadline - sbx_now_ms();
		if (chan_connect_once(p.chan_sock, left > 0 ? (int)left : 1, fd, err) == 0)
			return 0;
		pid = read_pidfile(&p);
		if (pid > 0 && !sentry_alive(pid, id))
			return sbx_err_set(err, 500, "sandbox", "sandbox died before sbx-init answered");
		if (sbx_now_ms() >= deadline)
			return sbx_err_ctx(err, "sbx-init not up within %d ms", timeout_ms);
		host_sleep_ms(5);
	}
}

/* ---- teardown ------------------------------------------------------------------ */

/* Live (non-zombie) runsc processes of this sandbox, found in /proc by their
 * command line (the sentry ends with the id; sentry and gofer name the
 * sandbox's directory in --bundle/--log); with kill_them, SIGKILL each. */
static int sandbox_procs(const struct sandbox_paths *p, const char *id, bool kill_them)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char marker[600];
	int n = 0;

	if (!d)
		return 0;
	snprintf(marker, sizeof(marker), "%s/", p->dir);
	while ((e = readdir(d))) {
		char path[64], buf[8192], st[512];
		cleanup_close int fd = -1;
		ssize_t r;
		const char *rp;
		bool mine = false;
		pid_t pid = (pid_t)atoi(e->d_name);

		if (pid <= 0 || pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		r = read(fd, buf, sizeof(buf) - 1);
		if (r <= 0)
			continue;
		buf[r] = 0;
		if (!strstr(buf, "runsc"))
			continue;
		for (ssize_t i = 0; i < r; i += (ssize_t)strlen(buf + i) + 1)
			if (strstr(buf + i, marker) || (i > 0 && strcmp(buf + i, id) == 0))
				mine = true;
		if (!mine)
			continue;
		close(sbx_steal_fd(&fd));
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		if ((r = read(fd, st, sizeof(st) - 1)) <= 0)
			continue;
		st[r] = 0;
		if ((rp = strrchr(st, ')')) && (rp[2] == 'Z' || rp[2] == 'X')) {
			waitpid(pid, NULL, WNOHANG); /* ours when we are its subreaper */
			continue;
		}
		n++;
		if (kill_them)
			kill(pid, SIGKILL);
	}
	closedir(d);
	return n;
}

static int runsc_remove(const struct sandbox_node_cfg *c, const struct sandbox_paths *p, const char *id,
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
	if (known || rc < 0) {
		runsc_argv(c, p, argv, SBX_ARRAY_LEN(argv), NULL, 0, "delete", "-force", id, NULL);
		if (host_run(argv, &ro, &o, &e2) < 0)
			log_warnx("sandbox %s: runsc delete: %s", id, e2.msg);
	}
	/* Whatever runsc thinks: no process of the sandbox may outlive this
	 * (a start killed between fork and pidfile, runsc's state lost). */
	for (int i = 0; i < 300 && (left = sandbox_procs(p, id, i > 0)) > 0; i++) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		host_sleep_ms(10);
	}
	if (left > 0)
		return sbx_err_set(err, 500, "sandbox", "%d runsc process(es) survive SIGKILL", left);
	if (known && runsc_has(c, id, &e2, &rc)) {
		/* the processes are gone: this only drops runsc's record */
		o.status = 0;
		host_out_free(&o);
		if (host_run(argv, &ro, &o, err) < 0 || runsc_has(c, id, err, &rc)) {
			char tail[HOST_TAIL_MAX];
			host_tail(o.errs, tail, sizeof(tail));
			return sbx_err_set(err, 500, "sandbox", "runsc delete exited %d: %s", o.status, tail);
		}
	}
	return 0;
}

static int teardown(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	struct sandbox_paths p;
	sbx_err e2 = SBX_ERR_INIT;
	int rc = 0;

	sandbox_paths(c, id, &p);
	/* reverse order of start: container, rootfs/disk mounts, loop, network,
	 * cgroups, directory. Keep going after a failure so the most goes. */
	if (runsc_remove(c, &p, id, err) < 0) {
		/* A live container must not lose its disk under it. */
		return sbx_err_ctx(err, "destroy %s", id);
	}
	if (umount_all(p.dir, &e2) < 0 && rc == 0) {
		*err = e2;
		rc = -1;
	}
	if (loops_free(p.dir, &e2) < 0 && rc == 0) {
		*err = e2;
		rc = -1;
	}
	if (net_sandbox_destroy(c->net, id, &e2) < 0 && rc == 0) {
		*err = e2;
		rc = -1;
	}
	cgroups_remove(id);
	if (rc == 0 && rm_sandbox_dir(c, id, &e2) < 0) {
		*err = e2;
		rc = -1;
	}
	return rc < 0 ? sbx_err_ctx(err, "destroy %s", id) : 0;
}

int sandbox_destroy(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
{
	if (check_cfg(c, id, err) < 0)
		return -1;
	return teardown(c, id, err);
}

/* ---- start ---------------------------------------------------------------------- */

int sandbox_start(const struct sandbox_node_cfg *c, const struct sandbox_spec *s, sbx_err *err)
{
	struct sandbox_paths p;
	char lower[600], digest[80], dir[600];
	json_t *image_env = NULL;
	struct net_sandbox ns;
	const char *step = "";
	long long deadline = sbx_now_ms() + (c->start_timeout_ms > 0 ? c->start_timeout_ms : DEFAULT_START_TIMEOUT_MS);
	struct stat st;

	if (check_cfg(c, s->id, err) < 0)
		return -1;
	if (s->memory_mb < 16 || s->disk_gb < 1 || s->cpu < 1 || s->cpu > 64000)
		return sbx_err_set(err, 400, "sandbox", "bad specs (memory %d MB, disk %d GB, cpu %d)",
				   s->memory_mb, s->disk_gb, s->cpu);
	if (have_init(c) && (stat(c->init_path, &st) < 0 || !S_ISREG(st.st_mode)))
		return sbx_err_sys(err, "sandbox_config", "init_path %s", c->init_path);
	if (template_resolve(c, s->template, lower, sizeof(lower), digest, sizeof(digest), &image_env, err) < 0)
		return -1;
	if (!path_ok(lower)) {
		json_decref(image_env);
		return sbx_err_set(err, 500, "template", "odd template path %s", lower);
	}
	/* Sentries become our children when runsc detaches (sandbox.h). */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
	sandbox_paths(c, s->id, &p);
	snprintf(dir, sizeof(dir), "%s/sandboxes", c->state_dir);
	mkdir(c->state_dir, 0700);
	mkdir(dir, 0700);
	mkdir(p.runsc_root, 0700);
	if (mkdir(p.dir, 0700) < 0) {
		json_decref(image_env);
		if (errno == EEXIST)
			return sbx_err_set(err, 409, "sandbox", "sandbox %s already exists on this node", s->id);
		return sbx_err_sys(err, "sandbox", "mkdir %s", p.dir);
	}

	step = "intent";
	if (write_intent(c, s, &p, digest, err) < 0)
		goto fail;
	step = "disk";
	if (make_disk(s, &p, err) < 0)
		goto fail;
	step = "rootfs";
	if (make_rootfs(&p, lower, have_init(c), err) < 0)
		goto fail;
	step = "channel";
	if (mkdir(p.chan_dir, 0700) < 0) {
		sbx_err_sys(err, "sandbox", "mkdir %s", p.chan_dir);
		goto fail;
	}
	step = "network";
	if (net_sandbox_create(c->net, s->id, &ns, err) < 0)
		goto fail;
	step = "bundle";
	if (write_bundle(c, s, &p, image_env, err) < 0)
		goto fail;
	step = "runsc";
	if (runsc_start(c, s, &p, deadline, err) < 0)
		goto fail;
	step = "sbx-init";
	if (have_init(c)) {
		int fd, left = (int)(deadline - sbx_now_ms());
		if (sandbox_connect(c, s->id, left > 100 ? left : 100, &fd, err) < 0)
			goto fail;
		close(fd);
	} else {
		char why[200];
		if (sandbox_alive(c, s->id, why, sizeof(why)) != 1) {
			sbx_err_set(err, 500, "sandbox", "sandbox not running after start: %s", why);
			goto fail;
		}
	}
	json_decref(image_env);
	return 0;

fail:
	json_decref(image_env);
	{
		sbx_err e2 = SBX_ERR_INIT;
		sbx_err_ctx(err, "start %s: step %s", s->id, step);
		if (teardown(c, s->id, &e2) < 0)
			log_warnx("sandbox %s: undo after failed start: %s", s->id, e2.msg);
	}
	return -1;
}

long sandbox_oom_kills(const char *id)
{
	return id_ok(id) ? oom_kills(id) : -1;
}

/* ---- alive and list ----------------------------------------------------------------- */

int sandbox_alive(const struct sandbox_node_cfg *c, const char *id, char *why, size_t whysz)
{
	struct sandbox_paths p;
	sbx_err err = SBX_ERR_INIT;
	pid_t pid;
	long ooms;

	if (whysz)
		why[0] = 0;
	if (check_cfg(c, id, &err) < 0) {
		snprintf(why, whysz, "%s", err.msg);
		return -1;
	}
	sandbox_paths(c, id, &p);
	pid = read_pidfile(&p);
	if (pid <= 0) {
		if (access(p.dir, F_OK) < 0) {
			snprintf(why, whysz, "no such sandbox on this node");
			return 0;
		}
		snprintf(why, whysz, "no sentry pid recorded");
		return -1;
	}
	if (sentry_alive(pid, id))
		return 1;
	ooms = oom_kills(id);
	if (ooms > 0)
		snprintf(why, whysz, "killed: out of memory (memory limit reached, %ld oom kill%s)", ooms,
			 ooms == 1 ? "" : "s");
	else
		snprintf(why, whysz, "sandbox process %d exited", (int)pid);
	return 0;
}

struct idset {
	char **v;
	size_t n;
};

static void idset_add(struct idset *s, const char *id, size_t len)
{
	char buf[SBX_ID_LEN + 1], **nv;

	if (len != SBX_ID_LEN)
		return;
	memcpy(buf, id, SBX_ID_LEN);
	buf[SBX_ID_LEN] = 0;
	if (!id_ok(buf))
		return;
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], buf) == 0)
			return;
	if (!(nv = realloc(s->v, (s->n + 1) * sizeof(char *))))
		return;
	s->v = nv;
	if ((s->v[s->n] = strdup(buf)))
		s->n++;
}

/* "PREFIX/<id>" or "PREFIX/<id>/..." */
static void idset_under(struct idset *s, const char *path, const char *prefix)
{
	size_t pl = strlen(prefix);

	if (strncmp(path, prefix, pl) == 0 && path[pl] == '/') {
		const char *id = path + pl + 1;
		size_t len = strcspn(id, "/");
		idset_add(s, id, len);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void sandbox_list_free(char **ids, size_t n)
{
	host_strv_free(ids, n);
}

int sandbox_list(const struct sandbox_node_cfg *c, char ***ids, size_t *n, sbx_err *err)
{
	struct idset s = { NULL, 0 };
	char sbdir[512], **v;
	size_t vn;
	int *devs;
	DIR *d;
	struct dirent *e;

	*ids = NULL;
	*n = 0;
	if (!path_ok(c->state_dir))
		return sbx_err_set(err, 500, "sandbox_config", "state_dir must be a plain absolute path");
	snprintf(sbdir, sizeof(sbdir), "%s/sandboxes", c->state_dir);
	/* 1. directories */
	if ((d = opendir(sbdir))) {
		while ((e = readdir(d)))
			idset_add(&s, e->d_name, strlen(e->d_name));
		closedir(d);
	}
	/* 2. runsc's containers */
	if (runsc_ids(c, &v, &vn, err) < 0)
		goto fail;
	for (size_t i = 0; i < vn; i++)
		idset_add(&s, v[i], strlen(v[i]));
	host_strv_free(v, vn);
	/* 3. mounts */
	if (mounts_under(sbdir, &v, &vn) < 0) {
		sbx_err_sys(err, "sandbox", "read mountinfo");
		goto fail;
	}
	for (size_t i = 0; i < vn; i++)
		idset_under(&s, v[i], sbdir);
	host_strv_free(v, vn);
	/* 4. loop devices */
	if (loops_under(sbdir, &devs, &v, &vn) == 0) {
		for (size_t i = 0; i < vn; i++)
			idset_under(&s, v[i], sbdir);
		free(devs);
		host_strv_free(v, vn);
	}
	/* Not net_list: network namespaces are named globally (/run/netns), so
	 * it also sees other node instances' sandboxes (tests, a second stack)
	 * and a reaper would tear down their network. The directory is made
	 * before the network and removed only after it, so every network
	 * leftover of ours has its directory here. */
	if (s.n) /* qsort(NULL, 0, ...) is undefined */
		qsort(s.v, s.n, sizeof(char *), cmp_str);
	*ids = s.v;
	*n = s.n;
	return 0;
fail:
	host_strv_free(s.v, s.n);
	return -1;
}
