/* The sbx commands: each one parses its arguments and makes its API calls
 * through sbx.c. Streams (exec, logs) are read as NDJSON frames, one JSON
 * object per line (the API's `Accept: application/x-ndjson` extension). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "sbx.h"

#define STDIN_MAX (1u << 20) /* what one exec request may carry as stdin (the API's cap) */
#define NDJSON "Accept: application/x-ndjson"

static const struct option json_only[] = { { "json", no_argument, NULL, 'J' }, { 0 } };

/* getopt for one command: argv[0] is the command's name; --json anywhere. */
static int opt(struct cli *c, int argc, char **argv, const char *shorts, const struct option *longs)
{
	int ch;

	for (;;) {
		ch = getopt_long(argc, argv, shorts, longs ? longs : json_only, NULL);
		if (ch == 'J') {
			c->json = true;
			continue;
		}
		if (ch == '?')
			exit(EXIT_USAGE);
		return ch;
	}
}

static void need_args(int have, int want, const char *usage)
{
	if (have < want)
		die(EXIT_USAGE, "usage: sbx %s", usage);
}

/* K=V into obj; dies on a malformed pair. */
static void kv_into(json_t *obj, const char *arg, const char *what)
{
	const char *eq = strchr(arg, '=');
	char k[256];

	if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(k))
		die(EXIT_USAGE, "%s must be KEY=VALUE: %s", what, arg);
	memcpy(k, arg, (size_t)(eq - arg));
	k[eq - arg] = '\0';
	json_object_set_new(obj, k, json_string(eq + 1));
}

static long number(const char *s, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0)
		die(EXIT_USAGE, "%s must be a non-negative number: %s", what, s);
	return v;
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "-";
}

/* ---- create, ls, get, rm, pause, resume -------------------------------- */

enum { O_CPU = 256, O_MEM, O_DISK, O_EGRESS, O_ALLOW, O_TIMEOUT, O_STATUS, O_CWD };

/* What a create answered: the object with --json, else its id; frees V. */
static void print_made(const struct cli *c, json_t *v)
{
	if (c->json)
		print_json(json_object_get(v, "data"));
	else
		printf("%s\n", str(json_object_get(v, "data"), "id"));
	json_decref(v);
}

int cmd_create(struct cli *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "template", required_argument, NULL, 't' }, { "name", required_argument, NULL, 'n' },
		{ "env", required_argument, NULL, 'e' },      { "metadata", required_argument, NULL, 'm' },
		{ "cpu", required_argument, NULL, O_CPU },    { "memory", required_argument, NULL, O_MEM },
		{ "disk", required_argument, NULL, O_DISK },  { "egress", required_argument, NULL, O_EGRESS },
		{ "allow", required_argument, NULL, O_ALLOW }, { "timeout", required_argument, NULL, O_TIMEOUT },
		{ "json", no_argument, NULL, 'J' },           { 0 }
	};
	json_t *body = json_object(), *specs = json_object(), *env = json_object(), *md = json_object();
	json_t *allow = json_array();
	const char *egress = NULL;
	int ch;

	while ((ch = opt(c, argc, argv, "t:n:e:m:", lo)) != -1) {
		switch (ch) {
		case 't': json_object_set_new(body, "template", json_string(optarg)); break;
		case 'n': json_object_set_new(body, "name", json_string(optarg)); break;
		case 'e': kv_into(env, optarg, "--env"); break;
		case 'm': kv_into(md, optarg, "--metadata"); break;
		case O_CPU: json_object_set_new(specs, "cpu", json_integer(number(optarg, "--cpu"))); break;
		case O_MEM: json_object_set_new(specs, "memory", json_integer(number(optarg, "--memory"))); break;
		case O_DISK: json_object_set_new(specs, "disk", json_integer(number(optarg, "--disk"))); break;
		case O_EGRESS: egress = optarg; break;
		case O_ALLOW: json_array_append_new(allow, json_string(optarg)); break;
		case O_TIMEOUT: json_object_set_new(body, "timeout", json_integer(number(optarg, "--timeout"))); break;
		}
	}
	if (optind != argc)
		die(EXIT_USAGE, "create takes no arguments besides options (got %s)", argv[optind]);
	if (json_object_size(specs))
		json_object_set(body, "specs", specs);
	if (json_object_size(env))
		json_object_set(body, "env", env);
	if (json_object_size(md))
		json_object_set(body, "metadata", md);
	if (egress || json_array_size(allow)) {
		json_t *e = json_pack("{s:s}", "mode", egress ? egress : "restricted");
		if (json_array_size(allow))
			json_object_set(e, "allow", allow);
		json_object_set_new(body, "egress", e);
	}
	print_made(c, call_json(c, "POST", "/sandboxes", body, "create"));
	json_decref(body);
	json_decref(specs);
	json_decref(env);
	json_decref(md);
	json_decref(allow);
	return 0;
}

