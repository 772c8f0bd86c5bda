/* Per-sandbox network plumbing of the node agent: the sbx bridge, one network
 * namespace and veth per sandbox, and the one nftables table owned by sbx
 * (`table inet sbx`) whose rules make everything a sandbox sends go nowhere
 * unless an allow rule says so. doc/network.md describes the layout. */
#ifndef SBX_NET_H
#define SBX_NET_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include "err.h"

struct net_config {
	const char *bridge;       /* "sbx0" */
	const char *subnet;       /* "10.213.0.0/16": gateway is the first host, on the bridge */
	const char *uplink_netns; /* "" or NULL = the host's; else a named netns holding the bridge */
	const char *internal_ranges; /* "CIDR,CIDR...": blocked in every mode (egress); NULL: none */
	const char *resolver;        /* upstream DNS "A.B.C.D[:PORT]", asked from the uplink netns;
	                              * NULL/"": the first nameserver of /etc/resolv.conf */
};

struct net_sandbox {
	char netns[64];    /* "sbx-<id>", at /run/netns/sbx-<id> */
	char veth_host[16]; /* "sbxh<first 9 hex of id>", on the bridge */
	char ip[16];       /* the sandbox's address (eth0 inside the netns) */
	char mac[18];      /* eth0's address, derived from the id */
	char gw[16];       /* the gateway (the bridge's address): the sandbox's resolver */
};

/* Idempotent: the bridge with the gateway address, and the nft table's sets
 * and base chains (rewritten atomically; per-sandbox state is kept). */
int net_node_setup(const struct net_config *c, sbx_err *err);

/* Makes the netns, the veth pair and the sandbox's rules (in place before the
 * host side of the veth comes up). On failure, everything it made is undone. */
int net_sandbox_create(const struct net_config *c, const char *sandbox_id,
		       struct net_sandbox *out, sbx_err *err);

/* The same in a network namespace someone else made (a CNI runtime's, at
 * netns_path, e.g. /proc/PID/ns/net: Nomad's, through sbx-cni): it is named
 * "sbx-<id>" in /run/netns like ours (a bind mount), so destroy and the
 * leftovers' listing treat it as ours; destroy leaves the namespace itself
 * to its owner. netns_path NULL: a namespace of ours. */
int net_sandbox_create_in(const struct net_config *c, const char *sandbox_id, const char *netns_path,
			  struct net_sandbox *out, sbx_err *err);

/* net_sandbox_create on a thread of its own, so that a start makes its disk
 * meanwhile (sandbox.c): _begin starts it (in line when no thread can be
 * had), _end waits for it and gives its result; _end before _begin, or a
 * second time, returns what it returned the first (0 when never begun).
 * The caller's id must stay valid until _end. */
struct net_async {
	const struct net_config *c;
	const char *sandbox_id;
	pthread_t th;
	bool running;
	int rc;
	struct net_sandbox ns;
	sbx_err err;
};
#define NET_ASYNC_INIT { .rc = 0, .err = SBX_ERR_INIT }
void net_sandbox_create_begin(struct net_async *a, const struct net_config *c, const char *sandbox_id);
int net_sandbox_create_end(struct net_async *a, struct net_sandbox *out, sbx_err *err);

/* Idempotent: removes the sandbox's veth, netns, neighbour entry, nft map
 * element and chains, whichever exist. */
int net_sandbox_destroy(const struct net_config *c, const char *sandbox_id, sbx_err *err);

/* net_sandbox_destroy in the uplink the network was made in (made_in; ""
 * is the host's, NULL: not recorded, the node's current one), which is not
 * the node's now when an operator changed net_uplink_netns since: the
 * rules of a sandbox made before live in the old uplink's table. ip: the
 * address the create gave it (NULL: not recorded): then nothing is listed
 * (its cost does not grow with the node's sandboxes), unless the table
 * says the address is another's. */
int net_sandbox_destroy_made_in(const struct net_config *c, const char *sandbox_id, const char *made_in,
				const char *ip, sbx_err *err);

/* Ids of sandboxes that have any network leftovers (netns, veth, nft chain or
 * map element), found by listing each independently. *ids is a malloc'd
 * array of malloc'd strings (free with net_list_free), sorted, no duplicates. */
int net_list(const struct net_config *c, char ***ids, size_t *n, sbx_err *err);
void net_list_free(char **ids, size_t n);

/* Calls fn with the name of each of the sandboxes' bridges that exists:
 * net_bridge and its overflow bridges "<net_bridge>-<k>" (a bridge holds at
 * most 1024 ports; doc/network.md). */
int net_bridges(const struct net_config *c, void (*fn)(const char *name, void *), void *arg, sbx_err *err);

/* Applies one nft ruleset (`nft -f -`, one transaction) in the uplink
 * netns: all of it or nothing (egress.c). */
int net_nft_apply(const struct net_config *c, const char *ruleset, sbx_err *err);
/* The address a sandbox holds (its element in the sandboxes map); 404
 * "no_sandbox_net" when it has none. */
int net_sandbox_ip(const struct net_config *c, const char *sandbox_id, char out[16], sbx_err *err);

/* Names derived from an id (24 lowercase hex); < 0 when the id is not one. */
int net_names(const char *sandbox_id, struct net_sandbox *out, sbx_err *err);

#endif
