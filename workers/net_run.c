/* Running ip and nft for the node's network (net.c, net_node.c,
 * net_list.c), and the growing strings their rulesets and batches are
 * written in (net_int.h). */
#include "config.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cleanup.h"
#include "err.h"
#include "host.h"
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
	static const char *const argv[] = { "nft", "-f", "-", NULL };
	cleanup_host_out struct host_out o = { 0 };

	if (net_run_ok(uplink(c), argv, ruleset, &o, err) < 0)
		return -1;
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
