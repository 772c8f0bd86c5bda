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
/* An IPv4 address (host order) as text. */
void ip4_str(uint32_t a, char out[16]);
/* 1 when the bridge NAME exists in the uplink, 0 when there is no such
 * link; an error when NAME is a link of another kind. */
int bridge_exists(const struct net_config *c, const char *name, sbx_err *err);

#endif
