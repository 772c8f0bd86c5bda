/* sbx: the command line for people and scripts. Every command is one or a few
 * calls of the public API (doc/api.md) over HTTPS with libcurl; nothing here
 * talks to Postgres, RabbitMQ or a node. The exit code of `sbx exec` is the
 * command's own; otherwise 0 ok, 1 the API said no (its message is printed),
 * 2 usage, 3 the API could not be reached.
 *
 * Configuration: SBX_URL, SBX_KEY (or SBX_API_KEY), SBX_CACERT from the
 * environment, else `url`, `key`, `cacert` lines of $SBX_CONFIG (default
 * ~/.config/sbx/config). The man page is doc/sbx.1. */
#include "config.h"

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "sbx.h"

void buf_free(struct buf *b) { free(b->s); }

int buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t ncap = b->cap ? b->cap * 2 : 4096;
		while (ncap < b->len + n + 1)
			ncap *= 2;
		char *s = realloc(b->s, ncap);
		if (!s)
			return -1;
		b->s = s;
		b->cap = ncap;
	}
	memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
	return 0;
}

void die(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("sbx: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/* ---- configuration ------------------------------------------------------- */

static void copy(char *dst, size_t n, const char *src)
{
	if (snprintf(dst, n, "%s", src) >= (int)n)
		die(EXIT_USAGE, "configuration value too long: %.40s...", src);
}

/* `name = value` lines; # comments. Only fills what the environment left empty. */
static void read_config(struct cli *c)
{
	char path[PATH_MAX], line[1024];
	const char *p = getenv("SBX_CONFIG"), *home = getenv("HOME");
	cleanup_fclose FILE *f = NULL;

	if (p && *p)
		copy(path, sizeof(path), p);
	else if (home && *home)
		snprintf(path, sizeof(path), "%s/.config/sbx/config", home);
	else
		return;
	f = fopen(path, "re");
	if (!f) {
		if (p && *p)
			die(EXIT_USAGE, "cannot read config %s: %s", path, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char *k = line + strspn(line, " \t"), *eq = strchr(k, '='), *v, *end;
		if (*k == '#' || *k == '\n' || !eq)
			continue;
		for (end = eq; end > k && (end[-1] == ' ' || end[-1] == '\t'); end--)
			;
		*end = '\0';
		v = eq + 1 + strspn(eq + 1, " \t");
		v[strcspn(v, "\r\n")] = '\0';
		for (end = v + strlen(v); end > v && (end[-1] == ' ' || end[-1] == '\t'); end--)
			*--end = '\0';
		if (strcmp(k, "url") == 0 && !*c->url)
			copy(c->url, sizeof(c->url), v);
		else if (strcmp(k, "key") == 0 && !*c->key)
			copy(c->key, sizeof(c->key), v);
		else if (strcmp(k, "cacert") == 0 && !*c->cacert)
			copy(c->cacert, sizeof(c->cacert), v);
	}
}

static void load_config(struct cli *c)
{
	const char *u = getenv("SBX_URL"), *k = getenv("SBX_KEY"), *ca = getenv("SBX_CACERT");
	const char *to = getenv("SBX_CONNECT_TIMEOUT");

	if (!k || !*k)
		k = getenv("SBX_API_KEY");
	if (u && *u)
		copy(c->url, sizeof(c->url), u);
	if (k && *k)
		copy(c->key, sizeof(c->key), k);
	if (ca && *ca)
		copy(c->cacert, sizeof(c->cacert), ca);
	c->connect_timeout = 10;
	if (to && *to) {
		char *end;
		long v = strtol(to, &end, 10);
		if (*end || v < 1 || v > 3600)
			die(EXIT_USAGE, "SBX_CONNECT_TIMEOUT: %s is not a number of seconds from 1 to 3600", to);
		c->connect_timeout = v;
	}
	read_config(c);
	if (!*c->url)
		die(EXIT_USAGE, "no API URL: set SBX_URL or `url = https://...` in ~/.config/sbx/config");
	if (!*c->key)
		die(EXIT_USAGE, "no API key: set SBX_KEY or `key = ...` in ~/.config/sbx/config");
	size_t n = strlen(c->url);
	while (n && c->url[n - 1] == '/')
		c->url[--n] = '\0';
}

/* ---- HTTP ---------------------------------------------------------------- */

static size_t on_data(char *p, size_t sz, size_t nm, void *arg)
{
	struct call *k = arg;
	size_t n = sz * nm;

	/* Errors are JSON, not a stream: they are kept for the message. */
	if (k->sink && k->status < 300) {
		if (k->sink(p, n, k->sink_arg) < 0) {
			k->sink_failed = true;
			return 0;
		}
		return n;
	}
	return buf_add(&k->body, p, n) < 0 ? 0 : n;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *arg)
{
	struct call *k = arg;
	int st;

	/* The status line: known before the first byte of the body. */
	if (sz * nm > 9 && strncmp(p, "HTTP/", 5) == 0 && sscanf(p, "HTTP/%*s %d", &st) == 1)
		k->status = st;
	return sz * nm;
}

struct upload {
	const char *p;
	size_t left;
	FILE *f;
};

static size_t on_read(char *p, size_t sz, size_t nm, void *arg)
{
	struct upload *u = arg;
	size_t n = sz * nm;

	if (u->f)
		return fread(p, 1, n, u->f);
	if (n > u->left)
		n = u->left;
	memcpy(p, u->p, n);
	u->p += n;
	u->left -= n;
	return n;
}

/* One request. `body` JSON (or NULL), or `file` streamed raw (PUT). */
int request(const struct cli *c, const char *method, const char *path, json_t *body, FILE *file,
		   const char *accept, struct call *k)
{
	CURL *h = c->curl ? c->curl : curl_easy_init();
	struct curl_slist *hd = NULL;
	char auth[320], url[2048];
	cleanup_free char *js = NULL;
	struct upload up = { 0 };
	CURLcode rc;

	if (!h)
		die(EXIT_CONN, "cannot start libcurl");
	if (c->curl)
		curl_easy_reset(h); /* the options go; the open connection stays */
	snprintf(url, sizeof(url), "%s%s", c->url, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->key);
	hd = curl_slist_append(hd, auth);
	hd = curl_slist_append(hd, accept ? accept : "Accept: application/json");
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, k);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, k);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, c->connect_timeout > 0 ? c->connect_timeout : 10L);
	if (*c->cacert)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->cacert);
	if (k->has_raw) {
		hd = curl_slist_append(hd, "Content-Type: application/octet-stream");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, k->raw ? k->raw : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)k->rawlen);
	} else if (body) {
		js = json_dumps(body, JSON_COMPACT);
		if (!js)
			die(EXIT_CONN, "out of memory");
		hd = curl_slist_append(hd, "Content-Type: application/json");
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, js);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(js));
	} else if (file) {
		struct stat st;
		up.f = file;
		hd = curl_slist_append(hd, "Content-Type: application/octet-stream");
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(h, CURLOPT_READDATA, &up);
		if (fstat(fileno(file), &st) == 0 && S_ISREG(st.st_mode))
			curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
		/* libcurl's UPLOAD is a PUT; CUSTOMREQUEST keeps the method named. */
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	rc = curl_easy_perform(h);
	curl_slist_free_all(hd);
	if (rc != CURLE_OK && !k->sink_failed) {
		const char *why = curl_easy_strerror(rc);
		if (!c->curl)
			curl_easy_cleanup(h);
		die(EXIT_CONN, "%s %s: %s", method, url, why);
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &k->status);
	if (!c->curl)
		curl_easy_cleanup(h);
	return k->sink_failed ? -1 : 0;
}