/* Every page of a paginated list, into one array. */
static json_t *all_pages(const struct cli *c, const char *path, const char *extra, const char *what)
{
	json_t *all = json_array();
	char p[1024];

	for (long page = 1;; page++) {
		snprintf(p, sizeof(p), "%s?page=%ld&limit=100%s", path, page, extra ? extra : "");
		json_t *v = call_json(c, "GET", p, NULL, what), *d = json_object_get(v, "data");
		json_array_extend(all, json_object_get(d, "data"));
		long pages = (long)json_integer_value(json_object_get(d, "totalPages"));
		json_decref(v);
		if (page >= pages || page >= 1000)
			break;
	}
	return all;
}

int cmd_ls(struct cli *c, int argc, char **argv)
{
	static const struct option lo[] = { { "status", required_argument, NULL, O_STATUS },
					    { "json", no_argument, NULL, 'J' }, { 0 } };
	char extra[128] = "";
	json_t *all, *s;
	size_t i;
	int ch;

	while ((ch = opt(c, argc, argv, "", lo)) != -1)
		if (ch == O_STATUS) {
			char esc[96];
			url_path(optarg, esc, sizeof(esc));
			snprintf(extra, sizeof(extra), "&status=%s", esc);
		}
	all = all_pages(c, "/sandboxes", extra, "list");
	if (c->json) {
		print_json(all);
	} else {
		printf("%-24s  %-20s  %-12s  %-9s  %s\n", "ID", "NAME", "TEMPLATE", "STATUS", "CREATED");
		json_array_foreach(all, i, s)
			printf("%-24s  %-20.20s  %-12.12s  %-9s  %s\n", str(s, "id"), str(s, "name"),
			       str(s, "template"), str(s, "status"), str(s, "created_at"));
	}
	json_decref(all);
	return 0;
}

int cmd_get(struct cli *c, int argc, char **argv)
{
	char p[64];
	json_t *v, *d, *x;
	const char *k;

	while (opt(c, argc, argv, "", NULL) != -1)
		;
	need_args(argc - optind, 1, "get ID");
	snprintf(p, sizeof(p), "/sandboxes/%s", check_id(argv[optind], "sandbox"));
	v = call_json(c, "GET", p, NULL, "get");
	d = json_object_get(v, "data");
	if (c->json) {
		print_json(d);
	} else {
		json_object_foreach(d, k, x) {
			char *s = json_is_string(x) ? NULL : json_dumps(x, JSON_COMPACT | JSON_ENCODE_ANY);
			printf("%-20s %s\n", k, s ? s : json_string_value(x));
			free(s);
		}
	}
	json_decref(v);
	return 0;
}

/* POST/DELETE on each id; prints the id (or the API's message). */
static int each_id(struct cli *c, int argc, char **argv, const char *method, const char *suffix, const char *what)
{
	char p[128];

	while (opt(c, argc, argv, "", NULL) != -1)
		;
	need_args(argc - optind, 1, what);
	for (int i = optind; i < argc; i++) {
		snprintf(p, sizeof(p), "/sandboxes/%s%s", check_id(argv[i], "sandbox"), suffix);
		json_t *v = call_json(c, method, p, strcmp(method, "POST") == 0 ? json_object() : NULL, what);
		if (c->json && v)
			print_json(v);
		else if (v && json_object_get(v, "message") && *suffix)
			printf("%s: %s\n", argv[i], json_string_value(json_object_get(v, "message")));
		else
			printf("%s\n", argv[i]);
		json_decref(v);
	}
	return 0;
}

