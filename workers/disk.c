/* A sandbox's disk and mounts on the host (disk.h): the sparse ext4 image
 * on a loop device, the overlay root on it, and finding and removing all of
 * it again by looking (mountinfo, /sys/block), never by a record. */
#include "config.h"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <linux/major.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "disk.h"
#include "err.h"
#include "host.h"
#include "oci.h"

static const struct host_run_opts tool_opts = HOST_RUN_OPTS("sandbox");

/* ---- loop devices and mounts --------------------------------------------- */

/* Attaches img to a free loop device with autoclear (it detaches itself when
 * the last user, the mount, goes) and mounts it at mnt. */
int disk_loop_mount(const char *img, const char *mnt, sbx_err *err)
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
int disk_mounts_under(const char *dir, char ***out, size_t *n)
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

static bool loop_under(int num, const char *dir, size_t dl, char *bf);

/* The loop device a mount (st: its root) stands on whose image is under
 * dir (the sandbox's disk, not a volume), for disk_loops_free; two such:
 * none known (-2 until the caller's end, then -1), so that it scans. */
static void loop_note(int *loop, const struct stat *st, const char *dir)
{
	char bf[PATH_MAX + 1];

	if (loop && *loop != -2 && major(st->st_dev) == LOOP_MAJOR &&
	    loop_under((int)minor(st->st_dev), dir, strlen(dir), bf))
		*loop = *loop == -1 || *loop == (int)minor(st->st_dev) ? (int)minor(st->st_dev) : -2;
}

/* Unmounts everything at or below dir. A busy mount is detached lazily (the
 * container is gone by then; what holds it is a namespace on its way out). */
int disk_umount_all(const char *dir, int *loop, sbx_err *err)
{
	if (loop)
		*loop = -1;
	/* mountinfo lists every mount of the node (a few a sandbox): read once
	 * when every umount works, and again only after a busy one */
	for (int pass = 0; pass < 3; pass++) {
		char **m;
		size_t n;
		bool busy = false;

		if (disk_mounts_under(dir, &m, &n) < 0)
			return sbx_err_sys(err, "sandbox", "read /proc/self/mountinfo");
		if (n == 0) {
			free(m);
			return 0;
		}
		for (size_t i = 0; i < n; i++) {
			struct stat st;
			if (loop && m[i] && stat(m[i], &st) == 0)
				loop_note(loop, &st, dir);
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
		if (loop && *loop == -2)
			*loop = -1;
		if (!busy)
			return 0;
		host_sleep_ms(100);
	}
	return 0;
}

/* The mounts a start makes under a sandbox's directory, the last made
 * first (the overlay's upper layer lives on disk). Reading mountinfo cost
 * each destroy O(mounts of the node): 11 % of the CPU of a thousand
 * destroys, the kernel writing every overlay's options. */
static const char *const start_mounts[] = { "rootfs", "volume", "disk" };

int disk_umount_known(const char *dir, int *loop)
{
	if (loop)
		*loop = -1;
	for (size_t i = 0; i < sizeof(start_mounts) / sizeof(start_mounts[0]); i++) {
		char path[PATH_MAX];
		struct stat st;

		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, start_mounts[i]) >= sizeof(path))
			return 1;
		/* mounted more than once: each goes */
		for (int k = 0; k < 8; k++) {
			if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
				break;
			loop_note(loop, &st, dir);
			if (umount2(path, UMOUNT_NOFOLLOW) == 0)
				continue;
			if (errno == EINVAL || errno == ENOENT)
				break; /* not a mount point (any more) */
			return 1;
		}
	}
	if (loop && *loop == -2)
		*loop = -1;
	return 0;
}

/* Loop devices whose backing file is under dir (the kernel keeps the path it
 * was given; " (deleted)" when the file is gone). */
/* Is /dev/loopNUM backed by a file under dir? Its backing file then goes
 * to bf (PATH_MAX + 1 bytes). */
static bool loop_under(int num, const char *dir, size_t dl, char *bf)
{
	char p[300];
	cleanup_close int fd = -1;
	ssize_t r;

	snprintf(p, sizeof(p), "/sys/block/loop%d/loop/backing_file", num);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	if ((r = read(fd, bf, PATH_MAX)) <= 0)
		return false;
	bf[r] = 0;
	bf[strcspn(bf, "\n")] = 0;
	return strncmp(bf, dir, dl) == 0 && (bf[dl] == '/' || bf[dl] == 0);
}

