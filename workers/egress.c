/* Egress rules of one sandbox (egress.h, doc/network.md).
 *
 * Every packet a sandbox sends goes through forward's vmap to its chain
 * allow_<id>, and so does every packet coming back (matched by the
 * connection's original source): the chain decides both directions, per
 * packet, so a switch holds for connections that are already open too (no
 * conntrack flush needed, and none can be missed). Rules match the
 * connection's original destination (`ct original ip daddr`), which is the
 * remote host in both directions. What is blocked in every mode (metadata,
 * the sandbox subnet, the operator's internal ranges; the node itself in
 * input) is dropped before the vmap, so no allow rule can open it. */
#include "config.h"
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "egress_policy.h"
#include "host.h"
#include "log.h"
#include "net.h"
#include "net_int.h"
#include "id.h"
#include "egress.h"

static void ip4(uint32_t a, char out[16])
{
	struct in_addr in = { htonl(a) };
	inet_ntop(AF_INET, &in, out, 16);
}

/* "ct original ip daddr X" for an entry: its CIDR, or the set of its
 * hostname's addresses ("" when it has none: no rule) */
static void entry_dst(struct buf *b, const struct sbx_egress_entry *e, const struct dns_addrs *r)
{
	char a[16];

	if (!e->host[0]) {
		ip4(e->net, a);
		bprintf(b, "%s/%d", a, e->len);
		return;
	}
	bprintf(b, "{ ");
	for (size_t i = 0; r && i < r->n; i++) {
		ip4(r->a[i], a);
		bprintf(b, "%s%s", i ? ", " : "", a);
	}
	bprintf(b, " }");
}

char *egress_ruleset(const char *id, const char *ip, const struct sbx_egress *p, const struct dns_addrs *res,
		     sbx_err *err)
{
	struct buf b = { 0 };

	if (!sbx_id_valid(id)) {
		sbx_err_set(err, 400, "bad_id", "not a sandbox id");
		return NULL;
	}
	bprintf(&b, "flush chain " TABLE " allow_%s\n", id);
	switch (p->mode) {
	case SBX_EGRESS_DENY_ALL:
		break;
	case SBX_EGRESS_OPEN:
		bprintf(&b, "add rule " TABLE " allow_%s counter accept\n", id);
		break;
	case SBX_EGRESS_RESTRICTED:
		for (size_t i = 0; i < p->n; i++) {
			const struct sbx_egress_entry *e = &p->allow[i];
			const struct dns_addrs *r = res ? &res[i] : NULL;
			if (e->host[0] && (!r || r->n == 0))
				continue; /* not resolved (yet): allows nothing */
			if (!e->port) {
				bprintf(&b, "add rule " TABLE " allow_%s ct original ip daddr ", id);
				entry_dst(&b, e, r);
				bprintf(&b, " counter accept\n");
				continue;
			}
			/* a port: the remote's port is the destination going out and
			 * the source coming back */
			bprintf(&b, "add rule " TABLE " allow_%s ct direction original ip daddr ", id);
			entry_dst(&b, e, r);
			bprintf(&b, " meta l4proto { tcp, udp } th dport %d counter accept\n", e->port);
			bprintf(&b, "add rule " TABLE " allow_%s ct direction reply ip saddr ", id);
			entry_dst(&b, e, r);
			bprintf(&b, " meta l4proto { tcp, udp } th sport %d counter accept\n", e->port);
		}
		break;
	}
	/* NAT out of the uplink only for sandboxes that may leave at all; add
	 * then delete is a delete that does not fail when it is absent. */
	bprintf(&b, "add element " TABLE " nat4 { %s }\n", ip);
	if (p->mode == SBX_EGRESS_DENY_ALL)
		bprintf(&b, "delete element " TABLE " nat4 { %s }\n", ip);
	if (b.oom) {
		free(b.s);
		sbx_err_set(err, 500, "nomem", "out of memory");
		return NULL;
	}
	return b.s;
}

struct guard {
	struct host_run_opts ro;
	const char *done; /* net_bridge: guarded first, not again */
	sbx_err *err;
	int rc;
};

