/* Disk pressure on a node (issue 15): the state directory's filesystem
 * holds every sandbox's disk image, the volumes, the unpacked templates and
 * the snapshot layers restores stand on. Two floors, settings
 * node_disk_min_free_pct and node_disk_min_free_gb, measured with statvfs:
 *  - below either, the node refuses new work (create, volume create,
 *    snapshot) with the reason, before the disk fills; what runs goes on;
 *  - below twice either, each pass frees what no sandbox on this node
 *    stands on: template versions other than `current` and snapshot layers
 *    pulled for restores (state_dir/snapshots/images), least recently used
 *    first, until the disk is above twice the floors again.
 * "Used" is read from the sandboxes' own directories (sandbox.json: the
 * template version, or the snapshot image whose image.json names every
 * lower directory of its chain), so warm pool members, paused sandboxes and
 * sandboxes adopted after a restart count. A pass removes nothing while a
 * start is in flight (it may be resolving an image this very moment) or
 * when any sandbox's directory cannot be read; templates only under the
 * lock templates/unpack takes. What is used has its time set at each pass
 * (every reaper_interval, pressure or not), so the times order the rest by
 * last use. */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include "cleanup.h"
#include "json.h"
#include "host.h"
#include "log.h"
#include "node_int.h"

#define GB (1024.0 * 1024.0 * 1024.0)
#define MAX_ITEMS 4096

struct item {
	char path[700];
	long long mtime;
	bool used, tmpl;
};

struct items {
	struct item v[MAX_ITEMS];
	int n;
};

/* free and total bytes of the state directory's filesystem; 1 when below a
 * floor times mul (why says which), 0 above, -1 unreadable */
static int below(struct node *n, int mul, char *why, size_t whysz)
{
	struct statvfs vs;
	double avail, total;
	long long pct = sbx_cfg_int(n->cfg, "node_disk_min_free_pct"), gb = sbx_cfg_int(n->cfg, "node_disk_min_free_gb");

	if (statvfs(n->sc.state_dir, &vs) < 0)
		return -1;
	avail = (double)vs.f_bavail * (double)vs.f_frsize;
	total = (double)vs.f_blocks * (double)vs.f_frsize;
	if (pct > 0 && avail * 100.0 < total * (double)(pct * mul)) {
		snprintf(why, whysz,
			 "no capacity: the node's disk is nearly full (%.1f GB free, %.1f%% of %.0f GB; it keeps %lld%% "
			 "free)",
			 avail / GB, total > 0 ? 100.0 * avail / total : 0.0, total / GB, pct);
		return 1;
	}
	if (gb > 0 && avail < (double)(gb * mul) * GB) {
		snprintf(why, whysz, "no capacity: the node's disk is nearly full (%.1f GB free; it keeps %lld GB free)",
			 avail / GB, gb);
		return 1;
	}
	return 0;
}

int node_disk_admit(struct node *n, char *why, size_t whysz)
{
	/* a filesystem statvfs cannot read is not refused for that: the
	 * admission of disk sizes reads it too and says so */
	return below(n, 1, why, whysz) > 0 ? -1 : 0;
}

/* "DIR/x" -> "DIR" in place */
static void parent(char *p)
{
	char *s = strrchr(p, '/');

	if (s && s != p)
		*s = 0;
}

static void mark(struct items *it, const char *path)
{
	for (int i = 0; i < it->n; i++)
		if (!strcmp(it->v[i].path, path))
			it->v[i].used = true;
}

