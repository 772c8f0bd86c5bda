/* Egress on a node: turns a sandbox's policy (src/lib/egress_policy.h) into the
 * rules of its allow_<id> chain in the sbx table, in one nft transaction,
 * so the old policy holds until the new one is entirely in force.
 * doc/network.md describes the rules. */
#ifndef SBX_WORKER_EGRESS_H
#define SBX_WORKER_EGRESS_H

#include "dns.h"
#include "egress_policy.h"
#include "err.h"
#include "net.h"

/* Puts policy p in force for the sandbox (whose network net_sandbox_create
 * made): its allow chain is replaced and its NAT membership set, atomically.
 * Hostname entries are resolved first (the node's resolver, net_resolver,
 * asked from the uplink netns; 2 s at most); one that does not resolve
 * allows nothing until it does. On failure the policy in force before stays
 * (deny_all for a new sandbox). */
int egress_apply(const struct net_config *c, const char *sandbox_id, const struct sbx_egress *p, sbx_err *err);
/* The same for a sandbox whose address the caller knows (ip; NULL: looked
 * up in the map, as egress_apply does). */
int egress_apply_at(const struct net_config *c, const char *sandbox_id, const char *ip, const struct sbx_egress *p,
		    sbx_err *err);
/* egress_apply_at for a network net_sandbox_create has just made, which is
 * deny_all already: deny_all sends nothing to the kernel (egress.c). */
int egress_apply_new(const struct net_config *c, const char *sandbox_id, const char *ip, const struct sbx_egress *p,
		     struct dns_addrs *res, sbx_err *err);
/* res (SBX_EGRESS_MAX_ALLOW entries) gets what was resolved, and is saved
 * beside the sandbox for its node agent, which then need not ask the
 * resolver again before it answers the start (node_op.c); loaded back
 * only for the same policy (its entry count), else -1. */
int egress_resolved_save(const char *path, const struct sbx_egress *p, const struct dns_addrs *res);
int egress_resolved_load(const char *path, const struct sbx_egress *p, struct dns_addrs *res);

/* egress_apply_at with the hostnames already resolved: res[i] for
 * p->allow[i] (only hostname entries are read; NULL: none resolved). */
int egress_apply_resolved(const struct net_config *c, const char *sandbox_id, const char *ip,
			  const struct sbx_egress *p, const struct dns_addrs *res, sbx_err *err);

/* Does p name hostnames (restricted, an entry with a host)? */
bool egress_has_hosts(const struct sbx_egress *p);
/* Resolves p's hostname entries into res[i] (others untouched). */
int egress_resolve(const struct net_config *c, const struct sbx_egress *p, struct dns_addrs *res, sbx_err *err);

/* A Docker engine beside sbx sets iptables' FORWARD policy to DROP. When
 * (and only when) the uplink netns has that policy, two rules in that chain
 * let the bridge's traffic through it; sbx's own forward chain still decides
 * (a drop there is final whatever iptables says). Idempotent; the node agent
 * runs it at start and every reaper interval (Docker may start later). */
int egress_forward_guard(const struct net_config *c, sbx_err *err);

/* The ruleset egress_apply sends (for tests and logs); malloc'd. */
char *egress_ruleset(const char *sandbox_id, const char *ip, const struct sbx_egress *p,
		     const struct dns_addrs *res, sbx_err *err);

#endif