/* `-i NAME -j ACCEPT` and `-o NAME -j ACCEPT` at the head of FORWARD. */
static void guard_bridge(const char *name, void *arg)
{
	struct guard *g = arg;
	cleanup_host_out struct host_out o = { 0 };

	if (g->done && !strcmp(name, g->done))
		return;

	for (int dir = 0; dir < 2 && g->rc == 0; dir++) {
		const char *flag = dir ? "-o" : "-i";
		const char *check[] = { "iptables", "-w", "5", "-C", "FORWARD", flag, name, "-j", "ACCEPT", NULL };
		const char *insert[] = { "iptables", "-w", "5", "-I", "FORWARD", "1", flag, name, "-j", "ACCEPT", NULL };
		host_out_free(&o);
		if (host_run(check, &g->ro, &o, g->err) < 0) {
			g->rc = -1;
			return;
		}
		if (o.status == 0)
			continue;
		host_out_free(&o);
		if (host_run_ok("iptables FORWARD", insert, &g->ro, &o, g->err) < 0) {
			g->rc = -1;
			return;
		}
		log_info("iptables FORWARD policy is DROP (a Docker engine?): %s %s accepted there, sbx's own rules decide",
			 flag, name);
	}
}

int egress_forward_guard(const struct net_config *c, sbx_err *err)
{
	const char *netns = c->uplink_netns && *c->uplink_netns ? c->uplink_netns : NULL;
	static const char *const show[] = { "iptables", "-w", "5", "-S", "FORWARD", NULL };
	struct guard g = { .ro = HOST_RUN_OPTS("net"), .err = err };
	cleanup_host_out struct host_out o = { 0 };
	char tool[256];

	if (!host_tool("iptables", tool, sizeof(tool)))
		return 0;
	g.ro.netns = netns;
	if (host_run(show, &g.ro, &o, err) < 0)
		return -1;
	if (o.status != 0 || !o.out || !strstr(o.out, "-P FORWARD DROP"))
		return 0;
	/* net_bridge, and each overflow bridge (net.c) */
	guard_bridge(c->bridge, &g);
	g.done = c->bridge;
	if (g.rc == 0 && net_bridges(c, guard_bridge, &g, err) < 0)
		return -1;
	return g.rc;
}

bool egress_has_hosts(const struct sbx_egress *p)
{
	for (size_t i = 0; p->mode == SBX_EGRESS_RESTRICTED && i < p->n; i++)
		if (p->allow[i].host[0])
			return true;
	return false;
}

int egress_resolve(const struct net_config *c, const struct sbx_egress *p, struct dns_addrs *res, sbx_err *err)
{
	const char *names[SBX_EGRESS_MAX_ALLOW];
	size_t idx[SBX_EGRESS_MAX_ALLOW], n = 0;
	struct dns_addrs out[SBX_EGRESS_MAX_ALLOW];
	struct sockaddr_in up;

	if (p->mode != SBX_EGRESS_RESTRICTED)
		return 0;
	for (size_t i = 0; i < p->n; i++)
		if (p->allow[i].host[0]) {
			names[n] = p->allow[i].host;
			idx[n++] = i;
		}
	if (n == 0)
		return 0;
	if (dns_upstream(c->resolver, &up, err) < 0 ||
	    dns_resolve(c->uplink_netns, &up, names, n, out, 2000, err) < 0)
		return sbx_err_ctx(err, "resolving the allowed hostnames");
	for (size_t k = 0; k < n; k++)
		res[idx[k]] = out[k];
	return 0;
}

static int apply_resolved_at(const struct net_config *c, const char *id, const char *at, const struct sbx_egress *p,
			     const struct dns_addrs *res, sbx_err *err);

int egress_apply(const struct net_config *c, const char *id, const struct sbx_egress *p, sbx_err *err)
{
	return egress_apply_at(c, id, NULL, p, err);
}

/* res: SBX_EGRESS_MAX_ALLOW entries, what was resolved */
static int resolve_apply(const struct net_config *c, const char *id, const char *ip, const struct sbx_egress *p,
			 struct dns_addrs *res, sbx_err *err)
{
	memset(res, 0, SBX_EGRESS_MAX_ALLOW * sizeof(*res));
	/* a resolver that cannot be asked leaves the names unresolved (they
	 * allow nothing): never a reason to keep a looser policy */
	if (egress_resolve(c, p, res, err) < 0) {
		log_warnx("sandbox %s: %s", id, err->msg);
		sbx_err_clear(err);
	}
	return apply_resolved_at(c, id, ip, p, res, err);
}

