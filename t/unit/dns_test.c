/* Proves: a query dns_build_query makes is one dns_parse_query reads back
 * (name, type A); dns_parse_answer takes an answer to the name it asked
 * (CNAMEs followed, addresses sorted without duplicates, the TTL the least
 * of the chain's clamped to 5..3600 s, NXDOMAIN's rcode kept) and refuses
 * one to another name or a query; what a start resolved survives
 * egress_resolved_save/_load for the same policy only, and a short or
 * long file is refused (the node then asks the resolver again). */
#include "config.h"
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "dns.h"
#include "egress.h"
#include "../tap.h"

static size_t put_name(uint8_t *m, const char *name)
{
	size_t o = 0;
	const char *p = name;

	while (*p) {
		size_t l = strcspn(p, ".");
		m[o++] = (uint8_t)l;
		memcpy(m + o, p, l);
		o += l;
		p += l + (p[l] == '.');
	}
	m[o++] = 0;
	return o;
}

static size_t put_rr(uint8_t *m, const char *owner, uint16_t type, uint32_t ttl, const uint8_t *rd, uint16_t rdlen)
{
	size_t o = put_name(m, owner);

	m[o++] = (uint8_t)(type >> 8);
	m[o++] = (uint8_t)type;
	m[o++] = 0;
	m[o++] = 1;
	m[o++] = (uint8_t)(ttl >> 24);
	m[o++] = (uint8_t)(ttl >> 16);
	m[o++] = (uint8_t)(ttl >> 8);
	m[o++] = (uint8_t)ttl;
	m[o++] = (uint8_t)(rdlen >> 8);
	m[o++] = (uint8_t)rdlen;
	memcpy(m + o, rd, rdlen);
	return o + rdlen;
}

/* an answer to qname with rcode and n records (put by the caller after) */
static size_t put_head(uint8_t *m, const char *qname, int rcode, int n)
{
	static const uint8_t qtail[] = { 0, 1, 0, 1 };
	uint8_t h[12] = { 0x12, 0x34, 0x81, (uint8_t)(0x80 | rcode), 0, 1, 0, (uint8_t)n, 0, 0, 0, 0 };
	size_t o;

	memcpy(m, h, 12);
	o = 12 + put_name(m + 12, qname);
	memcpy(m + o, qtail, 4);
	return o + 4;
}

int main(void)
{
	uint8_t m[512], cname[64];
	char name[256];
	uint16_t qtype = 0;
	size_t qend = 0, o;
	struct dns_addrs a;
	int ql;

	plan(16);

	ql = dns_build_query(7, "api.example.test", m, sizeof(m));
	ok(ql > 12 && dns_parse_query(m, (size_t)ql, name, sizeof(name), &qtype, &qend) == 0 &&
		   !strcmp(name, "api.example.test") && qtype == 1 && qend == (size_t)ql,
	   "a query built for api.example.test reads back as an A question for it");
	ok(dns_build_query(7, "a..b", m, sizeof(m)) < 0, "an empty label is not a name to ask");

	/* api.example.test CNAME edge.example.test; two A, one twice, TTLs 300/40/900 */
	o = put_head(m, "api.example.test", 0, 4);
	o += put_rr(m + o, "api.example.test", 5, 300, cname, (uint16_t)put_name(cname, "edge.example.test"));
	o += put_rr(m + o, "edge.example.test", 1, 40, (const uint8_t *)"\x0a\x00\x00\x09", 4);
	o += put_rr(m + o, "edge.example.test", 1, 900, (const uint8_t *)"\x0a\x00\x00\x02", 4);
	o += put_rr(m + o, "edge.example.test", 1, 900, (const uint8_t *)"\x0a\x00\x00\x09", 4);
	ok(dns_parse_answer(m, o, "api.example.test", &a) == 0, "an answer through a CNAME parses");
	is_int((int)a.n, 2, "...two addresses (one given twice)");
	ok(a.n == 2 && a.a[0] == 0x0a000002 && a.a[1] == 0x0a000009, "...sorted");
	is_int((int)a.ttl, 40, "...the least TTL of the chain");
	is_int(a.rcode, 0, "...NOERROR");
	ok(dns_parse_answer(m, o, "other.example.test", &a) < 0, "the same answer for another name is refused");
	m[2] &= 0x7f;
	ok(dns_parse_answer(m, o, "api.example.test", &a) < 0, "a query (QR clear) is not an answer");

	o = put_head(m, "x.example.test", 0, 1);
	o += put_rr(m + o, "x.example.test", 1, 1, (const uint8_t *)"\x01\x02\x03\x04", 4);
	ok(dns_parse_answer(m, o, "x.example.test", &a) == 0 && a.ttl == DNS_TTL_MIN, "a TTL of 1 s is kept as 5");
	o = put_head(m, "gone.example.test", 3, 0);
	ok(dns_parse_answer(m, o, "gone.example.test", &a) == 0 && a.rcode == 3 && a.n == 0 && a.ttl == DNS_NEG_TTL,
	   "NXDOMAIN: rcode 3, no addresses, asked again after the negative TTL");
	ok(dns_parse_answer(m, o - 3, "gone.example.test", &a) < 0, "a cut answer is refused");

	{
		static struct sbx_egress p, q;
		static struct dns_addrs res[SBX_EGRESS_MAX_ALLOW], back[SBX_EGRESS_MAX_ALLOW];
		char path[] = "/tmp/sbx-dns-test-XXXXXX";
		int fd = mkstemp(path);
		FILE *f;

		p.mode = SBX_EGRESS_RESTRICTED;
		p.n = 2;
		snprintf(p.allow[1].host, sizeof(p.allow[1].host), "api.example.test");
		res[1].n = 2;
		res[1].a[0] = 0x0a000002;
		res[1].a[1] = 0x0a000009;
		res[1].ttl = 40;
		ok(fd >= 0 && egress_resolved_save(path, &p, res) == 0 && egress_resolved_load(path, &p, back) == 0 &&
			   !memcmp(res, back, 2 * sizeof(res[0])),
		   "what a start resolved is loaded back as it was saved");
		q = p;
		q.n = 3;
		ok(egress_resolved_load(path, &q, back) < 0, "...not for a policy of another length");
		f = fopen(path, "ae");
		if (f) {
			fputc(0, f);
			fclose(f);
		}
		ok(egress_resolved_load(path, &p, back) < 0, "a file with more than it should hold is refused");
		if (truncate(path, 20) != 0)
			diag("truncate failed");
		ok(egress_resolved_load(path, &p, back) < 0, "a cut file is refused");
		if (fd >= 0) {
			close(fd);
			unlink(path);
		}
	}
	return done_testing();
}