int cmd_rm(struct cli *c, int argc, char **argv) { return each_id(c, argc, argv, "DELETE", "", "rm ID..."); }
int cmd_pause(struct cli *c, int argc, char **argv) { return each_id(c, argc, argv, "POST", "/pause", "pause ID"); }
int cmd_resume(struct cli *c, int argc, char **argv) { return each_id(c, argc, argv, "POST", "/resume", "resume ID"); }

/* A number of the answer, NAN when absent or null (an unknown figure). */
static double dnum(json_t *o, const char *path)
{
	json_t *v = o;
	char key[64];

	for (const char *p = path, *dot; v && *p; p = dot ? dot + 1 : p + strlen(p)) {
		dot = strchr(p, '.');
		snprintf(key, sizeof(key), "%.*s", (int)(dot ? (size_t)(dot - p) : strlen(p)), p);
		v = json_object_get(v, key);
	}
	return json_is_number(v) ? json_number_value(v) : NAN;
}

static void print_bytes(const char *label, double used, double total)
{
	const double mib = 1024.0 * 1024.0;

	if (isnan(used))
		printf("%-9s -\n", label);
	else if (isnan(total) || total <= 0)
		printf("%-9s %.1f MiB\n", label, used / mib);
	else
		printf("%-9s %.1f MiB of %.0f MiB (%.1f%%)\n", label, used / mib, total / mib, 100.0 * used / total);
}

/* What a sandbox uses now, and its means over the last hours. */
int cmd_stats(struct cli *c, int argc, char **argv)
{
	static const struct option lo[] = { { "hours", required_argument, NULL, 'H' },
					    { "json", no_argument, NULL, 'J' }, { 0 } };
	char p[128];
	long hours = 1;
	int ch;
	json_t *v, *d;
	double x;

	while ((ch = opt(c, argc, argv, "", lo)) != -1)
		if (ch == 'H')
			hours = number(optarg, "--hours");
	need_args(argc - optind, 1, "stats [--hours N] ID");
	snprintf(p, sizeof(p), "/sandboxes/%s/stats?hoursAgo=%ld", check_id(argv[optind], "sandbox"), hours);
	v = call_json(c, "GET", p, NULL, "stats");
	d = json_object_get(v, "data");
	if (c->json) {
		print_json(d);
		json_decref(v);
		return 0;
	}
	printf("%-9s %.1f%% of %g core%s", "cpu", dnum(d, "current.cpuUsedPct"), dnum(d, "current.cpuCount"),
	       dnum(d, "current.cpuCount") == 1 ? "" : "s");
	if (!isnan(x = dnum(d, "current.cpuSeconds")))
		printf(" (%.2f s used)", x);
	printf("\n");
	print_bytes("memory", dnum(d, "current.memUsed"), dnum(d, "current.memTotal"));
	print_bytes("disk", dnum(d, "current.diskUsed"), dnum(d, "current.diskTotal"));
	if (!isnan(x = dnum(d, "current.pids")))
		printf("%-9s %.0f host tasks (of %.0f)\n", "pids", x, dnum(d, "current.pidsMax"));
	if (!isnan(x = dnum(d, "current.networkRxBytes")))
		printf("%-9s %.0f bytes in, %.0f out\n", "network", x, dnum(d, "current.networkTxBytes"));
	printf("%-9s cpu %.1f%%, memory %.1f MiB (%.1f%%), network %.0f B/s over %ld h (%zu points)\n", "average",
	       dnum(d, "average.cpu.totalInPercentage"), dnum(d, "average.memory.size"),
	       dnum(d, "average.memory.totalInPercentage"), dnum(d, "average.network.bytesPerSecond"), hours,
	       json_array_size(json_object_get(d, "results")));
	json_decref(v);
	return 0;
}