int egress_apply_at(const struct net_config *c, const char *id, const char *ip, const struct sbx_egress *p,
		    sbx_err *err)
{
	static struct dns_addrs res[SBX_EGRESS_MAX_ALLOW];

	return resolve_apply(c, id, ip, p, res, err);
}

/* A network just made has an empty allow chain, and its address is in no
 * NAT set: nat4 gains an address only in a transaction that needs the
 * sandbox's allow chain (egress_ruleset's flush), and loses it in the one
 * that removes the map element (net.c's teardowns). That is deny_all, as
 * a pool member starts (node_start.c). Saying so again costs a start
 * ~14 ms: the NAT set's delete waits out an RCU grace period in the
 * kernel's commit (160 ms in all, 10 cold creates, 2 vCPUs). */
int egress_apply_new(const struct net_config *c, const char *id, const char *ip, const struct sbx_egress *p,
		     struct dns_addrs *res, sbx_err *err)
{
	if (p->mode != SBX_EGRESS_DENY_ALL)
		return resolve_apply(c, id, ip, p, res, err);
	memset(res, 0, SBX_EGRESS_MAX_ALLOW * sizeof(*res));
	log_info("sandbox %s: egress deny_all in force (0 entries)", id);
	return 0;
}

int egress_apply_resolved(const struct net_config *c, const char *id, const char *ip, const struct sbx_egress *p,
			  const struct dns_addrs *res, sbx_err *err)
{
	return apply_resolved_at(c, id, ip, p, res, err);
}

/* at: the sandbox's address when the caller knows it (a start that just
 * made the network), else it is looked up in the map */
static int apply_resolved_at(const struct net_config *c, const char *id, const char *at, const struct sbx_egress *p,
			     const struct dns_addrs *res, sbx_err *err)
{
	char ip[16];
	char *rs;
	int rc;

	if (at && strlen(at) < sizeof(ip))
		snprintf(ip, sizeof(ip), "%s", at);
	else if (net_sandbox_ip(c, id, ip, err) < 0)
		return sbx_err_ctx(err, "egress %s", sbx_egress_mode_name(p->mode));
	rs = egress_ruleset(id, ip, p, res, err);
	if (!rs)
		return sbx_err_ctx(err, "egress %s", sbx_egress_mode_name(p->mode));
	rc = net_nft_apply(c, rs, err);
	free(rs);
	if (rc < 0)
		return sbx_err_ctx(err, "egress %s: the rules could not be installed", sbx_egress_mode_name(p->mode));
	log_info("sandbox %s: egress %s in force (%zu entries)", id, sbx_egress_mode_name(p->mode), p->n);
	return 0;
}

/* The file is the start process's note to its node agent (the same
 * binary, a moment later): a header and the entries. */
#define RESOLVED_MAGIC 0x73627872u /* "sbxr" */

int egress_resolved_save(const char *path, const struct sbx_egress *p, const struct dns_addrs *res)
{
	uint32_t hdr[2] = { RESOLVED_MAGIC, (uint32_t)p->n };
	FILE *f = fopen(path, "we");
	int rc = 0;

	if (!f || fwrite(hdr, sizeof(hdr), 1, f) != 1 || (p->n && fwrite(res, sizeof(*res), p->n, f) != p->n))
		rc = -1;
	if (f && fclose(f) != 0)
		rc = -1;
	return rc;
}

int egress_resolved_load(const char *path, const struct sbx_egress *p, struct dns_addrs *res)
{
	uint32_t hdr[2];
	FILE *f = fopen(path, "re");
	int rc = -1;

	if (!f)
		return -1;
	if (fread(hdr, sizeof(hdr), 1, f) == 1 && hdr[0] == RESOLVED_MAGIC && hdr[1] == p->n &&
	    (p->n == 0 || fread(res, sizeof(*res), p->n, f) == p->n) && fgetc(f) == EOF)
		rc = 0;
	fclose(f);
	for (size_t i = 0; rc == 0 && i < p->n; i++)
		if (res[i].n > DNS_MAX_ADDRS)
			rc = -1;
	return rc;
}
