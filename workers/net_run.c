/* Running ip and nft for the node's network (net.c, net_node.c,
 * net_list.c): ip as a process, nft in-process through libnftables, a
 * thread's trips into a network namespace, and the growing strings their
 * rulesets and batches are written in (net_int.h). */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cleanup.h"
#include "err.h"
#include "host.h"
#include "log.h"
#include "net.h"
#include "net_int.h"

/* ---- running ip and nft ------------------------------------------------ */

/* Runs argv[0] (ip or nft) in netns (NULL or "" = ours) with `input` on stdin
 * (host_run); fills o. Returns < 0 only when it could not run the command.
 * All of the output is kept: `nft -j list` grows with the sandboxes. */
int net_run(const char *netns, const char *const argv[], const char *input,
		   struct host_out *o, sbx_err *err)
{
	struct host_run_opts ro = HOST_RUN_OPTS("net");

	ro.netns = netns;
	ro.input = input;
	ro.out_max = SIZE_MAX;
	return host_run(argv, &ro, o, err);
}

/* The first line of a command's stderr, for error messages. */
const char *first_line(const char *s, char *buf, size_t len)
{
	size_t n = 0;

	while (s && s[n] && s[n] != '\n' && n + 1 < len) {
		buf[n] = s[n];
		n++;
	}
	buf[n] = 0;
	return buf;
}

/* Like net_run, but a non-zero exit is an error naming the command. */
int net_run_ok(const char *netns, const char *const argv[], const char *input,
		      struct host_out *o, sbx_err *err)
{
	char line[300];

	if (net_run(netns, argv, input, o, err) < 0)
		return -1;
	if (o->status != 0) {
		sbx_err_set(err, 500, "net", "%s %s%s%s failed (exit %d): %s", argv[0], argv[1],
			    argv[2] ? " " : "", argv[2] ? argv[2] : "", o->status,
			    first_line(o->errs, line, sizeof(line)));
		host_out_free(o);
		return -1;
	}
	return 0;
}

const char *uplink(const struct net_config *c)
{
	return c->uplink_netns && *c->uplink_netns ? c->uplink_netns : NULL;
}

int net_nft_apply(const struct net_config *c, const char *ruleset, sbx_err *err)
{
	cleanup_host_out struct host_out o = { 0 };
	char line[300];

	if (net_nft(uplink(c), ruleset, false, &o, err) < 0)
		return -1;
	if (o.status != 0)
		return sbx_err_set(err, 500, "net", "nft -f - failed (exit %d): %s", o.status,
				   first_line(o.errs, line, sizeof(line)));
	return 0;
}

int ip_batch(const char *netns, const char *batch, sbx_err *err)
{
	static const char *const argv[] = { "ip", "-batch", "-", NULL };
	cleanup_host_out struct host_out o = { 0 };

	return net_run_ok(netns, argv, batch, &o, err);
}

/* ---- growing strings ----------------------------------------------------- */

void bprintf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		n = vsnprintf(b->s ? b->s + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t ncap = (b->cap + (size_t)n + 1) * 2;
		char *p = realloc(b->s, ncap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->s = p;
		b->cap = ncap;
	}
}

/* ---- network namespaces of the calling thread -------------------------- */

/* Enters netns (NULL or "" = stay) in the calling thread: setns is per
 * thread, and a socket stays in the namespace it was made in. Returns the
 * descriptor netns_leave needs to come back (-2: nothing was entered), -1
 * on error. */
int netns_enter(const char *netns, sbx_err *err)
{
	char path[300];
	cleanup_close int there = -1;
	int self;

	if (!netns || !*netns)
		return -2;
	snprintf(path, sizeof(path), NETNS_DIR "/%s", netns);
	if ((self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
		return sbx_err_sys(err, "net", "open network namespace %s", "of this thread");
	if ((there = open(path, O_RDONLY | O_CLOEXEC)) < 0 || setns(there, CLONE_NEWNET) < 0) {
		int e = errno;
		close(self);
		errno = e;
		return sbx_err_sys(err, "net", "enter network namespace %s", netns);
	}
	return self;
}

void netns_leave(int self, const char *netns)
{
	if (self < 0)
		return;
	if (setns(self, CLONE_NEWNET) < 0) {
		/* never go on in the wrong namespace */
		log_warnx("cannot leave network namespace %s: %s", netns, strerror(errno));
		abort();
	}
	close(self);
}

/* ---- nft in-process ------------------------------------------------------ */

/* An `nft` process cost ~40 ms of a loaded node (its start: a dozen shared
 * libraries, xtables) for a transaction the kernel does in ~1: four of them
 * in every create. The library runs the same parser and the same
 * transaction; a context lives for one call, so its netlink socket is made,
 * and gone, inside the namespace entered for it. */
int net_nft(const char *netns, const char *cmd, bool json, struct host_out *o, sbx_err *err)
{
	struct nft_ctx *ctx;
	const char *out, *errs;
	int self, rc;

	memset(o, 0, sizeof(*o));
	if ((self = netns_enter(netns, err)) == -1)
		return -1;
	ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx || nft_ctx_buffer_output(ctx) < 0 || nft_ctx_buffer_error(ctx) < 0) {
		if (ctx)
			nft_ctx_free(ctx);
		netns_leave(self, netns);
		return sbx_err_set(err, 500, "net", "nft: cannot make a libnftables context");
	}
	if (json)
		nft_ctx_output_set_flags(ctx, NFT_CTX_OUTPUT_JSON);
	rc = nft_run_cmd_from_buffer(ctx, cmd);
	out = nft_ctx_get_output_buffer(ctx);
	errs = nft_ctx_get_error_buffer(ctx);
	o->status = rc == 0 ? 0 : 1;
	o->out = strdup(out ? out : "");
	o->errs = strdup(errs ? errs : "");
	nft_ctx_free(ctx);
	netns_leave(self, netns);
	if (!o->out || !o->errs) {
		host_out_free(o);
		return sbx_err_set(err, 500, "net", "out of memory");
	}
	return 0;
}