int cmd_snapshot(struct cli *c, int argc, char **argv)
{
	char p[128];
	json_t *v;

	while (opt(c, argc, argv, "", NULL) != -1)
		;
	need_args(argc - optind, 1, "snapshot ID");
	snprintf(p, sizeof(p), "/sandboxes/%s/snapshots", check_id(argv[optind], "sandbox"));
	v = call_json(c, "POST", p, json_object(), "snapshot");
	if (c->json)
		print_json(json_object_get(v, "data"));
	else
		printf("%s\n", str(json_object_get(v, "data"), "id"));
	json_decref(v);
	return 0;
}

int cmd_egress(struct cli *c, int argc, char **argv)
{
	char p[128];
	json_t *body, *allow = json_array(), *v;

	while (opt(c, argc, argv, "", NULL) != -1)
		;
	need_args(argc - optind, 2, "egress ID open|deny_all|restricted [ALLOW...]");
	snprintf(p, sizeof(p), "/sandboxes/%s/egress", check_id(argv[optind], "sandbox"));
	for (int i = optind + 2; i < argc; i++)
		json_array_append_new(allow, json_string(argv[i]));
	body = json_pack("{s:s}", "mode", argv[optind + 1]);
	if (json_array_size(allow))
		json_object_set(body, "allow", allow);
	v = call_json(c, "PUT", p, body, "egress");
	if (c->json)
		print_json(json_object_get(v, "data"));
	else
		printf("%s: egress %s\n", argv[optind], str(json_object_get(json_object_get(v, "data"), "egress"), "mode"));
	json_decref(v);
	json_decref(body);
	json_decref(allow);
	return 0;
}

int cmd_templates(struct cli *c, int argc, char **argv)
{
	json_t *v, *t, *list;
	size_t i;

	while (opt(c, argc, argv, "", NULL) != -1)
		;
	v = call_json(c, "GET", "/sandbox/templates", NULL, "templates");
	list = json_object_get(json_object_get(v, "data"), "templates");
	if (c->json)
		print_json(list);
	else
		json_array_foreach(list, i, t)
			printf("%-16s %s\n", str(t, "name"), str(t, "description"));
	json_decref(v);
	return 0;
}

int cmd_volumes(struct cli *c, int argc, char **argv)
{
	const char *sub;
	char p[128];

	while (opt(c, argc, argv, "", NULL) != -1)
		;
	sub = optind < argc ? argv[optind] : "ls";
	if (strcmp(sub, "ls") == 0) {
		json_t *all = all_pages(c, "/volumes", NULL, "volumes"), *x;
		size_t i;
		if (c->json) {
			print_json(all);
		} else {
			printf("%-24s  %-20s  %6s  %s\n", "ID", "NAME", "SIZE", "ATTACHED TO");
			json_array_foreach(all, i, x)
				printf("%-24s  %-20.20s  %4lldGB  %s\n", str(x, "id"), str(x, "name"),
				       (long long)json_integer_value(json_object_get(x, "size")),
				       str(x, "attached_sandbox_id"));
		}
		json_decref(all);
	} else if (strcmp(sub, "create") == 0) {
		need_args(argc - optind, 3, "volumes create NAME SIZE_GB");
		json_t *b = json_pack("{s:s, s:I}", "name", argv[optind + 1], "sizeGB",
				      (json_int_t)number(argv[optind + 2], "SIZE_GB"));
		print_made(c, call_json(c, "POST", "/volumes", b, "volume create"));
		json_decref(b);
	} else if (strcmp(sub, "rm") == 0) {
		need_args(argc - optind, 2, "volumes rm VOLUME_ID");
		snprintf(p, sizeof(p), "/volumes/%s", check_id(argv[optind + 1], "volume"));
		json_decref(call_json(c, "DELETE", p, NULL, "volume rm"));
		printf("%s\n", argv[optind + 1]);
	} else {
		die(EXIT_USAGE, "usage: sbx volumes [ls | create NAME SIZE_GB | rm VOLUME_ID]");
	}
	return 0;
}

/* ---- streams: exec and logs ---------------------------------------------- */

struct frames {
	struct buf line;
	int exit_code; /* -1 until `done` */
	unsigned long long bytes; /* output bytes written */
	char error[512];
};