/* The API's error message (or the raw body) and the exit code for it. */
void api_fail(const struct call *k, const char *what)
{
	json_t *v = k->body.s ? json_loads(k->body.s, 0, NULL) : NULL;
	const char *m = json_string_value(json_object_get(v, "message"));
	const char *code = json_string_value(json_object_get(v, "code"));

	fprintf(stderr, "sbx: %s: %s (HTTP %ld%s%s)\n", what,
		m ? m : (k->body.s && *k->body.s ? k->body.s : "no answer"), k->status, code ? ", " : "",
		code ? code : "");
	json_decref(v);
	exit(k->status == 0 ? EXIT_CONN : EXIT_API);
}

/* A JSON call whose answer must be 2xx: returns the whole answer (or NULL for 204). */
json_t *call_json(const struct cli *c, const char *method, const char *path, json_t *body, const char *what)
{
	struct call k = { 0 };
	json_t *v;
	json_error_t jerr;

	request(c, method, path, body, NULL, NULL, &k);
	if (k.status < 200 || k.status >= 300)
		api_fail(&k, what);
	if (k.status == 204 || !k.body.s) {
		buf_free(&k.body);
		return NULL;
	}
	v = json_loads(k.body.s, 0, &jerr);
	if (!v)
		die(EXIT_API, "%s: the API answered something that is not JSON: %s", what, jerr.text);
	buf_free(&k.body);
	return v;
}

