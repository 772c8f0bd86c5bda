/* The node agent's egress state, shared by egress_node.c (each sandbox's
 * policy in force, its hostnames kept current) and egress_fwd.c (the DNS
 * forwarder on the gateway). Everything runs in the agent's loop. */
#ifndef SBX_WORKER_EGRESS_NODE_INT_H
#define SBX_WORKER_EGRESS_NODE_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "db.h"
#include "dns.h"
#include "egress_node.h"
#include "egress_policy.h"
#include "id.h"
#include "net.h"

#define RELAY_SLOTS 256
#define RELAY_MS 5000
#define TCP_CONNS 32       /* at once, for all sandboxes; more wait in the backlog */
#define TCP_IDLE_MS 10000  /* a connection with nothing asked for this long is closed */
#define DNS_MSG_MAX 1500   /* what we read and relay (queries are far smaller) */

struct eg_sb {
	struct eg_sb *next;
	char id[SBX_ID_LEN + 1];
	uint32_t ip; /* host order; 0: unknown yet */
	bool pending; /* a start's, not in force yet */
	struct sbx_egress p;
	struct dns_addrs res[SBX_EGRESS_MAX_ALLOW];
	long long due_ms; /* next re-resolution; 0: none (no hostnames) */
	bool dirty;       /* resolved addresses not yet written to the record */
	struct eg_refresh *rf; /* a re-resolution in flight (of sw's policy when set) */
	struct eg_switch *sw;  /* a switch waiting for its hostnames */
};

/* A switch to a policy with hostnames: answered once they are resolved. */
struct eg_switch {
	struct sbx_egress p;
	char reply_to[256], corr[72];
};

/* A re-resolution of a sandbox's hostnames, asked on the node's refresh
 * socket and answered through the loop (never waited for in it). */
struct eg_refresh {
	uint16_t ids[SBX_EGRESS_MAX_ALLOW];
	struct dns_addrs res[SBX_EGRESS_MAX_ALLOW]; /* rcode -1: no answer yet */
	size_t left;
	long long deadline, resend;
};

struct relay_slot {
	bool used;
	uint16_t their_id, our_id;
	struct sockaddr_in from;
	long long until;
	int conn;      /* the TCP connection the query came on (tcp[]), or -1: UDP */
	uint32_t gen;  /* ...and that connection's generation then */
};

struct tcp_conn {
	int fd; /* -1: free */
	char tag; /* epoll data.ptr */
	uint32_t ip, gen;
	long long until;
	size_t have;
	uint8_t buf[2 + DNS_MSG_MAX];
};

struct egress_node {
	const struct net_config *c;
	sbx_db *db;
	int ep;
	int srv, up;         /* the forwarder: listening socket, socket to the resolver */
	char srv_tag, up_tag; /* epoll data.ptr of each */
	int tsrv;            /* listening on TCP */
	char tsrv_tag;
	int rs;              /* re-resolutions of allowed hostnames (refresh_*) */
	char rs_tag;
	struct tcp_conn tcp[TCP_CONNS];
	uint32_t tcp_gen;
	struct sockaddr_in upstream;
	struct eg_sb *sbs;
	struct relay_slot slots[RELAY_SLOTS];
	uint16_t next_slot;
	int (*ip_file)(void *ctx, const char *id, char ip[16]); /* egress_node_ip_source */
	void *ip_ctx;
	void (*reply)(void *ctx, const char *reply_to, const char *corr, json_t *body); /* egress_node_reply_hook */
	void *reply_ctx;
	long long tick_at; /* egress_node_tick walks the sandboxes from then (0: at once) */
};

/* egress_node.c: the sandbox with address ip (host order), in force */
struct eg_sb *egress_node_find_ip(struct egress_node *e, uint32_t ip);

/* egress_fwd.c: the forwarder's sockets on the gateway (a forwarder that
 * cannot listen is logged; the rest works without it), their events, and
 * its timers (ms until the next; -1: none). */
void egress_fwd_open(struct egress_node *e);
void egress_fwd_close(struct egress_node *e);
bool egress_fwd_owns(struct egress_node *e, void *ptr);
void egress_fwd_on_event(struct egress_node *e, void *ptr);
long long egress_fwd_tick(struct egress_node *e, long long now);

#endif
