/* The node agent's DNS forwarder (egress_node.h, egress_node_int.h).
 *
 * It listens on the gateway address, UDP and TCP 53, in the
 * uplink netns; input lets only open and restricted sandboxes reach it
 * (node_allow, by nat4 membership). A query is answered by who sent it (its
 * source address, checked on the veth): restricted -> an allowed name gets
 * the addresses the node resolved for it (the ones its rules allow), any
 * other name REFUSED; open -> relayed to the node's resolver; anyone else
 * -> REFUSED. Over TCP (RFC 7766: what a resolver retries with when a UDP
 * answer came truncated) the same, each message after its 2-byte length;
 * an open sandbox's query still goes to the resolver over UDP. */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include "clock.h"
#include "dns.h"
#include "egress_node_int.h"
#include "log.h"

/* The answer to a query from the sandbox at ip (host order), built in out:
 * its length; 0 when the query goes to the resolver (open); -1 when it is
 * dropped (not a query we answer). */
static int judge(struct egress_node *e, const uint8_t *q, size_t len, uint32_t ip, uint8_t *out, size_t outsz)
{
	char name[256];
	uint16_t qtype;
	size_t qend, i;
	struct eg_sb *s = egress_node_find_ip(e, ip);
	struct dns_addrs a;

	if (dns_parse_query(q, len, name, sizeof(name), &qtype, &qend) < 0)
		return -1;
	if (!s || s->p.mode == SBX_EGRESS_DENY_ALL)
		return dns_build_answer(q, qend, 5, NULL, qtype, out, outsz);
	if (s->p.mode == SBX_EGRESS_OPEN)
		return e->up >= 0 ? 0 : dns_build_answer(q, qend, 2, NULL, qtype, out, outsz);
	for (i = 0; i < s->p.n; i++)
		if (s->p.allow[i].host[0] && !strcmp(s->p.allow[i].host, name))
			break;
	if (i == s->p.n)
		return dns_build_answer(q, qend, 5, NULL, qtype, out, outsz); /* REFUSED: not an allowed name */
	/* the addresses its rules allow; NODATA for other types */
	a = s->res[i];
	return dns_build_answer(q, qend, 0, &a, qtype, out, outsz);
}

static void relay_out(struct egress_node *e, uint8_t *q, size_t len, const struct sockaddr_in *from, int conn)
{
	long long now = sbx_now_ms();

	for (int tries = 0; tries < RELAY_SLOTS; tries++) {
		uint16_t k = (uint16_t)(e->next_slot++ % RELAY_SLOTS);
		struct relay_slot *sl = &e->slots[k];
		if (sl->used && sl->until > now)
			continue;
		sl->used = true;
		sl->their_id = (uint16_t)(q[0] << 8 | q[1]);
		if (from)
			sl->from = *from;
		sl->conn = conn;
		sl->gen = conn >= 0 ? e->tcp[conn].gen : 0;
		sl->until = now + RELAY_MS;
		/* our id: the slot in the low byte, a random high byte (the
		 * answer must also come from the resolver: the socket is
		 * connected) */
		{
			uint8_t rnd = 0;
			if (getrandom(&rnd, 1, GRND_NONBLOCK) != 1)
				rnd = (uint8_t)now;
			sl->our_id = (uint16_t)(rnd << 8 | k);
		}
		q[0] = (uint8_t)(sl->our_id >> 8);
		q[1] = (uint8_t)sl->our_id;
		(void)send(e->up, q, len, 0);
		return;
	}
}

static void on_query(struct egress_node *e)
{
	uint8_t q[DNS_MSG_MAX], out[DNS_MSG_MAX];
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t r;

	while ((r = recvfrom(e->srv, q, sizeof(q), 0, (struct sockaddr *)&from, &fl)) > 0) {
		int n = judge(e, q, (size_t)r, ntohl(from.sin_addr.s_addr), out, sizeof(out));
		if (n > 0)
			(void)sendto(e->srv, out, (size_t)n, 0, (const struct sockaddr *)&from, sizeof(from));
		else if (n == 0)
			relay_out(e, q, (size_t)r, &from, -1);
		fl = sizeof(from);
	}
}

/* ---- over TCP ---- */

static void tcp_close(struct egress_node *e, struct tcp_conn *c)
{
	(void)e;
	if (c->fd >= 0)
		close(c->fd); /* leaves the epoll set with it */
	c->fd = -1;
	c->have = 0;
}