/* One frame: output goes to our stdout/stderr as it arrives. */
static int frame(struct frames *f, const char *s)
{
	json_t *v = json_loads(s, 0, NULL);
	const char *type = json_string_value(json_object_get(v, "type"));
	const char *data = json_string_value(json_object_get(v, "data"));
	const char *enc = json_string_value(json_object_get(v, "encoding"));
	int rc = 0;

	if (!v) {
		/* never skipped: output would be lost without a word */
		snprintf(f->error, sizeof(f->error), "the API sent a frame that is not JSON: %.80s", s);
		return -1;
	}
	if (!type) {
		json_decref(v);
		return 0; /* not ours to judge: a future frame kind */
	}
	if ((strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) && data) {
		int fd = type[3] == 'o' ? 1 : 2;
		size_t n = strlen(data);
		if (enc && strcmp(enc, "base64") == 0) {
			unsigned char *bin = malloc(n + 1);
			size_t bl = 0;
			if (!bin || sodium_base642bin(bin, n + 1, data, n, NULL, &bl, NULL,
						      sodium_base64_VARIANT_ORIGINAL) < 0)
				rc = -1;
			else
				rc = sbx_write_all(fd, (const char *)bin, bl);
			f->bytes += bl;
			free(bin);
		} else {
			rc = sbx_write_all(fd, data, n);
			f->bytes += n;
		}
	} else if (strcmp(type, "done") == 0 || strcmp(type, "exit") == 0) {
		json_t *ec = json_object_get(v, "exit_code");
		f->exit_code = json_is_integer(ec) ? (int)json_integer_value(ec) : 0;
	} else if (strcmp(type, "error") == 0) {
		snprintf(f->error, sizeof(f->error), "%s", str(v, "message"));
	}
	json_decref(v);
	return rc;
}

static int on_frames(const char *p, size_t n, void *arg)
{
	struct frames *f = arg;
	size_t start = 0;

	if (buf_add(&f->line, p, n) < 0)
		return -1;
	for (size_t i = 0; i < f->line.len; i++) {
		if (f->line.s[i] != '\n')
			continue;
		f->line.s[i] = '\0';
		if (i > start && frame(f, f->line.s + start) < 0)
			return -1;
		start = i + 1;
	}
	memmove(f->line.s, f->line.s + start, f->line.len - start);
	f->line.len -= start;
	f->line.s[f->line.len] = '\0';
	return 0;
}

int stream_frames(const struct cli *c, const char *path, json_t *body, const char *what, unsigned long long *bytes)
{
	struct frames f = { .exit_code = -1 };
	struct call k = { .sink = on_frames, .sink_arg = &f };

	if (request(c, body ? "POST" : "GET", path, body, NULL, NDJSON, &k) < 0)
		die(EXIT_API, "%s: %s", what, *f.error ? f.error : strerror(errno));
	if (k.status < 200 || k.status >= 300)
		api_fail(&k, what);
	if (f.line.len)
		frame(&f, f.line.s);
	if (bytes)
		*bytes += f.bytes;
	buf_free(&f.line);
	buf_free(&k.body);
	if (*f.error)
		die(EXIT_API, "%s: %s", what, f.error);
	return f.exit_code > 255 ? 255 : f.exit_code;
}

/* argv as one `sh -c` string: a lone argument is taken as shell code, more
 * are quoted one by one. */
static char *command_line(int argc, char **argv)
{
	struct buf b = { 0 };

	if (argc == 1)
		return strdup(argv[0]);
	for (int i = 0; i < argc; i++) {
		if (i)
			buf_add(&b, " ", 1);
		buf_add(&b, "'", 1);
		for (const char *p = argv[i]; *p; p++) {
			if (*p == '\'')
				buf_add(&b, "'\\''", 4);
			else
				buf_add(&b, p, 1);
		}
		buf_add(&b, "'", 1);
	}
	return b.s;
}

