/* The sbx command line: what sbx.c (configuration, HTTP, main) gives the
 * commands in sbx_cmds.c. */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "cleanup.h"

#define EXIT_API 1
#define EXIT_USAGE 2
#define EXIT_CONN 3

struct cli {
	char url[512], key[256], cacert[PATH_MAX];
	bool json;
	long connect_timeout; /* seconds, TCP and TLS handshake (SBX_CONNECT_TIMEOUT) */
	void *curl; /* a CURL handle kept between requests (keep-alive), or NULL */
};

struct buf {
	char *s;
	size_t len, cap;
};

void buf_free(struct buf *b);
int buf_add(struct buf *b, const void *p, size_t n);
#define cleanup_buf _cleanup_(buf_free)

/* Prints "sbx: MESSAGE" and exits with `code`. */
void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Streamed bodies: each chunk of a 2xx answer goes to `sink` as it arrives. */
typedef int (*sink_fn)(const char *p, size_t n, void *arg);

struct call {
	const char *raw; /* a raw request body of rawlen bytes (with has_raw) */
	size_t rawlen;
	bool has_raw;
	struct buf body; /* the answer (when there is no sink, or an error) */
	sink_fn sink;
	void *sink_arg;
	long status;
	bool sink_failed;
};

/* One request: `body` JSON (or NULL), or `file` streamed raw. `accept` is a
 * whole header line (NULL: JSON). Dies when the API cannot be reached;
 * returns -1 when the sink refused data. */
int request(const struct cli *c, const char *method, const char *path, json_t *body, FILE *file,
	    const char *accept, struct call *k);
/* Prints the API's message for a failed call and exits (1, or 3 with no answer). */
void api_fail(const struct call *k, const char *what) __attribute__((noreturn));
/* A stream of NDJSON frames (exec, process output): output goes to our
 * stdout/stderr as it arrives; *bytes (if not NULL) grows by the output
 * bytes seen. Returns the exit code, -1 when the stream ended without one. */
int stream_frames(const struct cli *c, const char *path, json_t *body, const char *what, unsigned long long *bytes);
/* A JSON call that must answer 2xx: the whole answer, NULL for a 204. */
json_t *call_json(const struct cli *c, const char *method, const char *path, json_t *body, const char *what);
void print_json(json_t *v);
/* Dies unless id is 24 lowercase hex characters. */
const char *check_id(const char *id, const char *what);
/* Escapes a path for a URL, keeping '/'. */
void url_path(const char *p, char *out, size_t n);

int cmd_create(struct cli *c, int argc, char **argv);
int cmd_ls(struct cli *c, int argc, char **argv);
int cmd_get(struct cli *c, int argc, char **argv);
int cmd_exec(struct cli *c, int argc, char **argv);
int cmd_cp(struct cli *c, int argc, char **argv);
int cmd_rm(struct cli *c, int argc, char **argv);
int cmd_pause(struct cli *c, int argc, char **argv);
int cmd_resume(struct cli *c, int argc, char **argv);
int cmd_snapshot(struct cli *c, int argc, char **argv);
int cmd_stats(struct cli *c, int argc, char **argv);
int cmd_volumes(struct cli *c, int argc, char **argv);
int cmd_egress(struct cli *c, int argc, char **argv);
int cmd_logs(struct cli *c, int argc, char **argv);
int cmd_templates(struct cli *c, int argc, char **argv);
int cmd_shell(struct cli *c, int argc, char **argv);

#endif