int disk_loops_under(const char *dir, int **devs, char ***files, size_t *n)
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
		char bf[PATH_MAX + 1];
		int num;

		if (sscanf(e->d_name, "loop%d", &num) != 1 || !loop_under(num, dir, dl, bf))
			continue;
		{
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
int disk_loops_free(const char *dir, int known, sbx_err *err)
{
	long long t0 = sbx_now_ms();
	int *devs = NULL;
	size_t n = 0, dl = strlen(dir);
	bool scan = known < 0;

	if (!scan) {
		/* the one its mount stood on (disk_umount_all): watched alone,
		 * and free means done, without a scan of every device */
		if (!(devs = malloc(sizeof(*devs))))
			return sbx_err_set(err, 500, "sandbox", "out of memory");
		devs[0] = known;
		n = 1;
	}

	/* up to 10 s: the last user can be a sentry's mount namespace that
	 * the kernel releases only after its (orphaned) zombie is reaped;
	 * usually a few ms after the sentry's end, so the first looks are
	 * close together (a 100 ms step cost each destroy ~100 ms). A scan
	 * reads every loop device of the node (one a sandbox): between two,
	 * only the devices the last one found are looked at, and the end is
	 * a scan that finds none. */
	for (;;) {
		long long waited = sbx_now_ms() - t0;
		char bf[PATH_MAX + 1];

		if (scan) {
			char **files;
			free(devs);
			if (disk_loops_under(dir, &devs, &files, &n) < 0)
				return sbx_err_sys(err, "sandbox", "list /sys/block");
			host_strv_free(files, n);
			if (n == 0)
				break;
		} else {
			size_t k = 0;
			for (size_t i = 0; i < n; i++)
				if (loop_under(devs[i], dir, dl, bf))
					devs[k++] = devs[i];
			n = k;
		}
		if (n == 0 && known >= 0)
			break;
		scan = n == 0; /* the ones found are free: prove it with a scan */
		for (size_t i = 0; i < n && waited >= 5000; i++) {
			char dev[64];
			int fd;
			snprintf(dev, sizeof(dev), "/dev/loop%d", devs[i]);
			if ((fd = open(dev, O_RDWR | O_CLOEXEC)) >= 0) {
				ioctl(fd, LOOP_CLR_FD, 0);
				close(fd);
			}
		}
		if (n == 0)
			continue;
		if (waited >= 10000) {
			free(devs);
			return sbx_err_set(err, 500, "sandbox", "a loop device of %s stays attached", dir);
		}
		/* a dying sandbox's mount namespace may still hold the mount */
		host_sleep_ms(waited < 100 ? 2 : waited < 1000 ? 20 : 100);
	}
	free(devs);
	return 0;
}

/* ---- removing the directory, never leaving it ---------------------------- */

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

int disk_rm_sandbox_dir(const struct sandbox_node_cfg *c, const char *id, sbx_err *err)
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

/* ---- making the disk and the root ---------------------------------------- */

/* A sandbox's disk is a copy of a ready, empty ext4 image of its size, made
 * once per node and size under state_dir/disk-templates: a copy of its
 * ~1-5 MB of data (the rest is holes) takes well under a ms where running
 * mkfs.ext4 took ~3.5 ms of each cold create. The copies share the image's
 * UUID and directory hash seed (random per node and size), as disks cloned
 * from one image do; nothing keys on them (the sandbox sees gVisor's view
 * of its files, the host mounts by path). The name carries the options'
 * version: new options, new images. */
#define DISK_TMPL_VERSION 1

/* What a start killed while it made an image left (a minute old: none is
 * still being made, mkfs takes ms). */
static void tmpl_clean(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;

	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l > 4 && !strcmp(e->d_name + l - 4, ".tmp") &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_mtime < time(NULL) - 60)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

int disk_image_make(const char *tmp, const char *path, int gb, const char *kind, sbx_err *err)
{
	const char *mkfs[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal",
			       "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0",
			       tmp, NULL };
	const struct host_run_opts ro = HOST_RUN_OPTS(kind);
	cleanup_host_out struct host_out o = { 0 };
	cleanup_close int fd = -1;

	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return sbx_err_sys(err, kind, "create %s", tmp);
	if (ftruncate(fd, (off_t)gb << 30) < 0) {
		sbx_err_sys(err, kind, "disk image of %d GB", gb);
		goto fail;
	}
	if (host_run_ok("mkfs.ext4", mkfs, &ro, &o, err) < 0)
		goto fail;
	/* on disk before its name says it is whole */
	if (fsync(fd) < 0 || rename(tmp, path) < 0) {
		sbx_err_sys(err, kind, "keep %s", path);
		goto fail;
	}
	return 0;
fail:
	unlink(tmp);
	return -1;
}

static int disk_template(const struct sandbox_node_cfg *c, int gb, char *out, size_t outsz, sbx_err *err)
{
	char dir[400], tmp[480];

	snprintf(dir, sizeof(dir), "%.300s/disk-templates", c->state_dir);
	snprintf(out, outsz, "%s/ext4-v%d-%dg.img", dir, DISK_TMPL_VERSION, gb);
	if (access(out, R_OK) == 0)
		return 0;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, "sandbox", "mkdir %s", dir);
	tmpl_clean(dir);
	/* two starts may make it at once: each its own, the last rename wins */
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", out, (int)getpid());
	return disk_image_make(tmp, out, gb, "sandbox", err);
}

