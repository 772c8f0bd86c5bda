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
#include "msg.h"
#include "outbox.h"
#include <jansson.h>
#include "egress_node.h"
#include "net.h"
#include "relay.h"
#include "sandbox.h"
#include "settings.h"

#define MAX_SANDBOXES 4096
#define SB_BUCKETS 8192 /* sb_find's index (a power of 2) */
#define LIVENESS_MS 2000
#define PASS_SLOW_MS 100 /* a node pass that holds the loop this long is logged */
#define LIVENESS_SLICE_MS 20 /* the longest a liveness pass holds the loop at a time */

/* SB_POOL: a warm pool member, started and waiting for a create (pool.c);
 * SB_PAUSING/PAUSED/RESUMING: node_pause.c */
enum sb_state { SB_FREE = 0, SB_STARTING, SB_READY, SB_DESTROYING, SB_POOL, SB_PAUSING, SB_PAUSED, SB_RESUMING };

/* One sandbox on this node, named by its placement id (its state directory,
 * runsc container, netns...); sandbox_id is the record it serves ("" for a
 * warm pool member not handed out yet, pool.c). */
struct sb {
	enum sb_state st;
	char id[SBX_ID_LEN + 1];         /* the placement */
	char sandbox_id[SBX_ID_LEN + 1]; /* the record: status, activity, OOM kills */
	int memory_mb, disk_gb;
	bool destroy_after_start;
	/* a warm pool member (until handed out): what it was started as, and
	 * the template version it runs (the `current` link then) */
	bool pool;
	int cpu;
	char template[65];
	char tmpl_version[128];
	long oom_kills;
	int init_missed;  /* liveness passes in a row whose PING sbx-init left unanswered */
	long long missed_at_ms;  /* mono ms of the first of those misses */
	long long missed_cpu_usec; /* the sandbox's cgroup CPU time at the last miss */
	pid_t cont_pid;   /* `runsc kill ID CONT` running, 0: none */
	struct sb_idle idle; /* idle.c: frozen while idle */
	bool nomad;       /* Nomad runs it; this agent adopted it (adopt.c): its
	                   * channel is ours, its container and cgroups are not */
	int hnext;        /* sb_find's index: the next slot of its bucket, + 1 */
};

enum op_kind { OP_START, OP_DESTROY, OP_VOLUME_CREATE, OP_VOLUME_DELETE, OP_VOLUME_MOUNT, OP_PAUSE, OP_RESUME, OP_SNAPSHOT };

/* Another requester of the same destroy (the reaper's retry beside the
 * API's): answered with the op's own result, when it ends. */
struct op_waiter {
	struct op_waiter *next;
	char reply_to[256], corr[72];
};

struct op {
	struct op *next;
	struct op_waiter *waiters; /* OP_DESTROY: more requesters (op_wait) */
	enum op_kind kind;
	pid_t pid;
	int fd;
	char id[SBX_ID_LEN + 1];
	bool reply;              /* someone waits for the answer */
	bool pool;               /* the start of a warm pool member */
	char reply_to[256], corr[72], req_id[72];
	char buf[1024];
	size_t len;
	char reason[256];        /* destroy of a dead/orphan sandbox: why (logs); a copy, the
	                          * caller's string is often on its stack. OP_SNAPSHOT: the
	                          * snapshot's id */
	bool reaped;             /* its status came through the general reap */
	int status;
	int volume_gb;           /* OP_VOLUME_CREATE: its size */
	bool warm;               /* holds the cgroup warm-up until it ends (cgwarm.c) */
};

/* A periodic pass that runs in pieces, the loop's events served between
 * them (node.c): when it began, how long its pieces held the loop. */
struct pass_clock {
	long long started, held;
};

struct node {
	const sbx_config *cfg;
	const char *node_id;
	char queue[300];
	sbx_mq *mq;        /* consuming (and acks); publishing goes through ob */
	sbx_outbox *ob;
	sbx_db db;
	int ep;
	struct sandbox_node_cfg sc;
	struct net_config net;
	struct sb sbs[MAX_SANDBOXES];
	/* by placement: each bucket's first slot + 1 (0: none), chained by
	 * hnext; a slot stays in its id's bucket until it is reused (sb_find
	 * skips free ones): a lookup is a few compares, not up to 4,096 */
	int sb_head[SB_BUCKETS];
	struct op *ops;
	char init_path[512];
	long long next_liveness, next_orphans, next_guard;
	/* a liveness pass in progress: the next slot to look at (0: none) */
	int live_cursor;
	/* the periodic pass under way: its next part (0: none) */
	int pass_step;
	struct pass_clock live, pass;
	int sigfd;
	struct relay *relay; /* runtime relay: execs, files, procs (relay.c) */
	char boot_id[SBX_ID_LEN + 1]; /* this life of the agent (node.started, app_id) */
	bool announced;
	int mq_wfd; /* our own dup of the broker's socket, as registered in epoll */
	long long pool_retry_at; /* a pool start failed: no other before this (mono ms) */
	struct egress_node *egress; /* policies in force, hostnames kept current, DNS forwarder */
	struct nomad_net *cni;      /* the sbx CNI network's socket (nomad_net.h); NULL: not served */
	struct execlog *xlog; /* the execs rows, written off the loop (execlog.c) */
	struct stats_series *stats; /* node_stats.c: each sandbox's recent use */
	long long next_stats;
	char snap_helper[512]; /* the sbx-snapshot helper (node_snapshot.c) */
	char registry[256];    /* the registry as HOST:PORT */
};

