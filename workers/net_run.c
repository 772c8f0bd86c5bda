/* Running ip and nft for the node's network (net.c, net_node.c,
 * net_list.c), the neighbour entries set over rtnetlink, and the growing strings their rulesets and batches are
 * written in (net_int.h). */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* ---- neighbour entries over rtnetlink --------------------------------- */

/* A NETLINK_ROUTE socket in netns (NULL or "" = ours) and dev's index
 * there: the thread enters the namespace for the socket and the lookup and
 * comes back (setns is per thread; a socket stays in the namespace it was
 * made in). */
static int rtnl_open_in(const char *netns, const char *dev, unsigned *ifindex, sbx_err *err)
{
	char path[300];
	cleanup_close int self = -1, there = -1;
	int s = -1, saved = 0;

	if (netns && *netns) {
		snprintf(path, sizeof(path), NETNS_DIR "/%s", netns);
		if ((self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0 ||
		    (there = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return sbx_err_sys(err, "net", "open network namespace %s", netns);
		if (setns(there, CLONE_NEWNET) < 0)
			return sbx_err_sys(err, "net", "enter network namespace %s", netns);
	}
	s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (s < 0)
		saved = errno;
	*ifindex = s >= 0 ? if_nametoindex(dev) : 0;
	if (s >= 0 && !*ifindex)
		saved = errno;
	if (self >= 0 && setns(self, CLONE_NEWNET) < 0) {
		/* never go on in the wrong namespace */
		log_warnx("cannot leave network namespace %s: %s", netns, strerror(errno));
		abort();
	}
	if (s < 0)
		return sbx_err_set(err, 500, "net", "netlink socket: %s", strerror(saved));
	if (!*ifindex) {
		close(s);
		errno = saved;
		return -2; /* no such device */
	}
	return s;
}

int net_neigh(const char *netns, const char *dev, const char *ip, const char *mac, sbx_err *err)
{
	struct {
		struct nlmsghdr h;
		struct ndmsg nd;
		char attrs[64];
	} req;
	struct in_addr a;
	unsigned char ll[6];
	unsigned ifindex = 0;
	char ans[512];
	cleanup_close int s = -1;
	struct rtattr *rta;
	ssize_t r;

	if (inet_pton(AF_INET, ip, &a) != 1)
		return sbx_err_set(err, 500, "net", "neighbour: bad address %.40s", ip);
	if (mac && sscanf(mac, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &ll[0], &ll[1], &ll[2], &ll[3], &ll[4], &ll[5]) != 6)
		return sbx_err_set(err, 500, "net", "neighbour: bad MAC %.40s", mac);
	s = rtnl_open_in(netns, dev, &ifindex, err);
	if (s == -2)
		return mac ? sbx_err_set(err, 500, "net", "neighbour %s: no device %s", ip, dev) : 0;
	if (s < 0)
		return -1;
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_type = mac ? RTM_NEWNEIGH : RTM_DELNEIGH;
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (mac ? NLM_F_CREATE | NLM_F_REPLACE : 0);
	req.h.nlmsg_seq = 1;
	req.nd.ndm_family = AF_INET;
	req.nd.ndm_ifindex = (int)ifindex;
	req.nd.ndm_state = mac ? NUD_PERMANENT : 0;
	req.h.nlmsg_len = NLMSG_LENGTH(sizeof(req.nd));
	rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.h.nlmsg_len));
	rta->rta_type = NDA_DST;
	rta->rta_len = RTA_LENGTH(sizeof(a));
	memcpy(RTA_DATA(rta), &a, sizeof(a));
	req.h.nlmsg_len = NLMSG_ALIGN(req.h.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	if (mac) {
		rta = (struct rtattr *)((char *)&req + req.h.nlmsg_len);
		rta->rta_type = NDA_LLADDR;
		rta->rta_len = RTA_LENGTH(sizeof(ll));
		memcpy(RTA_DATA(rta), ll, sizeof(ll));
		req.h.nlmsg_len += RTA_ALIGN(rta->rta_len);
	}
	if (send(s, &req, req.h.nlmsg_len, 0) < 0)
		return sbx_err_sys(err, "net", "neighbour %s dev %s: send", ip, dev);
	while ((r = recv(s, ans, sizeof(ans), 0)) < 0 && errno == EINTR)
		;
	if (r < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)))
		return sbx_err_set(err, 500, "net", "neighbour %s dev %s: no answer", ip, dev);
	{
		struct nlmsghdr *h = (struct nlmsghdr *)ans;
		int e = h->nlmsg_type == NLMSG_ERROR ? -((struct nlmsgerr *)NLMSG_DATA(h))->error : EPROTO;
		if (e == 0 || (!mac && e == ENOENT))
			return 0;
		return sbx_err_set(err, 500, "net", "neighbour %s dev %s %s: %s", ip, dev, mac ? "replace" : "del",
				   strerror(e));
	}
}
