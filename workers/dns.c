/* DNS for egress (dns.h). Only what the node needs: A queries and their
 * answers, read defensively (every length checked, compression pointers
 * only backwards and bounded), since answers come from the network and
 * queries from sandboxes. */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "dns.h"

#define T_A 1
#define T_CNAME 5

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

int dns_upstream(const char *spec, struct sockaddr_in *out, sbx_err *err)
{
	char buf[64] = "";
	char *colon;

	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons(53);
	if (spec && *spec) {
		snprintf(buf, sizeof(buf), "%s", spec);
	} else {
		cleanup_fclose FILE *f = fopen("/etc/resolv.conf", "re");
		char line[256], ns[64];
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, " nameserver %63s", ns) == 1 && strchr(ns, '.') && !strchr(ns, ':')) {
				snprintf(buf, sizeof(buf), "%s", ns);
				break;
			}
		if (!buf[0])
			return sbx_err_set(err, 500, "dns_config", "no IPv4 nameserver in /etc/resolv.conf (set net_resolver)");
	}
	colon = strchr(buf, ':');
	if (colon) {
		long p = strtol(colon + 1, NULL, 10);
		if (p < 1 || p > 65535)
			return sbx_err_set(err, 500, "dns_config", "net_resolver '%s': bad port", buf);
		out->sin_port = htons((uint16_t)p);
		*colon = 0;
	}
	if (inet_pton(AF_INET, buf, &out->sin_addr) != 1)
		return sbx_err_set(err, 500, "dns_config", "net_resolver '%s' is not A.B.C.D[:PORT]", buf);
	return 0;
}

int dns_socket_in(const char *netns, int type, sbx_err *err)
{
	char p[300];
	int self = -1, ns = -1, fd, e;

	if (!netns || !*netns) {
		fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		return fd < 0 ? sbx_err_sys(err, "dns", "socket") : fd;
	}
	snprintf(p, sizeof(p), "/run/netns/%s", netns);
	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	ns = open(p, O_RDONLY | O_CLOEXEC);
	if (self < 0 || ns < 0 || setns(ns, CLONE_NEWNET) < 0) {
		e = errno;
		if (self >= 0)
			close(self);
		if (ns >= 0)
			close(ns);
		errno = e;
		return sbx_err_sys(err, "dns", "entering netns %s", netns);
	}
	fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	e = errno;
	/* back home: a failure here would leave us in the wrong namespace */
	if (setns(self, CLONE_NEWNET) < 0)
		abort();
	close(self);
	close(ns);
	errno = e;
	return fd < 0 ? sbx_err_sys(err, "dns", "socket in %s", netns) : fd;
}

/* Reads a (possibly compressed) name at *off into out (lowercase, dotted);
 * advances *off past it in the message. */
static int read_name(const uint8_t *m, size_t len, size_t *off, char *out, size_t outsz)
{
	size_t o = *off, w = 0, end = 0;
	int jumps = 0;

	for (;;) {
		if (o >= len)
			return -1;
		uint8_t l = m[o];
		if ((l & 0xc0) == 0xc0) {
			if (o + 1 >= len || ++jumps > 16)
				return -1;
			size_t to = (size_t)(l & 0x3f) << 8 | m[o + 1];
			if (!end)
				end = o + 2;
			if (to >= o)
				return -1; /* only backwards: no loops */
			o = to;
			continue;
		}
		if (l & 0xc0)
			return -1;
		if (l == 0) {
			if (!end)
				end = o + 1;
			break;
		}
		if (o + 1 + l > len || w + l + 2 > outsz)
			return -1;
		if (w)
			out[w++] = '.';
		for (size_t i = 0; i < l; i++) {
			char c = (char)m[o + 1 + i];
			out[w++] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
		}
		o += 1 + l;
	}
	if (outsz == 0)
		return -1;
	out[w] = 0;
	*off = end;
	return 0;
}

int dns_parse_query(const uint8_t *m, size_t len, char *name, size_t namesz, uint16_t *qtype, size_t *qend)
{
	size_t off = 12;

	if (len < 12 || (m[2] & 0x80) || rd16(m + 4) != 1 || (m[2] & 0x78) != 0)
		return -1; /* a response, not one question, or not a standard query */
	if (read_name(m, len, &off, name, namesz) < 0 || off + 4 > len)
		return -1;
	*qtype = rd16(m + off);
	if (rd16(m + off + 2) != 1)
		return -1; /* class IN only */
	*qend = off + 4;
	return 0;
}

int dns_build_answer(const uint8_t *m, size_t qend, int rcode, const struct dns_addrs *a, uint16_t qtype,
		     uint8_t *out, size_t outsz)
{
	size_t n = (rcode == 0 && a && qtype == T_A) ? a->n : 0, o = qend;

	if (qend + n * 16 > outsz)
		return -1;
	memcpy(out, m, qend);
	out[2] = (uint8_t)(0x80 | (m[2] & 0x01)); /* QR, RD copied */
	out[3] = (uint8_t)(0x80 | (rcode & 0x0f)); /* RA */
	out[6] = (uint8_t)(n >> 8);
	out[7] = (uint8_t)n;
	memset(out + 8, 0, 4); /* no authority, no additional */
	for (size_t i = 0; i < n; i++) {
		uint8_t *r = out + o;
		r[0] = 0xc0;
		r[1] = 12; /* the question's name */
		r[2] = 0;
		r[3] = T_A;
		r[4] = 0;
		r[5] = 1;
		r[6] = (uint8_t)(a->ttl >> 24);
		r[7] = (uint8_t)(a->ttl >> 16);
		r[8] = (uint8_t)(a->ttl >> 8);
		r[9] = (uint8_t)a->ttl;
		r[10] = 0;
		r[11] = 4;
		r[12] = (uint8_t)(a->a[i] >> 24);
		r[13] = (uint8_t)(a->a[i] >> 16);
		r[14] = (uint8_t)(a->a[i] >> 8);
		r[15] = (uint8_t)a->a[i];
		o += 16;
	}
	return (int)o;
}

