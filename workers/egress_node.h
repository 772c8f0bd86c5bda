/* The node agent's egress state (one per node agent): the policy in force
 * of each running sandbox, the hostnames of restricted ones kept current
 * (re-resolved when their TTL runs out; a change re-applies the sandbox's
 * rules and is written to its record, egress_resolved), and the DNS
 * forwarder on the gateway (dns.h). Everything runs in the agent's loop. */
#ifndef SBX_WORKER_EGRESS_NODE_H
#define SBX_WORKER_EGRESS_NODE_H

#include <stdbool.h>
#include <jansson.h>
#include "db.h"
#include "egress_policy.h"
#include "err.h"
#include "net.h"

struct egress_node;

/* The forwarder's sockets join epoll ep (their data.ptr: see _owns). A
 * forwarder that cannot listen is logged; the rest works without it. */
struct egress_node *egress_node_new(const struct net_config *c, int ep, sbx_db *db);
void egress_node_free(struct egress_node *e);

/* Where the node keeps each sandbox's address (its net-ip file: fn gives
 * 0 and the address, or -1); without it, or when it has none, the node's
 * map is listed (every sandbox's element, ms with many). */
void egress_node_ip_source(struct egress_node *e, int (*fn)(void *ctx, const char *id, char ip[16]), void *ctx);

/* Puts p in force for a running sandbox (egress_apply, hostnames resolved)
 * and keeps it. On failure the old policy stays, kept too. resolved: NULL
 * to write what was resolved to the record (egress_resolved); else it is
 * handed out instead ({"host": [...]}, malloc'd): a switch, whose record
 * the API writes (it holds the row meanwhile). */
int egress_node_set(struct egress_node *e, const char *id, const struct sbx_egress *p, char **resolved,
		    sbx_err *err);
/* How the node answers a request (egress_node_switch's, later). */
void egress_node_reply_hook(struct egress_node *e,
			    void (*fn)(void *ctx, const char *reply_to, const char *corr, json_t *body /* stolen */),
			    void *ctx);
/* A running sandbox's switch to p, which names hostnames: they are asked
 * through the loop (which goes on meanwhile), then p is put in force as
 * egress_node_set does and the request is answered through the reply hook
 * ({ok, resolved}, or a failure with the policy before still in force).
 * 0: under way; -1: not taken (no resolver socket, no hook, not known):
 * the caller switches with egress_node_set. A later switch or a destroy
 * answers one still under way with a failure. */
int egress_node_switch(struct egress_node *e, const char *id, const struct sbx_egress *p, const char *reply_to,
		       const char *corr);
/* A start's policy (put in force by the start process): kept as pending
 * until egress_node_started (start ok) or egress_node_forget. */
void egress_node_pending(struct egress_node *e, const char *id, const struct sbx_egress *p);
/* A pending start whose policy names hostnames (egress_node_started
 * resolves them and writes them to the record). */
bool egress_node_resolves(struct egress_node *e, const char *id);
/* ip: its address when the caller knows it (NULL: looked up in the map);
 * resolved: the file where the start saved what it resolved the hostnames
 * to (egress_resolved_save); without it they are asked again, here */
void egress_node_started(struct egress_node *e, const char *id, const char *ip, const char *resolved);
void egress_node_forget(struct egress_node *e, const char *id);
/* Policies of ready sandboxes of this node that it does not know (after a
 * restart of the agent), or whose policy in force differs, from their
 * records: put in force in batches, one nft transaction each (one each
 * cost ~13 ms, a loop held ~13 s by a thousand sandboxes); hostnames
 * start from the addresses the record shows and are asked again soon,
 * through the loop. */
void egress_node_sync(struct egress_node *e, const char *node_id);
/* Re-resolves what is due; returns ms until the next is due (-1: none). */
long long egress_node_tick(struct egress_node *e);

bool egress_node_owns(struct egress_node *e, void *ptr);
void egress_node_on_event(struct egress_node *e, void *ptr);

#endif