/* node.c */
struct sb *sb_find(struct node *n, const char *id);
struct sb *sb_add(struct node *n, const char *id, enum sb_state st, int mem, int disk);
/* The start or destroy process at work on id, if any. */
struct op *node_op_find(struct node *n, const char *id);
/* A name a template directory may have. */
bool template_name_ok(const char *s);
/* node_op.c: the short-lived processes. Reads what o's process wrote;
 * at its end, acts on its answer and frees o. */
void node_op_read(struct node *n, struct op *o);
/* Runs kind (OP_PAUSE, OP_RESUME, ...) for id in a short-lived process;
 * m: the request to answer when it ends (NULL: none). */
int node_op_spawn(struct node *n, enum op_kind kind, const char *id, const sbx_mq_msg *m, int volume_gb);
/* The snapshot snap_id of placement id, in a short-lived process. */
int node_op_spawn_snapshot(struct node *n, const char *id, const char *snap_id);
/* OP_VOLUME_MOUNT of volume vid for sandbox sid (nomad_vol_mount). */
int node_op_spawn_mount(struct node *n, const char *sid, const char *vid, int size_gb, bool create,
			const sbx_mq_msg *m);
/* node_start.c: start (cold or warm), volume create/delete, egress switch,
 * and what admits them against the node's memory and disk */
void node_on_start(struct node *n, const sbx_mq_msg *m, json_t *body);
void node_on_volume(struct node *n, const sbx_mq_msg *m, enum sbx_msg_kind kind, json_t *body);
/* volume.mount {sandbox_id, volume_id, size_gb, create}: the volume of a
 * sandbox Nomad is to run here, mounted on the host for its task's bind
 * (nomad_vol.h); answered {ok, source} once mounted. */
void node_on_volume_mount(struct node *n, const sbx_mq_msg *m, json_t *body);
void node_on_egress(struct node *n, const sbx_mq_msg *m, json_t *body);
/* adopt {sandbox_id, placement_id, alloc_id, chan_key}: a sandbox Nomad
 * started here (driver = nomad); answered once its sbx-init answered. */
void node_on_adopt(struct node *n, const sbx_mq_msg *m, json_t *body);
/* The adoptions waiting for sbx-init of Nomad's task (node_start.c): the
 * ms until the next look, or -1. */
long long node_adopt_tick(struct node *n);
/* Whether placement id waits for its sbx-init (the orphan pass leaves it). */
bool node_adopt_waiting(const char *id);
/* At a stop: each waiting adoption fails, its state gone. */
void node_adopt_drop(struct node *n);
int node_admit_volume(struct node *n, int gb, char *why, size_t whysz);
/* Answers a control request now. */
void node_reply_msg(struct node *n, const sbx_mq_msg *m, json_t *body /* stolen */);
/* The placement id, when it serves record sid; NULL once m is answered not_found
 * (no such placement here, a warm pool member, or serving another record). */
struct sb *node_served(struct node *n, const sbx_mq_msg *m, const char *id, const char *sid);
/* node_served, with no other change in flight (busy); NULL once m is
 * answered. A sandbox Nomad runs is changed like one of ours (adopt.c:
 * pause and snapshots through its Docker container). */
struct sb *node_changeable(struct node *n, const sbx_mq_msg *m, const char *id, const char *sid);
/* Destroys a sandbox in a short-lived process; m: the request to answer
 * (NULL: nobody waits), reason: for the logs. */
void destroy_local(struct node *n, const char *id, const sbx_mq_msg *m, const char *reason);
/* Starts a sandbox in a short-lived process (pool: a warm pool member, no
 * request waits). 0, or -1 when no process could be made. */
int node_start_op(struct node *n, const struct sandbox_spec *spec, const sbx_mq_msg *m, bool pool);
/* May a sandbox of mem MB and disk GB start here? count_pool: warm pool
 * members count too (a refill); a create's start does not wait for them:
 * pool_trim makes room afterwards. -1 with why when not. */
