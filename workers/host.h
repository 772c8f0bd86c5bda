/* The node's host tools (mkfs, runsc, ip, nft) and the small helpers around
 * them: the one way the node side runs a program, reading what it wrote, and
 * short sleeps.
 *
 * Tools run as child processes (fork + execve with an argv, never a shell);
 * their output goes to memfds so no pipe fills up or raises SIGPIPE, and
 * their input (nft -f -, ip -batch -) comes from a memfd too. */
#ifndef SBX_WORKER_HOST_H
#define SBX_WORKER_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include "cleanup.h"
#include "err.h"

#define HOST_TOOL_TIMEOUT_MS 60000
#define HOST_TAIL_MAX 300 /* room for host_tail() in an error message */

struct host_run_opts {
	const char *code;   /* sbx_err code of a failure ("sandbox", "net"); NULL: "host" */
	const char *netns;  /* NULL or "": ours; else run in /run/netns/NETNS */
	const char *input;  /* NULL: stdin is /dev/null; else these bytes */
	int out_fd;         /* >= 0: the child's stdout and stderr (not captured); -1: captured */
	int timeout_ms;     /* <= 0: HOST_TOOL_TIMEOUT_MS; then the child is killed */
	size_t out_max;     /* captured bytes kept of each (the last ones); 0: 1 MiB */
	bool launcher;      /* setsid + own mount namespace with a tmpfs on /proc/sys/net */
	bool reap_all;      /* reap every other child while waiting: sentries and gofers
	                     * are ours (subreaper) and runsc waits for them to go */
};
/* Defaults, with the error code of the caller. */
#define HOST_RUN_OPTS(code_) { .code = (code_), .out_fd = -1 }

struct host_out {
	int status; /* exit status, or 128 + signal */
	char *out, *errs;
};

void host_out_free(struct host_out *o);
#define cleanup_host_out _cleanup_(host_out_free)

/* Runs argv: argv[0] is an absolute path, or a bare name looked up with
 * host_tool(). Fills o (ro NULL: the defaults). < 0 only when the command
 * could not be run or had to be killed for its time; a non-zero exit is
 * o->status for the caller to judge. */
int host_run(const char *const argv[], const struct host_run_opts *ro, struct host_out *o, sbx_err *err);
/* host_run(), and a non-zero exit is an error "STEP: TOOL exited N: TAIL"
 * with the tail of the tool's stderr (or stdout). */
int host_run_ok(const char *step, const char *const argv[], const struct host_run_opts *ro,
		struct host_out *o, sbx_err *err);

/* The path of tool `name` in the system directories (sbin first), in buf;
 * NULL when there is none. */
const char *host_tool(const char *name, char *buf, size_t bufsz);

/* All of fd from offset 0 (pread), at most its last max bytes, as a string;
 * "" when it cannot be stat'ed, NULL when out of memory. */
char *host_read_fd_all(int fd, size_t max);
/* The last line(s) of s, flattened onto one line, for error messages. */
void host_tail(const char *s, char *out, size_t outsz);
/* host_tail() of a file's last 4 KiB ("" when it cannot be read). */
void host_file_tail(const char *path, char *out, size_t outsz);

/* Sleeps ms, resuming after signals. */
void host_sleep_ms(long ms);

/* Frees n strings and the array. */
void host_strv_free(char **v, size_t n);

/* Object ids gathered from several places (the leftover listings of the
 * sandbox and network code), each once; a name that is not an object id is
 * passed over. Running out of memory is remembered, so that a listing that
 * lost an id cannot pass for complete. Starts zeroed. */
struct host_idset {
	char **v;
	size_t n, cap;
	bool oom;
	size_t *h, hcap; /* v's index + 1 by the id's hash (0: empty): a
			  * thousand sandboxes' ids, mounts and loops were
			  * each compared with every id before */
};
void host_idset_add(struct host_idset *s, const char *id, size_t len);
/* Adds the name of each entry of DIR that is an object id; a DIR that does
 * not exist adds nothing. -1 (errno set) when it cannot be read. */
int host_idset_add_dir(struct host_idset *s, const char *dir);
/* Hands the ids over sorted (free with host_strv_free) and empties the set;
 * -1 when an id was lost to a lack of memory (then the set is freed). */
int host_idset_take(struct host_idset *s, char ***ids, size_t *n);
void host_idset_free(struct host_idset *s);

#endif