void print_json(json_t *v)
{
	char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (s)
		puts(s);
	free(s);
}

/* ---- ids and paths ------------------------------------------------------- */

const char *check_id(const char *id, const char *what)
{
	if (strlen(id) != 24 || strspn(id, "0123456789abcdef") != 24)
		die(EXIT_USAGE, "%s: not a %s id (24 lowercase hex characters): %s", what, what, id);
	return id;
}

/* A path in a URL: each byte outside the unreserved set and '/' escaped. */
void url_path(const char *p, char *out, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *p && o + 4 < n; p++) {
		unsigned char ch = (unsigned char)*p;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    strchr("-._~/", ch)) {
			out[o++] = (char)ch;
		} else {
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	if (*p)
		die(EXIT_USAGE, "path too long");
	out[o] = '\0';
}

static const struct command {
	const char *name, *args, *help;
	int (*run)(struct cli *c, int argc, char **argv);
} commands[] = {
	{ "create", "[-t TEMPLATE] [-n NAME] [--cpu N] [--memory MB] [--disk GB] [-e K=V]... [--egress MODE] [--allow X]...",
	  "create a sandbox; prints its id", cmd_create },
	{ "ls", "[--status S]", "list sandboxes", cmd_ls },
	{ "get", "ID", "show one sandbox", cmd_get },
	{ "exec", "[-e K=V]... [-w DIR] [--timeout S] [-n] ID -- CMD [ARG...]",
	  "run a command; output streams, its exit code is sbx's; stdin from a pipe or file", cmd_exec },
	{ "cp", "SRC DST", "copy files or directories in (LOCAL ID:PATH) or out (ID:PATH LOCAL)", cmd_cp },
	{ "rm", "ID...", "destroy sandboxes", cmd_rm },
	{ "pause", "ID", "pause a sandbox", cmd_pause },
	{ "resume", "ID", "resume a paused sandbox", cmd_resume },
	{ "snapshot", "ID", "take a snapshot of a sandbox", cmd_snapshot },
	{ "stats", "[--hours N] ID", "what a sandbox uses now (CPU, memory, disk) and its means over N hours",
	  cmd_stats },
	{ "volumes", "[ls | create NAME SIZE_GB | rm VOLUME_ID]", "manage volumes", cmd_volumes },
	{ "egress", "ID MODE [ALLOW...]", "set a running sandbox's egress: open, deny_all or restricted", cmd_egress },
	{ "logs", "[-f] ID PID", "output of a background process (-f: follow)", cmd_logs },
	{ "templates", "", "list the templates", cmd_templates },
	{ "shell", "[-e K=V]... [-w DIR] ID [CMD [ARG...]]",
	  "an interactive terminal in the sandbox (a login shell, or CMD)", cmd_shell },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: sbx [--json] COMMAND [ARGS]\n\ncommands:\n");
	for (size_t i = 0; i < SBX_ARRAY_LEN(commands); i++)
		fprintf(f, "  %-10s %s\n  %-10s   %s\n", commands[i].name, commands[i].args, "", commands[i].help);
	fprintf(f, "\nconfiguration: SBX_URL, SBX_KEY, SBX_CACERT, or ~/.config/sbx/config "
		   "(url = ..., key = ..., cacert = ...); see sbx(1).\n");
}

int main(int argc, char **argv)
{
	struct cli c = { 0 };
	int i = 1, rc;

	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			c.json = true;
		} else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			puts("sbx " PACKAGE_VERSION);
			return 0;
		} else {
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (i >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	for (size_t k = 0; k < SBX_ARRAY_LEN(commands); k++) {
		if (strcmp(argv[i], commands[k].name) != 0)
			continue;
		if (sodium_init() < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
			die(EXIT_CONN, "cannot initialise libsodium or libcurl");
		load_config(&c);
		/* the command sees its own argv[0] and may take --json after its name */
		rc = commands[k].run(&c, argc - i, argv + i);
		curl_global_cleanup();
		return rc;
	}
	fprintf(stderr, "sbx: unknown command %s\n", argv[i]);
	usage(stderr);
	return EXIT_USAGE;
}
