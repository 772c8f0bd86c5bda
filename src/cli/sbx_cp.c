/* `sbx cp`: files and directory trees in (LOCAL ID:PATH) and out (ID:PATH
 * LOCAL). Files move raw through PUT/GET /sandboxes/{id}/files/{path}, one
 * request each, streamed (never whole in memory); a tree's directories are
 * made with one `mkdir -p` exec, modes restored with one `chmod` exec.
 * Symbolic links and special files are skipped with a warning. DST names the
 * copy (like `cp -r SRC DST` when DST does not exist). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "sbx.h"

#define SCRIPT_MAX (64 * 1024) /* one exec's command line */

/* "ID:PATH" → id and path; false for a local path. */
static bool remote_spec(const char *s, char id[25], const char **path)
{
	if (strlen(s) < 25 || s[24] != ':' || strspn(s, "0123456789abcdef") != 24)
		return false;
	memcpy(id, s, 24);
	id[24] = '\0';
	*path = s + 25;
	if (!**path)
		die(EXIT_USAGE, "cp: %s names no path after the id", s);
	return true;
}

static void quote_into(struct buf *b, const char *s)
{
	buf_add(b, "'", 1);
	for (; *s; s++)
		if (*s == '\'')
			buf_add(b, "'\\''", 4);
		else
			buf_add(b, s, 1);
	buf_add(b, "'", 1);
}

/* A short shell script in the sandbox that must exit 0. */
static void remote_sh(const struct cli *c, const char *id, const char *script, const char *what)
{
	char p[96];
	json_t *body = json_pack("{s:s, s:I}", "cmd", script, "timeout_seconds", (json_int_t)120), *v, *d;

	snprintf(p, sizeof(p), "/sandboxes/%s/exec", id);
	v = call_json(c, "POST", p, body, what);
	d = json_object_get(v, "data");
	if (json_integer_value(json_object_get(d, "exit_code")) != 0)
		die(EXIT_API, "%s: %s", what, json_string_value(json_object_get(d, "stderr")));
	json_decref(v);
	json_decref(body);
}

static void file_url(const char *id, const char *path, const char *query, char *out, size_t n)
{
	char esc[PATH_MAX * 3 + 16];

	url_path(path[0] == '/' ? path + 1 : path, esc, sizeof(esc));
	if (snprintf(out, n, "/sandboxes/%s/files/%s%s", id, esc, query) >= (int)n)
		die(EXIT_USAGE, "cp: path too long: %s", path);
}

/* ---- in ------------------------------------------------------------------ */

static void put_file(const struct cli *c, const char *id, const char *local, const char *remote)
{
	char p[PATH_MAX * 3 + 96];
	struct call k = { 0 };
	cleanup_fclose FILE *f = fopen(local, "rbe");

	if (!f)
		die(EXIT_USAGE, "cp: %s: %s", local, strerror(errno));
	file_url(id, remote, "?mkdir=1", p, sizeof(p));
	request(c, "PUT", p, NULL, f, NULL, &k);
	if (k.status != 204 && k.status != 200 && k.status != 201)
		api_fail(&k, remote);
	buf_free(&k.body);
}

/* What nftw found under the source (nftw takes no argument of ours). */
static struct {
	const char *src, *dst;
	size_t srclen;
	struct buf mkdirs, chmods;
	char **files, **remotes;
	size_t n, cap;
} walk;

static char *joined(const char *dst, const char *rel)
{
	char *s;

	if (asprintf(&s, "%s%s", dst, rel) < 0)
		die(EXIT_USAGE, "out of memory");
	return s;
}

