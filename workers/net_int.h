/* What net.c shares with net_list.c (the leftovers' listing): names, the
 * subnet, and the helpers that run ip/nft and read the table. Private to
 * the network code. */
#ifndef SBX_WORKER_NET_INT_H
#define SBX_WORKER_NET_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include "cleanup.h"
#include "err.h"
#include "host.h"
#include "net.h"

#define NETNS_DIR "/run/netns"
#define LOCK_DIR "/run/lock"
#define TABLE "inet sbx"
#define SB_MAP "sandboxes"
#define BR_SET "bridges" /* the sandboxes' bridges (ifname): what the base chains judge */
#define CHAIN_IN "in_"     /* in_<id>: ingress base chain on the sandbox's veth */
#define CHAIN_ALLOW "allow_" /* allow_<id>: the sandbox's allow rules (forward) */

struct subnet {
	uint32_t net, mask; /* host order */
	int len;
	char gw[16];
};

/* A growing string for rulesets and ip batches; oom once an allocation
 * failed (the text is then incomplete and must not be applied). */
struct buf {
	char *s;
	size_t len, cap;
	bool oom;
};
static inline void buf_freep(struct buf *b) { free(b->s); }
#define cleanup_buf _cleanup_(buf_freep)
void bprintf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Runs argv (ip or nft) in netns (NULL: ours) with input on stdin, all of
 * the output kept (net_run.c); < 0 only when it could not run it. */
int net_run(const char *netns, const char *const argv[], const char *input, struct host_out *o, sbx_err *err);
/* The first line of a command's stderr, for error messages. */
const char *first_line(const char *s, char *buf, size_t len);
/* Like net_run, but a non-zero exit is an error naming the command. */
int net_run_ok(const char *netns, const char *const argv[], const char *input, struct host_out *o, sbx_err *err);
/* nft's commands (a ruleset, or a `list ...`) run in-process through
 * libnftables in netns (NULL: ours), as `nft [-j] -f -` would: o->status 0
 * when they applied (a transaction: all or nothing), 1 when not, with
 * nft's messages in o->errs; its output (JSON when json) in o->out. < 0
 * only when it could not run them (net_run.c). */
int net_nft(const char *netns, const char *cmd, bool json, struct host_out *o, sbx_err *err);
/* The calling thread in netns (NULL or "": it stays): the descriptor to
 * come back with (-2 when nothing was entered), -1 on error; netns_leave
 * comes back, and aborts rather than go on in the wrong namespace. */
int netns_enter(const char *netns, sbx_err *err);
void netns_leave(int self, const char *netns);
/* The uplink namespace's name, NULL for the host's. */
const char *uplink(const struct net_config *c);
/* The configuration checked, its subnet parsed. */
int check_config(const struct net_config *c, struct subnet *sn, sbx_err *err);
/* `nft -j list table inet sbx` parsed (*root NULL when there is no table). */
int table_json(const struct net_config *c, json_t **root, sbx_err *err);
/* The elements of the set or map (kind "set" or "map") NAME in a listing;
 * NULL when it has none. */
json_t *nft_elems(json_t *root, const char *kind, const char *name);
/* Each element of the sandboxes map (address, verdict target), each chain. */
void each_element(json_t *root, void (*fn)(const char *ip, const char *target, void *), void *arg);
void each_chain(json_t *root, void (*fn)(const char *name, void *), void *arg);

/* Shared by net.c (a sandbox's part) and net_node.c (the node's). */
#define BRIDGE_MAC "02:5b:00:00:00:01" /* fixed, so ports joining never change it */
/* Runs an `ip -batch` in netns (NULL: ours). */
int ip_batch(const char *netns, const char *batch, sbx_err *err);
/* The permanent neighbour entry ip -> mac on dev in netns (NULL = ours),
 * replaced; mac NULL: removed (none there, or no such dev, is fine).
 * rtnetlink in-process: `ip neigh` dumps every link of the namespace first
 * (a thousand veths, each with its peer's namespace id looked up: that
 * dump was the largest part of ip's CPU in a destroy at a thousand). */
int net_neigh(const char *netns, const char *dev, const char *ip, const char *mac, sbx_err *err);
/* A sandbox's links over rtnetlink, in-process (net_link.c); netns NULL:
 * ours. Each fails naming the `ip` command it stands for. */
/* The veth pair host <-> peer, peer (with peer_mac) moved into peer_netns. */
int link_veth_add(const char *netns, const char *host, const char *peer, const char *peer_mac, const char *peer_netns,
		  sbx_err *err);
/* dev, still down: alias, addrgenmode none, a port of bridge, isolated and
 * not learning. */
int link_bridge_port(const char *netns, const char *dev, const char *alias, const char *bridge, sbx_err *err);
int link_up(const char *netns, const char *dev, sbx_err *err);
/* Inside netns: lo and dev up, ip/len on dev, the default route via gw
 * (onlink). */
int link_inside(const char *netns, const char *dev, const char *ip, int len, const char *gw, sbx_err *err);
/* dev removed; none there is fine. */
int link_del(const char *netns, const char *dev, sbx_err *err);
/* As `ip netns add NAME` (fails when it exists) and `ip netns del NAME`
 * (none there is fine), in-process. */
int netns_add(const char *name, sbx_err *err);
int netns_del(const char *name, sbx_err *err);
/* An IPv4 address (host order) as text. */
void ip4_str(uint32_t a, char out[16]);
/* 1 when the bridge NAME exists in the uplink, 0 when there is no such
 * link; an error when NAME is a link of another kind. */
int bridge_exists(const struct net_config *c, const char *name, sbx_err *err);

#endif
