/* DNS for egress: the few pieces of the wire format the node needs, a
 * resolver for the hostnames of restricted allow lists (the node's own
 * upstream, asked from the uplink netns), and the forwarder each sandbox's
 * /etc/resolv.conf names: it listens on the gateway address (UDP 53) and
 * answers a restricted sandbox only for the names it may reach, with the
 * very addresses its rules allow; an open sandbox's queries go upstream.
 * doc/network.md, "Hostnames". */
#ifndef SBX_WORKER_DNS_H
#define SBX_WORKER_DNS_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include "err.h"

#define DNS_MAX_ADDRS 16
#define DNS_TTL_MIN 5     /* seconds: a record re-resolved more often than this is re-resolved this often */
#define DNS_TTL_MAX 3600
#define DNS_NEG_TTL 30    /* a name that does not resolve is asked again after this */

struct dns_addrs {
	size_t n;
	uint32_t a[DNS_MAX_ADDRS]; /* host order, sorted, no duplicates */
	uint32_t ttl;              /* seconds, clamped to DNS_TTL_MIN..DNS_TTL_MAX */
	int rcode;                 /* 0 NOERROR, 3 NXDOMAIN...; -1: no answer in time */
};

/* "A.B.C.D[:PORT]" (port default 53); "" or NULL: the first IPv4 nameserver
 * of /etc/resolv.conf. */
int dns_upstream(const char *spec, struct sockaddr_in *out, sbx_err *err);

/* A socket of type (SOCK_DGRAM, SOCK_STREAM) made in network namespace
 * netns (NULL/"": ours): it stays in that namespace for its life.
 * Non-blocking, O_CLOEXEC. */
int dns_socket_in(const char *netns, int type, sbx_err *err);

/* Resolves each of names[0..n) (A records; CNAMEs in the answer followed)
 * at upstream, all at once, waiting timeout_ms at most; out[i] for names[i].
 * A name with no answer in time has rcode -1 and no addresses. */
int dns_resolve(const char *netns, const struct sockaddr_in *upstream, const char *const *names, size_t n,
		struct dns_addrs *out, int timeout_ms, sbx_err *err);

/* ---- wire format (dns.c; exposed for the forwarder and tests) ---- */

/* An A query for name with id (recursion desired): its length, or -1 when
 * name is not one that fits out. */
int dns_build_query(uint16_t id, const char *name, uint8_t *out, size_t outsz);
/* The A records of an answer (m, len, from the resolver) to a query for
 * qname, CNAMEs in it followed: rcode, addresses sorted without
 * duplicates, ttl clamped. -1 when it is not an answer to that question. */
int dns_parse_answer(const uint8_t *m, size_t len, const char *qname, struct dns_addrs *out);

/* The question of a query: its name (lowercase, no trailing dot), type,
 * and where the question ends. -1 when it is not one well-formed query. */
int dns_parse_query(const uint8_t *m, size_t len, char *name, size_t namesz, uint16_t *qtype, size_t *qend);
/* An answer to query m (its header and question, qend from dns_parse_query):
 * rcode, and for an A question the addresses with ttl. Returns its length,
 * or -1 when it does not fit out. */
int dns_build_answer(const uint8_t *m, size_t qend, int rcode, const struct dns_addrs *a, uint16_t qtype,
		     uint8_t *out, size_t outsz);

#endif