static int on_entry(const char *fpath, const struct stat *st, int type, struct FTW *ftw)
{
	const char *rel = fpath + walk.srclen;
	char mode[16];

	(void)ftw;
	if (type == FTW_D) {
		cleanup_free char *r = joined(walk.dst, rel);
		buf_add(&walk.mkdirs, " ", 1);
		quote_into(&walk.mkdirs, r);
	} else if (type == FTW_F && S_ISREG(st->st_mode)) {
		if (walk.n == walk.cap) {
			walk.cap = walk.cap ? walk.cap * 2 : 64;
			walk.files = realloc(walk.files, walk.cap * sizeof(char *));
			walk.remotes = realloc(walk.remotes, walk.cap * sizeof(char *));
			if (!walk.files || !walk.remotes)
				die(EXIT_USAGE, "out of memory");
		}
		walk.files[walk.n] = strdup(fpath);
		walk.remotes[walk.n] = joined(walk.dst, rel);
		if (!walk.files[walk.n])
			die(EXIT_USAGE, "out of memory");
		if (st->st_mode & 0111) {
			snprintf(mode, sizeof(mode), "chmod %o ", (unsigned)(st->st_mode & 07777));
			buf_add(&walk.chmods, mode, strlen(mode));
			quote_into(&walk.chmods, walk.remotes[walk.n]);
			buf_add(&walk.chmods, "\n", 1);
		}
		walk.n++;
	} else if (type == FTW_DNR) {
		die(EXIT_USAGE, "cp: cannot read directory %s", fpath);
	} else {
		fprintf(stderr, "sbx: cp: skipped %s (not a regular file or directory)\n", fpath);
	}
	return 0;
}

static void copy_in(const struct cli *c, const char *local, const char *id, const char *remote)
{
	struct stat st;
	char script[SCRIPT_MAX + 32], src[PATH_MAX];
	size_t n = strlen(local);

	/* "dir/" walks as "dir": the relative names start with '/' */
	while (n > 1 && local[n - 1] == '/')
		n--;
	if (n >= sizeof(src))
		die(EXIT_USAGE, "cp: path too long: %s", local);
	memcpy(src, local, n);
	src[n] = '\0';
	local = src;
	if (stat(local, &st) < 0)
		die(EXIT_USAGE, "cp: %s: %s", local, strerror(errno));
	if (S_ISREG(st.st_mode)) {
		put_file(c, id, local, remote);
		if (st.st_mode & 0111) {
			struct buf b = { 0 };
			buf_add(&b, "chmod 755 ", 10);
			quote_into(&b, remote);
			remote_sh(c, id, b.s, "cp: chmod");
			buf_free(&b);
		}
		return;
	}
	if (!S_ISDIR(st.st_mode))
		die(EXIT_USAGE, "cp: %s is not a file or a directory", local);
	walk.src = local;
	walk.srclen = strlen(local);
	walk.dst = remote;
	buf_add(&walk.mkdirs, "mkdir -p --", 11);
	if (nftw(local, on_entry, 32, FTW_PHYS) < 0)
		die(EXIT_USAGE, "cp: walking %s: %s", local, strerror(errno));
	if (walk.mkdirs.len > SCRIPT_MAX || walk.chmods.len > SCRIPT_MAX)
		die(EXIT_USAGE, "cp: %s has too many directories or executables for one copy; copy its parts", local);
	remote_sh(c, id, walk.mkdirs.s, "cp: mkdir");
	for (size_t i = 0; i < walk.n; i++) {
		put_file(c, id, walk.files[i], walk.remotes[i]);
		free(walk.files[i]);
		free(walk.remotes[i]);
	}
	if (walk.chmods.len) {
		snprintf(script, sizeof(script), "set -e\n%s", walk.chmods.s);
		remote_sh(c, id, script, "cp: chmod");
	}
	free(walk.files);
	free(walk.remotes);
	buf_free(&walk.mkdirs);
	buf_free(&walk.chmods);
}

/* ---- out ----------------------------------------------------------------- */

static int to_fd(const char *p, size_t n, void *arg)
{
	return sbx_write_all(*(int *)arg, p, n);
}