/* Stdin when it is a pipe or a file (or -i): base64, at most STDIN_MAX. */
static json_t *read_stdin(bool force)
{
	struct stat st;
	struct buf b = { 0 };
	char chunk[65536];
	ssize_t n;
	json_t *v;

	if (!force && (fstat(0, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode))))
		return NULL;
	while ((n = read(0, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die(EXIT_USAGE, "reading stdin: %s", strerror(errno));
		if (b.len + (size_t)n > STDIN_MAX)
			die(EXIT_USAGE, "stdin is over %u MiB: copy it in with `sbx cp` instead", STDIN_MAX >> 20);
		if (buf_add(&b, chunk, (size_t)n) < 0)
			die(EXIT_USAGE, "out of memory");
	}
	size_t el = sodium_base64_ENCODED_LEN(b.len, sodium_base64_VARIANT_ORIGINAL);
	char *enc = malloc(el);
	if (!enc)
		die(EXIT_USAGE, "out of memory");
	sodium_bin2base64(enc, el, (const unsigned char *)(b.s ? b.s : ""), b.len, sodium_base64_VARIANT_ORIGINAL);
	v = json_string(enc);
	free(enc);
	buf_free(&b);
	return v;
}

int cmd_exec(struct cli *c, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "env", required_argument, NULL, 'e' },  { "cwd", required_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, O_TIMEOUT }, { "no-stdin", no_argument, NULL, 'n' },
		{ "stdin", no_argument, NULL, 'i' },     { "json", no_argument, NULL, 'J' }, { 0 }
	};
	json_t *env = json_object(), *body, *in;
	bool no_stdin = false, force = false;
	const char *cwd = NULL;
	long timeout = 300;
	char p[128];
	cleanup_free char *cmd = NULL;
	int ch, rc;

	/* '+': options stop at the id, so the command's own options stay its own */
	while ((ch = opt(c, argc, argv, "+e:w:ni", lo)) != -1) {
		switch (ch) {
		case 'e': kv_into(env, optarg, "--env"); break;
		case 'w': cwd = optarg; break;
		case 'n': no_stdin = true; break;
		case 'i': force = true; break;
		case O_TIMEOUT: timeout = number(optarg, "--timeout"); break;
		}
	}
	need_args(argc - optind, 2, "exec [-e K=V] [-w DIR] [--timeout S] ID -- CMD [ARG...]");
	snprintf(p, sizeof(p), "/sandboxes/%s/exec", check_id(argv[optind], "sandbox"));
	int first = optind + 1;
	if (strcmp(argv[first], "--") == 0)
		first++;
	need_args(argc - first, 1, "exec ID -- CMD [ARG...]");
	cmd = command_line(argc - first, argv + first);
	body = json_pack("{s:s, s:b, s:I}", "cmd", cmd, "stream", 1, "timeout_seconds", (json_int_t)timeout);
	if (cwd)
		json_object_set_new(body, "cwd", json_string(cwd));
	if (json_object_size(env))
		json_object_set(body, "env", env);
	if (!no_stdin && (in = read_stdin(force))) {
		json_object_set_new(body, "stdin", in);
		json_object_set_new(body, "stdin_encoding", json_string("base64"));
	}
	fflush(stdout);
	rc = stream_frames(c, p, body, "exec", NULL);
	if (rc < 0)
		die(EXIT_CONN, "exec: the stream ended without an exit code");
	json_decref(body);
	json_decref(env);
	return rc;
}

int cmd_logs(struct cli *c, int argc, char **argv)
{
	static const struct option lo[] = { { "follow", no_argument, NULL, 'f' }, { "json", no_argument, NULL, 'J' },
					    { 0 } };
	bool follow = false;
	char p[160];
	int ch;

	while ((ch = opt(c, argc, argv, "f", lo)) != -1)
		if (ch == 'f')
			follow = true;
	need_args(argc - optind, 2, "logs [-f] ID PID");
	snprintf(p, sizeof(p), "/sandboxes/%s/processes/%ld/output%s", check_id(argv[optind], "sandbox"),
		 number(argv[optind + 1], "PID"), follow ? "?follow=1" : "");
	stream_frames(c, p, NULL, "logs", NULL);
	return 0;
}