/* One message, after its length. Answers are small and the socket's
 * buffer is empty while we answer in turn: one that does not go out whole
 * ends the connection (the resolver asks again). */
static void tcp_send(struct egress_node *e, struct tcp_conn *c, const uint8_t *m, size_t len)
{
	uint8_t hdr[2] = { (uint8_t)(len >> 8), (uint8_t)len };
	struct iovec iov[2] = { { hdr, 2 }, { (void *)m, len } };

	if (writev(c->fd, iov, 2) != (ssize_t)(len + 2))
		tcp_close(e, c);
}

static void on_tcp_accept(struct egress_node *e)
{
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		struct tcp_conn *c = NULL;
		int fd = accept4(e->tsrv, (struct sockaddr *)&from, &fl, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		for (int i = 0; i < TCP_CONNS && !c; i++)
			if (e->tcp[i].fd < 0)
				c = &e->tcp[i];
		if (!c) {
			close(fd); /* all busy: the resolver tries again */
			continue;
		}
		c->fd = fd;
		c->ip = ntohl(from.sin_addr.s_addr);
		c->gen = ++e->tcp_gen;
		c->have = 0;
		c->until = sbx_now_ms() + TCP_IDLE_MS;
		{
			struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &c->tag };
			if (epoll_ctl(e->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
				tcp_close(e, c);
		}
	}
}

static void on_tcp_data(struct egress_node *e, struct tcp_conn *c)
{
	uint8_t out[DNS_MSG_MAX];

	for (;;) {
		ssize_t r = read(c->fd, c->buf + c->have, sizeof(c->buf) - c->have);
		size_t want;

		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
			tcp_close(e, c);
			return;
		}
		if (r < 0)
			return;
		c->have += (size_t)r;
		c->until = sbx_now_ms() + TCP_IDLE_MS;
		/* every whole message in the buffer (a resolver may send several) */
		while (c->fd >= 0 && c->have >= 2 && c->have >= 2 + (want = (size_t)(c->buf[0] << 8 | c->buf[1]))) {
			int n = want > 0 ? judge(e, c->buf + 2, want, c->ip, out, sizeof(out)) : -1;
			if (n > 0)
				tcp_send(e, c, out, (size_t)n);
			else if (n == 0)
				relay_out(e, c->buf + 2, want, NULL, (int)(c - e->tcp));
			if (c->fd < 0)
				return;
			memmove(c->buf, c->buf + 2 + want, c->have - 2 - want);
			c->have -= 2 + want;
		}
		if (c->have >= 2 && 2 + (size_t)(c->buf[0] << 8 | c->buf[1]) > sizeof(c->buf)) {
			tcp_close(e, c); /* longer than any query we answer */
			return;
		}
	}
}

static void on_upstream(struct egress_node *e)
{
	uint8_t m[DNS_MSG_MAX];
	ssize_t r;

	while ((r = recv(e->up, m, sizeof(m), 0)) > 0) {
		uint16_t k;
		struct relay_slot *sl;
		if (r < 12)
			continue;
		k = (uint16_t)(m[0] << 8 | m[1]);
		sl = &e->slots[k % RELAY_SLOTS];
		if (!sl->used || sl->our_id != k || sl->until < sbx_now_ms())
			continue;
		sl->used = false;
		m[0] = (uint8_t)(sl->their_id >> 8);
		m[1] = (uint8_t)sl->their_id;
		if (sl->conn < 0) {
			(void)sendto(e->srv, m, (size_t)r, 0, (const struct sockaddr *)&sl->from, sizeof(sl->from));
		} else {
			struct tcp_conn *c = &e->tcp[sl->conn];
			if (c->fd >= 0 && c->gen == sl->gen)
				tcp_send(e, c, m, (size_t)r);
		}
	}
}

/* Idle TCP connections close; when the next one is due (ms), or -1. */
long long egress_fwd_tick(struct egress_node *e, long long now)
{
	long long next = -1;

	for (int i = 0; i < TCP_CONNS; i++) {
		struct tcp_conn *c = &e->tcp[i];
		if (c->fd < 0)
			continue;
		if (c->until <= now) {
			tcp_close(e, c);
			continue;
		}
		if (next < 0 || c->until - now < next)
			next = c->until - now;
	}
	return next;
}