/* Into LOCAL.sbx-part first, renamed when whole: no partial file is left. */
static void get_file(const struct cli *c, const char *id, const char *remote, const char *local, mode_t mode)
{
	char p[PATH_MAX * 3 + 96], tmp[PATH_MAX + 16];
	int fd;
	struct call k = { .sink = to_fd, .sink_arg = &fd };

	if (snprintf(tmp, sizeof(tmp), "%s.sbx-part", local) >= (int)sizeof(tmp))
		die(EXIT_USAGE, "cp: path too long: %s", local);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode & 0777);
	if (fd < 0)
		die(EXIT_USAGE, "cp: %s: %s", tmp, strerror(errno));
	file_url(id, remote, "", p, sizeof(p));
	if (request(c, "GET", p, NULL, NULL, "Accept: application/octet-stream", &k) < 0) {
		unlink(tmp);
		die(EXIT_USAGE, "cp: writing %s: %s", local, strerror(errno));
	}
	if (k.status != 200) {
		close(fd);
		unlink(tmp);
		api_fail(&k, remote);
	}
	if (fchmod(fd, mode & 07777) < 0 || close(fd) < 0 || rename(tmp, local) < 0) {
		unlink(tmp);
		die(EXIT_USAGE, "cp: %s: %s", local, strerror(errno));
	}
	buf_free(&k.body);
}

/* The listing of a remote directory, NULL when `remote` is not one. */
static json_t *list_dir(const struct cli *c, const char *id, const char *remote)
{
	char p[PATH_MAX * 3 + 96];
	struct call k = { 0 };
	json_t *v, *e;

	file_url(id, remote, "?list=1", p, sizeof(p));
	request(c, "GET", p, NULL, NULL, NULL, &k);
	if (k.status != 200) {
		buf_free(&k.body);
		return NULL;
	}
	v = json_loads(k.body.s, 0, NULL);
	buf_free(&k.body);
	e = json_incref(json_object_get(json_object_get(v, "data"), "entries"));
	json_decref(v);
	return e;
}

static void copy_out(const struct cli *c, const char *id, const char *remote, const char *local, int depth)
{
	json_t *entries = depth < 64 ? list_dir(c, id, remote) : NULL, *e;
	size_t i;

	if (!entries) {
		get_file(c, id, remote, local, 0644);
		return;
	}
	if (mkdir(local, 0755) < 0 && errno != EEXIST)
		die(EXIT_USAGE, "cp: mkdir %s: %s", local, strerror(errno));
	json_array_foreach(entries, i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *type = json_string_value(json_object_get(e, "type"));
		mode_t mode = (mode_t)json_integer_value(json_object_get(e, "mode"));
		cleanup_free char *r = NULL, *l = NULL;

		if (!name || !type || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
			continue; /* a name that could leave `local` is never used */
		if (asprintf(&r, "%s/%s", remote, name) < 0 || asprintf(&l, "%s/%s", local, name) < 0)
			die(EXIT_USAGE, "out of memory");
		if (strcmp(type, "dir") == 0)
			copy_out(c, id, r, l, depth + 1);
		else if (strcmp(type, "file") == 0)
			get_file(c, id, r, l, mode ? mode : 0644);
		else
			fprintf(stderr, "sbx: cp: skipped %s:%s (%s)\n", id, r, type);
	}
	json_decref(entries);
}

int cmd_cp(struct cli *c, int argc, char **argv)
{
	char sid[25], did[25];
	const char *sp, *dp;
	bool sr, dr;

	(void)c;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--json") == 0)
			die(EXIT_USAGE, "cp prints nothing to format as JSON");
	if (argc != 3)
		die(EXIT_USAGE, "usage: sbx cp LOCAL ID:PATH | ID:PATH LOCAL");
	sr = remote_spec(argv[1], sid, &sp);
	dr = remote_spec(argv[2], did, &dp);
	if (sr == dr)
		die(EXIT_USAGE, "cp: exactly one of SRC and DST is ID:PATH");
	if (dr)
		copy_in(c, argv[1], did, dp);
	else
		copy_out(c, sid, sp, argv[2], 0);
	return 0;
}
