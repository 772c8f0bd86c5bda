/* The sbx network of sandboxes Nomad runs on this node (doc/nomad.md):
 * Nomad's client runs the sbx CNI plugin (workers/sbx-cni.c) against each
 * allocation's network namespace before its task starts; the plugin asks
 * this node agent, over a root-only unix socket, to wire that namespace as
 * it wires one of its own sandboxes (net.c: veth on the node's bridge, an
 * address of its pool, the per-sandbox nft chains, deny_all until the
 * adoption puts the record's policy in force). Each wiring is noted in
 * state_dir/nomad-net/ID (the allocation id), so the orphan pass and
 * destroy find it whether or not the sandbox was ever adopted. */
#ifndef SBX_WORKER_NOMAD_NET_H
#define SBX_WORKER_NOMAD_NET_H

#include <stdbool.h>
#include "err.h"
#include "host.h"
#include "sandbox.h"

struct nomad_net;

/* Listens on path (mode 0600; a stale socket is replaced) and joins epoll
 * ep (data.ptr: see _owns). NULL (logged) when it cannot. */
struct nomad_net *nomad_net_new(const struct sandbox_node_cfg *c, const char *path, int ep, sbx_err *err);
void nomad_net_free(struct nomad_net *nn);
bool nomad_net_owns(struct nomad_net *nn, void *ptr);
/* Accepts what is pending; each request is served by a child process of
 * its own (ip and nft take tens of ms), which answers and exits: the loop
 * never waits for one (the agent reaps them with its other children). */
void nomad_net_on_event(struct nomad_net *nn);

/* Is the sandbox's network wired here through CNI (noted in nomad-net/)? */
bool nomad_net_wired(const struct sandbox_node_cfg *c, const char *id);
/* Wired but not adopted, and noted less than max_age_ms ago: a create in
 * flight (Nomad wires the network before the task starts). */
bool nomad_net_pending(const struct sandbox_node_cfg *c, const char *id, long long max_age_ms);
/* Removes the network and its note; idempotent. */
int nomad_net_unwire(const struct sandbox_node_cfg *c, const char *id, sbx_err *err);
/* Adds the ids noted in nomad-net/ to s. */
int nomad_net_list(const struct sandbox_node_cfg *c, struct host_idset *s);

/* The request one sbx-cni call makes (exposed for the unit tests): wires
 * (ADD), checks (CHECK) or unwires (DEL) the sandbox's network; the answer
 * is a JSON object ({"ok": true, ...} or {"ok": false, "code": N, "msg": ...},
 * CNI's error codes), malloc'd. */
char *nomad_net_serve(const struct sandbox_node_cfg *c, const char *request);

#endif