static void add(struct items *it, const char *path, bool tmpl)
{
	struct stat st;

	if (it->n >= MAX_ITEMS || lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return;
	snprintf(it->v[it->n].path, sizeof(it->v[it->n].path), "%s", path);
	it->v[it->n].mtime = (long long)st.st_mtime;
	it->v[it->n].tmpl = tmpl;
	it->v[it->n].used = false;
	it->n++;
}

static bool hex_name(const char *s, size_t len)
{
	return strlen(s) == len && strspn(s, "0123456789abcdef") == len;
}

/* Every template version but `current` (a name without one is left whole)
 * and every snapshot layer directory. */
static void list_items(struct node *n, struct items *it)
{
	char dir[600], path[1300], cur[80];
	DIR *d, *d2;
	struct dirent *e, *e2;

	snprintf(dir, sizeof(dir), "%s/templates", n->sc.state_dir);
	if ((d = opendir(dir))) {
		while ((e = readdir(d))) {
			ssize_t l;
			if (e->d_name[0] == '.' || !template_name_ok(e->d_name))
				continue;
			snprintf(path, sizeof(path), "%s/%s/current", dir, e->d_name);
			if ((l = readlink(path, cur, sizeof(cur) - 1)) < 0)
				continue;
			cur[l] = 0;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			if (!(d2 = opendir(path)))
				continue;
			while ((e2 = readdir(d2))) {
				char v[1600];
				if (!hex_name(e2->d_name, 64) || !strcmp(e2->d_name, cur))
					continue;
				snprintf(v, sizeof(v), "%s/%s", path, e2->d_name);
				add(it, v, true);
			}
			closedir(d2);
		}
		closedir(d);
	}
	snprintf(dir, sizeof(dir), "%s/snapshots/images", n->sc.state_dir);
	if ((d = opendir(dir))) {
		while ((e = readdir(d))) {
			if (!hex_name(e->d_name, SBX_ID_LEN))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			add(it, path, false);
		}
		closedir(d);
	}
}

/* What a sandbox's directory stands on: the paths it marks. */
struct stands {
	char name[NAME_MAX + 1]; /* the directory's name (a placement id) */
	char **paths;
	size_t n;
};

static int stands_add(struct stands *st, const char *path)
{
	char **v = realloc(st->paths, (st->n + 1) * sizeof(*v));

	if (!v)
		return -1;
	st->paths = v;
	if (!(v[st->n] = strdup(path)))
		return -1;
	st->n++;
	return 0;
}

static void stands_free(struct stands *st)
{
	host_strv_free(st->paths, st->n);
	st->paths = NULL;
	st->n = 0;
}

/* What the sandbox in directory sbdir stands on, into st; -1 when that
 * cannot be told (then nothing may go). */
static int read_stands(struct node *n, struct stands *st, const char *sbdir)
{
	char path[1300];
	cleanup_json json_t *j = NULL, *img = NULL;
	json_error_t je;
	const char *tmpl = NULL, *digest = NULL, *image = NULL;

	snprintf(path, sizeof(path), "%s/sandbox.json", sbdir);
	if (!(j = json_load_file(path, 0, &je)) ||
	    json_unpack_ex(j, &je, 0, "{s:s, s:s, s?s}", "template", &tmpl, "template_digest", &digest, "image",
			   &image) < 0)
		return -1;
	if (!image) {
		if (strncmp(digest, "sha256:", 7))
			return -1;
		snprintf(path, sizeof(path), "%s/templates/%s/%s", n->sc.state_dir, tmpl, digest + 7);
		return stands_add(st, path);
	}
	/* sbx/snapshots/ID@sha256:...: its layer, and every lower of its chain */
	if (strncmp(image, "sbx/snapshots/", 14) || strlen(image) < 14 + SBX_ID_LEN)
		return -1;
	snprintf(path, sizeof(path), "%s/snapshots/images/%.*s", n->sc.state_dir, SBX_ID_LEN, image + 14);
	if (stands_add(st, path) < 0)
		return -1;
	snprintf(path + strlen(path), sizeof(path) - strlen(path), "/image.json");
	if (!(img = json_load_file(path, 0, &je)) || !json_is_array(json_object_get(img, "lowers")))
		return -1;
	{
		size_t i;
		json_t *v;
		json_array_foreach(json_object_get(img, "lowers"), i, v) {
			if (!json_is_string(v))
				return -1;
			snprintf(path, sizeof(path), "%s", json_string_value(v));
			parent(path); /* .../rootfs, .../layer */
			if (stands_add(st, path) < 0)
				return -1;
		}
	}
	return 0;
}

static int stands_cmp(const void *a, const void *b)
{
	return strcmp(((const struct stands *)a)->name, ((const struct stands *)b)->name);
}

/* What each sandbox directory stands on, read once: sandbox.json is
 * written at the sandbox's intent and never again (sandbox.c write_intent)
 * and a snapshot image's chain does not change, yet each pass read and
 * parsed every sandbox's files again: with a thousand sandboxes that held
 * the loop 100-140 ms a pass (bench/density). Sorted by name; what a pass
 * no longer finds is dropped at its end. A directory that cannot be told
 * yet (its start is writing it) is read again next pass. */
static struct stands *known;
static size_t nknown;

static int mark_used(struct node *n, struct items *it)
{
	char dir[600], path[1300];
	struct stands *next = NULL;
	size_t nnext = 0, cap = 0;
	DIR *d;
	struct dirent *e;
	int r = 0;

	snprintf(dir, sizeof(dir), "%s/sandboxes", n->sc.state_dir);
	if (!(d = opendir(dir)))
		return errno == ENOENT ? 0 : -1;
	while (r == 0 && (e = readdir(d))) {
		struct stands key, *k, st = { { 0 }, NULL, 0 };

		if (e->d_name[0] == '.')
			continue;
		snprintf(key.name, sizeof(key.name), "%s", e->d_name);
		k = nknown ? bsearch(&key, known, nknown, sizeof(*known), stands_cmp) : NULL;
		if (k && k->paths) {
			st = *k;
			k->paths = NULL; /* moved to next */
			k->n = 0;
		} else {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			snprintf(st.name, sizeof(st.name), "%s", e->d_name);
			if (read_stands(n, &st, path) < 0) {
				stands_free(&st);
				r = -1;
				break;
			}
		}
		for (size_t i = 0; i < st.n; i++)
			mark(it, st.paths[i]);
		if (nnext == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct stands *v = realloc(next, ncap * sizeof(*v));
			if (!v) {
				stands_free(&st);
				continue; /* marked; read again next pass */
			}
			next = v;
			cap = ncap;
		}
		next[nnext++] = st;
	}
	closedir(d);
	for (size_t i = 0; i < nknown; i++)
		stands_free(&known[i]);
	free(known);
	if (nnext)
		qsort(next, nnext, sizeof(*next), stands_cmp);
	known = next;
	nknown = nnext;
	return r;
}

static int by_mtime(const void *a, const void *b)
{
	const struct item *x = a, *y = b;

	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* rm -rf of a renamed-away directory in a child of its own: a template's
 * tree takes a while, and the loop does not wait for it (the general reap
 * collects the child). */
static void rm_async(const char *path)
{
	pid_t pid = fork();

	if (pid < 0) {
		log_warn("disk pressure: fork");
		return;
	}
	if (pid == 0) {
		sigset_t none;
		int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execlp("rm", "rm", "-rf", "--one-file-system", "--", path, (char *)NULL);
		_exit(127);
	}
}

/* What a killed agent's removal left (.gc- directories) goes again. */
static void rm_leftovers(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[1300];

	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, ".gc-", 4))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		rm_async(path);
	}
	if (d)
		closedir(d);
}

