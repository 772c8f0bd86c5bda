/* The node agent's private parts, shared by node.c (the loop, messages,
 * the start and destroy processes) and node_health.c (what it checks
 * periodically). */
#ifndef SBX_WORKER_NODE_INT_H
#define SBX_WORKER_NODE_INT_H

#include <stdbool.h>
#include <sys/types.h>
#include "db.h"
#include "id.h"
#include "idle.h"
#include "mq.h"
#include "net.h"
#include "relay.h"
#include "sandbox.h"
#include "settings.h"

#define MAX_SANDBOXES 4096
#define LIVENESS_MS 2000

enum sb_state { SB_FREE = 0, SB_STARTING, SB_READY, SB_DESTROYING };

struct sb {
	enum sb_state st;
	char id[SBX_ID_LEN + 1];
	int memory_mb, disk_gb;
	bool destroy_after_start;
	long oom_kills;
	int init_missed;  /* liveness passes in a row whose PING sbx-init left unanswered */
	pid_t cont_pid;   /* `runsc kill ID CONT` running, 0: none */
	struct sb_idle idle; /* idle.c: frozen while idle */
};

enum op_kind { OP_START, OP_DESTROY };

struct op {
	struct op *next;
	enum op_kind kind;
	pid_t pid;
	int fd;
	char id[SBX_ID_LEN + 1];
	bool reply;              /* someone waits for the answer */
	char reply_to[256], corr[72], req_id[72];
	char buf[1024];
	size_t len;
	char reason[256];        /* destroy of a dead/orphan sandbox: why (logs); a copy, the
	                          * caller's string is often on its stack */
	bool reaped;             /* its status came through the general reap */
	int status;
};

struct node {
	const sbx_config *cfg;
	const char *node_id;
	char queue[300];
	sbx_mq *mq;
	sbx_db db;
	int ep;
	struct sandbox_node_cfg sc;
	struct net_config net;
	struct sb sbs[MAX_SANDBOXES];
	struct op *ops;
	char init_path[512];
	long long next_liveness, next_orphans;
	int sigfd;
	struct relay *relay; /* runtime relay: execs, files, procs (relay.c) */
	char boot_id[SBX_ID_LEN + 1]; /* this life of the agent (node.started, app_id) */
	bool announced;
	int mq_wfd; /* our own dup of the broker's socket, as registered in epoll */
	struct execlog *xlog; /* the execs rows, written off the loop (execlog.c) */
};

/* node.c */
struct sb *sb_find(struct node *n, const char *id);
struct sb *sb_add(struct node *n, const char *id, enum sb_state st, int mem, int disk);
/* The start or destroy process at work on id, if any. */
struct op *node_op_find(struct node *n, const char *id);
/* A name a template directory may have. */
bool template_name_ok(const char *s);
/* Destroys a sandbox in a short-lived process; m: the request to answer
 * (NULL: nobody waits), reason: for the logs. */
void destroy_local(struct node *n, const char *id, const sbx_mq_msg *m, const char *reason);

/* node_health.c */
void mark_failed(struct node *n, const char *id, const char *why);
/* The memory cgroup's OOM kill count, shown to the owner as oom_kills. */
void record_oom(struct node *n, struct sb *s);
/* Every sentry alive, every sbx-init answering (PING; SIGCONT, then failed). */
void check_liveness(struct node *n);
/* Everything on this node that no live record owns goes (at_start: after a
 * crash, before consuming). */
void reap_orphans(struct node *n, bool at_start);
/* This node and the templates it has, in the nodes table (heartbeat). */
void node_register(struct node *n);

#endif