/* Copies what of in is data (SEEK_DATA/SEEK_HOLE) to out, holes left as
 * holes, and gives out in's size. */
static int copy_sparse(int in, int out, off_t size, sbx_err *err)
{
	off_t pos = 0;

	while (pos < size) {
		off_t data = lseek(in, pos, SEEK_DATA), hole;
		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0 || (hole = lseek(in, data, SEEK_HOLE)) < 0)
			return sbx_err_sys(err, "sandbox", "disk template: seek");
		for (off_t o = data; data < hole;) {
			ssize_t n = copy_file_range(in, &data, out, &o, (size_t)(hole - data), 0);
			if (n <= 0)
				return sbx_err_sys(err, "sandbox", "disk template: copy");
		}
		pos = hole;
	}
	if (ftruncate(out, size) < 0)
		return sbx_err_sys(err, "sandbox", "disk image of %lld bytes", (long long)size);
	return 0;
}

int disk_make(const struct sandbox_node_cfg *c, const struct sandbox_spec *s, const struct sandbox_paths *p,
	      sbx_err *err)
{
	cleanup_close int fd = -1, in = -1;
	char up[600], tmpl[480];

	if (disk_template(c, s->disk_gb, tmpl, sizeof(tmpl), err) < 0)
		return -1;
	in = open(tmpl, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return sbx_err_sys(err, "sandbox", "open %s", tmpl);
	fd = open(p->disk_img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return sbx_err_sys(err, "sandbox", "create %s", p->disk_img);
	if (copy_sparse(in, fd, (off_t)s->disk_gb << 30, err) < 0)
		return -1;
	close(sbx_steal_fd(&fd));
	if (mkdir(p->disk_mnt, 0700) < 0)
		return sbx_err_sys(err, "sandbox", "mkdir %s", p->disk_mnt);
	if (disk_loop_mount(p->disk_img, p->disk_mnt, err) < 0)
		return -1;
	snprintf(up, sizeof(up), "%s/upper", p->disk_mnt);
	if (mkdir(up, 0755) < 0)
		return sbx_err_sys(err, "sandbox", "mkdir %s", up);
	snprintf(up, sizeof(up), "%s/work", p->disk_mnt);
	if (mkdir(up, 0700) < 0)
		return sbx_err_sys(err, "sandbox", "mkdir %s", up);
	return 0;
}

int disk_make_rootfs(const struct sandbox_paths *p, const char *lower, bool with_init, sbx_err *err)
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

int disk_fill_tmp(const struct sandbox_paths *p, sbx_err *err)
{
	char from[600];
	cleanup_host_out struct host_out o = { 0 };
	const char *argv[] = { "cp", "-a", "--one-file-system", from, p->tmp_dir, NULL };
	struct stat st;

	snprintf(from, sizeof(from), "%s/tmp", p->rootfs);
	/* the image's, never followed out of it (a symlink to a host path
	 * would copy the host's files in) */
	if (lstat(from, &st) < 0)
		return errno == ENOENT ? 0 : sbx_err_sys(err, "sandbox", "lstat %s", from);
	if (!S_ISDIR(st.st_mode))
		return 0;
	snprintf(from, sizeof(from), "%s/tmp/.", p->rootfs);
	return host_run_ok("copying the snapshot's /tmp", argv, &tool_opts, &o, err);
}