static void rm_all_leftovers(struct node *n)
{
	char path[700];
	DIR *d;
	struct dirent *e;

	snprintf(path, sizeof(path), "%s/templates", n->sc.state_dir);
	d = opendir(path);
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && template_name_ok(e->d_name)) {
			char t[1300];
			snprintf(t, sizeof(t), "%s/%s", path, e->d_name);
			rm_leftovers(t);
		}
	if (d)
		closedir(d);
	snprintf(path, sizeof(path), "%s/snapshots/images", n->sc.state_dir);
	rm_leftovers(path);
}

static int remove_item(const struct item *x)
{
	char gone[1300], dir[700];
	const char *base = strrchr(x->path, '/') + 1;

	snprintf(dir, sizeof(dir), "%s", x->path);
	parent(dir);
	/* out of sight at once (a rename in the same directory), removed later */
	snprintf(gone, sizeof(gone), "%s/.gc-%s", dir, base);
	if (rename(x->path, gone) < 0) {
		log_warn("disk pressure: rename %s", x->path);
		return -1;
	}
	rm_async(gone);
	return 0;
}

void node_disk_pass(struct node *n)
{
	static struct items it; /* large: not on the stack */
	char why[300], path[700];
	cleanup_close int lock = -1;
	bool tmpl_locked = false;
	long long now = (long long)time(NULL);
	int freed = 0;

	static bool swept;

	if (!swept) {
		/* once a life: what a killed agent's removals left */
		swept = true;
		rm_all_leftovers(n);
	}
	int low = below(n, 2, why, sizeof(why)), r;

	it.n = 0;
	list_items(n, &it);
	r = mark_used(n, &it);
	/* every pass, pressure or not: the time of what is used is its last use */
	for (int i = 0; i < it.n; i++)
		if (it.v[i].used) {
			struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = now } };
			utimensat(AT_FDCWD, it.v[i].path, ts, AT_SYMLINK_NOFOLLOW);
		}
	if (low <= 0)
		return;
	if (r < 0) {
		log_warnx("disk pressure: a sandbox's directory could not be read; nothing is freed this pass");
		return;
	}
	for (struct op *o = n->ops; o; o = o->next)
		if (o->kind == OP_START)
			return; /* it may be resolving an image right now: the next pass */
	qsort(it.v, (size_t)it.n, sizeof(it.v[0]), by_mtime);
	/* templates/unpack holds this while it unpacks and moves `current` */
	snprintf(path, sizeof(path), "%s/templates/.lock", n->sc.state_dir);
	lock = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	tmpl_locked = lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0;
	log_warnx("disk pressure: %s; freeing what no sandbox here uses", why + strlen("no capacity: "));
	for (int i = 0; i < it.n; i++) {
		const struct item *x = &it.v[i];
		if (x->used || (x->tmpl && !tmpl_locked))
			continue;
		if (x->tmpl) {
			/* `current` may have moved to it since the listing */
			char cur[700], target[80];
			ssize_t l;
			snprintf(cur, sizeof(cur), "%s", x->path);
			parent(cur);
			snprintf(cur + strlen(cur), sizeof(cur) - strlen(cur), "/current");
			if ((l = readlink(cur, target, sizeof(target) - 1)) < 0)
				continue;
			target[l] = 0;
			if (!strcmp(target, strrchr(x->path, '/') + 1))
				continue;
		}
		if (remove_item(x) < 0)
			continue;
		freed++;
		log_info("disk pressure: removed the unused %s %s", x->tmpl ? "template version" : "snapshot layer",
			 x->path);
		if (below(n, 2, why, sizeof(why)) <= 0)
			break;
	}
	if (!freed)
		log_info("disk pressure: nothing unused to free");
}