int dns_build_query(uint16_t id, const char *name, uint8_t *out, size_t outsz)
{
	size_t o = 12;
	const char *p = name;

	if (outsz < 12 + strlen(name) + 2 + 4)
		return -1;
	memset(out, 0, 12);
	out[0] = (uint8_t)(id >> 8);
	out[1] = (uint8_t)id;
	out[2] = 0x01; /* RD */
	out[5] = 1;
	while (*p) {
		size_t l = strcspn(p, ".");
		if (l == 0 || l > 63)
			return -1;
		out[o++] = (uint8_t)l;
		memcpy(out + o, p, l);
		o += l;
		p += l;
		if (*p == '.')
			p++;
	}
	out[o++] = 0;
	out[o++] = 0;
	out[o++] = T_A;
	out[o++] = 0;
	out[o++] = 1;
	return (int)o;
}

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return a < b ? -1 : a > b;
}

int dns_parse_answer(const uint8_t *m, size_t len, const char *qname, struct dns_addrs *out)
{
	char want[256], name[256], target[256];
	size_t off = 12;
	uint16_t an;
	uint32_t ttl = DNS_TTL_MAX;

	if (len < 12 || !(m[2] & 0x80))
		return -1;
	out->n = 0;
	out->rcode = m[3] & 0x0f;
	an = rd16(m + 6);
	if (rd16(m + 4) != 1 || read_name(m, len, &off, name, sizeof(name)) < 0 || strcmp(name, qname) || off + 4 > len)
		return -1;
	off += 4;
	snprintf(want, sizeof(want), "%s", qname);
	/* CNAMEs come before what they point to, in order, in practice; two
	 * passes cover an answer that lists them the other way round */
	for (int pass = 0; pass < 2; pass++) {
		size_t o = off;
		for (uint16_t i = 0; i < an; i++) {
			uint16_t type, rdlen;
			uint32_t t;
			if (read_name(m, len, &o, name, sizeof(name)) < 0 || o + 10 > len)
				return -1;
			type = rd16(m + o);
			t = rd32(m + o + 4);
			rdlen = rd16(m + o + 8);
			o += 10;
			if (o + rdlen > len)
				return -1;
			if (!strcmp(name, want)) {
				if (type == T_CNAME) {
					size_t r = o;
					if (read_name(m, len, &r, target, sizeof(target)) < 0)
						return -1;
					snprintf(want, sizeof(want), "%s", target);
					if (t < ttl)
						ttl = t;
				} else if (type == T_A && rdlen == 4 && pass == 1 && out->n < DNS_MAX_ADDRS) {
					out->a[out->n++] = rd32(m + o);
					if (t < ttl)
						ttl = t;
				}
			}
			o += rdlen;
		}
	}
	if (out->n > 1) {
		size_t k = 1;
		qsort(out->a, out->n, sizeof(out->a[0]), cmp_u32);
		for (size_t i = 1; i < out->n; i++)
			if (out->a[i] != out->a[k - 1])
				out->a[k++] = out->a[i];
		out->n = k;
	}
	if (out->n == 0)
		ttl = DNS_NEG_TTL;
	out->ttl = ttl < DNS_TTL_MIN ? DNS_TTL_MIN : ttl > DNS_TTL_MAX ? DNS_TTL_MAX : ttl;
	return 0;
}

int dns_resolve(const char *netns, const struct sockaddr_in *up, const char *const *names, size_t n,
		struct dns_addrs *out, int timeout_ms, sbx_err *err)
{
	cleanup_close int fd = -1;
	uint16_t ids[64];
	size_t left = n;
	long long deadline = sbx_now_ms() + timeout_ms, resend = 0;

	if (n > 64)
		return sbx_err_set(err, 500, "dns", "too many names at once");
	for (size_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		out[i].rcode = -1;
		out[i].ttl = DNS_NEG_TTL;
	}
	if (n == 0)
		return 0;
	fd = dns_socket_in(netns, SOCK_DGRAM, err);
	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)up, sizeof(*up)) < 0)
		return sbx_err_sys(err, "dns", "connect to the resolver");
	if (getrandom(ids, sizeof(ids), 0) != (ssize_t)sizeof(ids))
		return sbx_err_sys(err, "dns", "getrandom");
	while (left > 0) {
		long long now = sbx_now_ms();
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint8_t buf[1500];
		ssize_t r;

		if (now >= deadline)
			break;
		if (now >= resend) {
			/* (re)send what has no answer yet; UDP may lose it */
			for (size_t i = 0; i < n; i++) {
				int ql;
				if (out[i].rcode != -1)
					continue;
				ql = dns_build_query(ids[i], names[i], buf, sizeof(buf));
				if (ql > 0 && send(fd, buf, (size_t)ql, 0) < 0 && errno != EAGAIN)
					return sbx_err_sys(err, "dns", "send to the resolver");
			}
			resend = now + 700;
		}
		if (poll(&pfd, 1, (int)((resend < deadline ? resend : deadline) - now)) <= 0)
			continue;
		while ((r = recv(fd, buf, sizeof(buf), 0)) > 0) {
			uint16_t id;
			if (r < 12)
				continue;
			id = rd16(buf);
			for (size_t i = 0; i < n; i++) {
				struct dns_addrs a;
				if (out[i].rcode != -1 || ids[i] != id)
					continue;
				if (dns_parse_answer(buf, (size_t)r, names[i], &a) == 0) {
					out[i] = a;
					left--;
				}
				break;
			}
		}
	}
	return 0;
}