static struct tcp_conn *conn_of(struct egress_node *e, void *ptr)
{
	for (int i = 0; i < TCP_CONNS; i++)
		if (ptr == &e->tcp[i].tag)
			return &e->tcp[i];
	return NULL;
}

bool egress_fwd_owns(struct egress_node *e, void *ptr)
{
	return ptr == &e->srv_tag || ptr == &e->up_tag || ptr == &e->tsrv_tag || conn_of(e, ptr);
}

void egress_fwd_on_event(struct egress_node *e, void *ptr)
{
	struct tcp_conn *c;

	if (ptr == &e->srv_tag)
		on_query(e);
	else if (ptr == &e->up_tag)
		on_upstream(e);
	else if (ptr == &e->tsrv_tag)
		on_tcp_accept(e);
	else if ((c = conn_of(e, ptr)) && c->fd >= 0)
		on_tcp_data(e, c);
}

void egress_fwd_open(struct egress_node *e)
{
	sbx_err err = SBX_ERR_INIT;
	struct sockaddr_in gw = { .sin_family = AF_INET, .sin_port = htons(53) };
	char net[32];
	char *slash;
	struct in_addr in;

	/* the gateway: the subnet's first host */
	snprintf(net, sizeof(net), "%s", e->c->subnet ? e->c->subnet : "");
	slash = strchr(net, '/');
	if (slash)
		*slash = 0;
	if (inet_pton(AF_INET, net, &in) != 1) {
		log_warnx("DNS forwarder: bad subnet '%s': not started", e->c->subnet ? e->c->subnet : "");
		return;
	}
	{
		long len = slash ? strtol(slash + 1, NULL, 10) : 32;
		uint32_t mask = len <= 0 ? 0 : 0xffffffffu << (32 - len);
		gw.sin_addr.s_addr = htonl((ntohl(in.s_addr) & mask) + 1);
	}
	e->srv = dns_socket_in(e->c->uplink_netns, SOCK_DGRAM, &err);
	/* the agent we replace (a reload) may not have closed its socket yet */
	if (e->srv >= 0)
		(void)setsockopt(e->srv, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
	if (e->srv < 0 || bind(e->srv, (struct sockaddr *)&gw, sizeof(gw)) < 0) {
		log_warnx("DNS forwarder: cannot listen on the gateway: %s", e->srv < 0 ? err.msg : strerror(errno));
		if (e->srv >= 0)
			close(e->srv);
		e->srv = -1;
		return;
	}
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &e->srv_tag };
		epoll_ctl(e->ep, EPOLL_CTL_ADD, e->srv, &ev);
	}
	/* TCP beside it; without, resolvers still have UDP */
	e->tsrv = dns_socket_in(e->c->uplink_netns, SOCK_STREAM, &err);
	if (e->tsrv >= 0)
		(void)setsockopt(e->tsrv, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
	if (e->tsrv < 0 || bind(e->tsrv, (struct sockaddr *)&gw, sizeof(gw)) < 0 || listen(e->tsrv, 64) < 0) {
		log_warnx("DNS forwarder: no TCP on the gateway: %s", e->tsrv < 0 ? err.msg : strerror(errno));
		if (e->tsrv >= 0)
			close(e->tsrv);
		e->tsrv = -1;
		sbx_err_clear(&err);
	} else {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &e->tsrv_tag };
		epoll_ctl(e->ep, EPOLL_CTL_ADD, e->tsrv, &ev);
	}
	if (dns_upstream(e->c->resolver, &e->upstream, &err) < 0 || (e->up = dns_socket_in(e->c->uplink_netns, SOCK_DGRAM, &err)) < 0 ||
	    connect(e->up, (struct sockaddr *)&e->upstream, sizeof(e->upstream)) < 0) {
		log_warnx("DNS forwarder: no resolver for open sandboxes: %s", err.msg[0] ? err.msg : strerror(errno));
		if (e->up >= 0)
			close(e->up);
		e->up = -1;
	} else {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &e->up_tag };
		epoll_ctl(e->ep, EPOLL_CTL_ADD, e->up, &ev);
	}
	log_info("DNS forwarder listening on %s:53", inet_ntoa(gw.sin_addr));
}


void egress_fwd_close(struct egress_node *e)
{
	if (e->srv >= 0)
		close(e->srv);
	if (e->up >= 0)
		close(e->up);
	if (e->tsrv >= 0)
		close(e->tsrv);
	for (int i = 0; i < TCP_CONNS; i++)
		tcp_close(e, &e->tcp[i]);
}