int node_admit(struct node *n, int mem, int disk, bool count_pool, char *why, size_t whysz);
void node_reply(struct node *n, const char *reply_to, const char *corr, json_t *body /* stolen */);
/* Sandbox memory (MB) this node may promise (node_memory_mb, overcommit). */
long long node_mem_cap(struct node *n);

/* pool.c: the warm pool */
/* A create that matches a ready member (template, cpu, memory, disk) is
 * handed it: the reply names the member's placement. 1 when it was, 0
 * when the cold path must start one. */
int pool_take(struct node *n, const sbx_mq_msg *m, const char *sandbox_id, const char *tmpl, int cpu, int mem,
	      int disk);
/* Per loop turn: refill (one start at a time, never while a create
 * starts), drop members that are stale (template updated, settings
 * changed) and, with pool_trim, those a create needs the room of. */
void pool_tick(struct node *n);
void pool_trim(struct node *n);
/* A member's start ended (ok: it runs). */
void pool_started(struct node *n, struct sb *s, bool ok, const char *msg);
/* A member is going away (destroyed, dead): its row goes. */
void pool_forget(struct node *n, struct sb *s);
/* At the agent's start: rows of our previous life go (its members are
 * leftovers the orphan pass removes), but for the members taken over. */
void pool_reset(struct node *n);
/* The agent stops: every member not in an op goes (a stopped node leaves
 * none running). */
void pool_drop_all(struct node *n);
/* A reload replaces this agent (sbx_child_replaced): the members waiting
 * are left running for the successor, each marked as handed over. The
 * number left. */
int pool_hand_over(struct node *n);
/* At the agent's start, before its first orphan pass: the members its
 * predecessor handed over (marked, listed, no record, alive, made here)
 * are this agent's members from now on. */
void pool_adopt(struct node *n);

/* node_health.c */
/* The record of sandbox_id (a sandbox id, not a placement; "": a pool
 * member, nothing to record) is failed with why. */
void mark_failed(struct node *n, const char *sandbox_id, const char *why);
/* The memory cgroup's OOM kill count, shown to the owner as oom_kills. */
void record_oom(struct node *n, struct sb *s);
/* Every sentry alive, every sbx-init answering (PING; SIGCONT, then failed). */
/* Looks at sandboxes for at most LIVENESS_SLICE_MS: true when the pass
 * is complete, false when it stopped short (the caller comes back soon). */
bool check_liveness(struct node *n);
/* Everything on this node that no live record owns goes (at_start: after a
 * crash, before consuming). */
void reap_orphans(struct node *n, bool at_start);
/* This node and the templates it has, in the nodes table (heartbeat). */
void node_register(struct node *n);
/* node_stats.c: samples each ready sandbox's use (every turn of the loop;
 * it keeps its own pace), answers stats requests, frees it all at the end. */
void stats_pass(struct node *n);
void node_on_stats(struct node *n, const sbx_mq_msg *m, json_t *body);
void stats_free(struct node *n);
/* node_pause.c: pause and resume requests, their ends, and settling the
 * records an interrupted pause or resume left in pausing/resuming. */
void on_pause(struct node *n, const sbx_mq_msg *m, enum sbx_msg_kind kind, json_t *body);
/* ok: "OK" from the process; msg: its error otherwise. */
void pause_done(struct node *n, struct op *o, bool ok, const char *msg);
/* at_start: every such record of this node; else those older than a pause
 * or resume can take. */
void settle_pauses(struct node *n, bool at_start);
/* node_snapshot.c: snapshot requests, their ends, and failing the records
 * an interrupted snapshot left in creating. */
void node_snapshot_init(struct node *n);
void on_snapshot(struct node *n, const sbx_mq_msg *m, json_t *body);
/* In the snapshot process: the work; out gets " DIGEST BYTES". */
int node_snapshot_run(struct node *n, const char *id, const char *snap_id, char *out, size_t outsz, sbx_err *err);
void snapshot_done(struct node *n, struct op *o, bool ok, const char *msg);
void settle_snapshots(struct node *n, bool at_start);
/* node_disk.c: disk pressure. -1 with why (a 503 reason) when the state
 * directory's free space is below a floor (node_disk_min_free_pct/gb): no
 * new work. */
int node_disk_admit(struct node *n, char *why, size_t whysz);
/* Periodic: below twice a floor, unused template versions and snapshot
 * layers go, least recently used first. */
void node_disk_pass(struct node *n);
/* Volume images no live record owns (deleted, or never recorded), and
 * leftovers of interrupted creates, go. */
void reap_volumes(struct node *n);

#endif
