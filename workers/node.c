/* The node agent: owns this machine's sandboxes. One process, one event
 * loop (epoll): its queue (sbx.node.<node id>), and the pipes of the
 * short-lived processes that start or destroy a sandbox, so a slow start
 * never holds up anything else. It also watches every sandbox's sentry
 * (a dead one is marked 'failed' with the reason, never recreated) and
 * removes what no record owns: at start (after a crash) and every
 * reaper_interval. */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "daemon.h"
#include "db.h"
#include "driver.h"
#include "hash.h"
#include "egress.h"
#include "execlog.h"
#include "id.h"
#include "json.h"
#include "log.h"
#include "mq.h"
#include "msg.h"
#include "net.h"
#include "relay.h"
#include "reply.h"
#include "roles.h"
#include "sandbox.h"
#include "sandbox_state.h"
#include "volume.h"
#include "cgwarm.h"
#include "node_int.h"
#include "nomad_net.h"
#include "nomad_vol.h"

static unsigned sb_bucket(const char *id)
{
	return sbx_hash_str(id) & (SB_BUCKETS - 1);
}

struct sb *sb_find(struct node *n, const char *id)
{
	for (int k = n->sb_head[sb_bucket(id)]; k; k = n->sbs[k - 1].hnext) {
		struct sb *s = &n->sbs[k - 1];
		if (s->st != SB_FREE && !strcmp(s->id, id))
			return s;
	}
	return NULL;
}

/* slot i out of the bucket of the id it had */
static void sb_unlink(struct node *n, int i)
{
	for (int *pk = &n->sb_head[sb_bucket(n->sbs[i].id)]; *pk; pk = &n->sbs[*pk - 1].hnext)
		if (*pk == i + 1) {
			*pk = n->sbs[i].hnext;
			return;
		}
}

struct sb *sb_add(struct node *n, const char *id, enum sb_state st, int mem, int disk)
{
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (n->sbs[i].st == SB_FREE) {
			struct sb *s = &n->sbs[i];
			unsigned b = sb_bucket(id);
			if (s->id[0])
				sb_unlink(n, i);
			memset(s, 0, sizeof(*s));
			s->st = st;
			snprintf(s->id, sizeof(s->id), "%s", id);
			s->hnext = n->sb_head[b];
			n->sb_head[b] = i + 1;
			s->memory_mb = mem;
			s->disk_gb = disk;
			s->nomad = sandbox_adopted(&n->sc, id);
			return s;
		}
	return NULL;
}

struct op *node_op_find(struct node *n, const char *id)
{
	for (struct op *o = n->ops; o; o = o->next)
		if (!strcmp(o->id, id))
			return o;
	return NULL;
}

void node_reply(struct node *n, const char *reply_to, const char *corr, json_t *body /* stolen */)
{
	cleanup_json json_t *b = body;
	cleanup_free char *s = b ? json_dumps(b, JSON_COMPACT) : NULL;
	sbx_err err = SBX_ERR_INIT;

	if (!s || !reply_to[0])
		return;
	if (sbx_outbox_put(n->ob, reply_to, s, strlen(s), &(struct sbx_mq_pub){ .correlation_id = corr }, &err) < 0)
		log_warnx("reply lost: %s", err.msg);
}

/* ---- answers; the processes that do the slow work are node_op.c's ---- */

#define send_reply node_reply

/* what the outbox may hold: 64 streams with their whole credit window
 * (4 MiB, src/api/h_exec.c) out */
#define OUTBOX_MAX ((size_t)256 << 20)
#define GUARD_MS 10000 /* iptables FORWARD guard: at most this often */

void node_reply_msg(struct node *n, const sbx_mq_msg *m, json_t *body)
{
	node_reply(n, m->reply_to, m->correlation_id, body);
}

struct sb *node_served(struct node *n, const sbx_mq_msg *m, const char *id, const char *sid)
{
	struct sb *s = sb_find(n, id);

	/* a placement answers only for the record it serves (never the pool's) */
	if (!s || s->pool || strcmp(s->sandbox_id, sid)) {
		node_reply_msg(n, m, sbx_reply_fail("not_found", "the sandbox is not on this node"));
		return NULL;
	}
	return s;
}

struct sb *node_changeable(struct node *n, const sbx_mq_msg *m, const char *id, const char *sid)
{
	struct sb *s = node_served(n, m, id, sid);

	if (!s)
		return NULL;
	if (node_op_find(n, id)) {
		node_reply_msg(n, m, sbx_reply_fail("busy", "another change to the sandbox is in flight on the node"));
		return NULL;
	}
	return s;
}

/* ---- admission ---- */

/* ---- messages ---- */

bool template_name_ok(const char *s)
{
	size_t l = strlen(s);
	return l >= 1 && l <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-._") == l && s[0] != '.';
}

static void on_message(struct node *n, const sbx_mq_msg *m)
{
	cleanup_json json_t *body = NULL;
	json_error_t jerr;
	const char *id = NULL;
	sbx_err err = SBX_ERR_INIT;
	enum sbx_msg_kind kind = sbx_msg_kind(m->type);

	if (relay_handles(kind)) {
		/* relay: the runtime's messages (some have raw bodies) */
		relay_on_message(n->relay, m, kind);
		if (sbx_mq_ack(n->mq, m->delivery_tag, &err) < 0)
			log_warnx("%s", err.msg);
		return;
	}
	body = json_loadb(m->body, m->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!body || !json_is_object(body) || !m->reply_to[0]) {
		log_warnx("rejecting a malformed message of type '%.32s'", m->type);
		goto ack;
	}
	switch (kind) {
	case SBX_MSG_START:
		node_on_start(n, m, body);
		break;
	case SBX_MSG_EGRESS:
		node_on_egress(n, m, body);
		break;
	case SBX_MSG_ADOPT:
		node_on_adopt(n, m, body);
		break;
	case SBX_MSG_DESTROY: {
		const char *sid = NULL;
		struct sb *s;
		if (json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s, s:s}", "sandbox_id", &sid, "placement_id", &id) < 0 ||
		    !sbx_id_valid(id) || !sbx_id_valid(sid)) {
			log_warnx("rejecting a malformed destroy request");
			send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "malformed destroy request"));
		} else if ((s = sb_find(n, id)) && (s->pool || (s->sandbox_id[0] && strcmp(s->sandbox_id, sid)))) {
			/* a placement serving another record (or the pool) is not this record's to end */
			log_warnx("sandbox %s: not destroying placement %s, which serves %s", sid, id,
				  s->sandbox_id[0] ? s->sandbox_id : "the warm pool");
			send_reply(n, m->reply_to, m->correlation_id, sbx_reply_ok());
		} else {
			log_info("sandbox %s: destroy of placement %s asked", sid, id);
			destroy_local(n, id, m, "asked");
			if ((s = sb_find(n, id)) && !s->sandbox_id[0])
				snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", sid);
		}
		break;
	}
	case SBX_MSG_VOLUME_CREATE:
	case SBX_MSG_VOLUME_DELETE:
		node_on_volume(n, m, kind, body);
		break;
	case SBX_MSG_VOLUME_MOUNT:
		node_on_volume_mount(n, m, body);
		break;
	case SBX_MSG_PAUSE:
	case SBX_MSG_RESUME:
		on_pause(n, m, kind, body);
		break;
	case SBX_MSG_STATS:
		node_on_stats(n, m, body);
		break;
	case SBX_MSG_SNAPSHOT:
		on_snapshot(n, m, body);
		break;
	case SBX_MSG_PING: {
		int count = 0;
		for (int i = 0; i < MAX_SANDBOXES; i++)
			count += n->sbs[i].st != SB_FREE;
		send_reply(n, m->reply_to, m->correlation_id,
			   json_pack("{s:b, s:s, s:i}", "ok", 1, "node", n->node_id, "sandboxes", count));
		break;
	}
	default:
		log_warnx("rejecting a message of unknown type '%.32s'", m->type);
	}
ack:
	/* at most once: a lost start is a failed create, never a double one */
	if (sbx_mq_ack(n->mq, m->delivery_tag, &err) < 0)
		log_warnx("%s", err.msg);
}

/* a sandbox's address from its net-ip file (egress_node_ip_source) */
static int node_net_ip(void *ctx, const char *id, char ip[16])
{
	struct node *n = ctx;

	return sandbox_net_ip(&n->sc, id, ip);
}

/* a switch's answer, once its hostnames are resolved (egress_node_switch) */
static void node_egress_reply(void *ctx, const char *reply_to, const char *corr, json_t *body)
{
	node_reply(ctx, reply_to, corr, body);
}

/* ---- relay hooks (relay.c) ---- */

static int relay_state(void *ctx, const char *id, const char *sandbox_id, char *why, size_t whysz)
{
	struct sb *s = sb_find(ctx, id);

	/* a placement answers only for the record it serves: never a pool
	 * member not handed out, never another tenant's */
	if (!s || strcmp(s->sandbox_id, sandbox_id))
		return -1;
	if (s->st == SB_READY)
		return 1;
	snprintf(why, whysz, "%s",
		 s->st == SB_STARTING	? "starting"
		 : s->st == SB_PAUSING	? "pausing"
		 : s->st == SB_PAUSED	? "paused"
		 : s->st == SB_RESUMING ? "resuming"
					: "being destroyed");
	return 0;
}

static void relay_dead(void *ctx, const char *id, const char *why)
{
	struct node *n = ctx;
	struct sb *s = sb_find(n, id);

	if (!s || s->st != SB_READY)
		return;
	log_warnx("sandbox %s: sentry is dead: %s (placement %s)", s->sandbox_id, why, id);
	record_oom(n, s);
	mark_failed(n, s->sandbox_id, why);
	destroy_local(n, id, NULL, why);
}

static void relay_wake(void *ctx, const char *id)
{
	idle_thaw(ctx, id);
}

static void relay_status(void *ctx, const char *id, uint32_t nprocs)
{
	idle_on_status(ctx, id, nprocs);
}

/* ---- the loop ---- */

/* We are a child subreaper: runsc's processes end up ours. Reap them all;
 * an op's own status is kept for op_done. */
static void reap_children(struct node *n)
{
	pid_t pid;
	int st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (struct op *o = n->ops; o; o = o->next)
			if (o->pid == pid) {
				o->reaped = true;
				o->status = st;
			}
		for (int i = 0; i < MAX_SANDBOXES; i++)
			if (n->sbs[i].cont_pid == pid) {
				n->sbs[i].cont_pid = 0;
				if (WIFSIGNALED(st))
					log_warnx("sandbox %s: runsc kill CONT did not finish (killed)", n->sbs[i].id);
				else if (WEXITSTATUS(st))
					log_warnx("sandbox %s: runsc kill CONT exited %d", n->sbs[i].id, WEXITSTATUS(st));
			}
	}
}

/* The broker's socket leaves epoll through our own duplicate of it: the
 * start and destroy processes forked meanwhile hold copies of the socket, so
 * a registration by the closed descriptor would stay and fire forever (it
 * made the agent retry thousands of times and back off to 30 s). */
static void mq_unwatch(struct node *n)
{
	if (n->mq_wfd < 0)
		return;
	epoll_ctl(n->ep, EPOLL_CTL_DEL, n->mq_wfd, NULL);
	close(n->mq_wfd);
	n->mq_wfd = -1;
}

static int mq_setup(struct node *n, sbx_err *err)
{
	mq_unwatch(n);
	sbx_mq_close(n->mq);
	n->mq = NULL;
	if (sbx_mq_open(&n->mq, sbx_cfg_str(n->cfg, "amqp_url"), err) < 0)
		return -1;
	sbx_mq_set_boot_id(n->mq, n->boot_id);
	if (sbx_mq_declare_queue(n->mq, n->queue, err) < 0)
		return -1;
	if (!n->announced) {
		/* before we consume: the API ends the ops of our previous life
		 * at once, and what waits in our queue is ours to serve */
		json_t *b = json_pack("{s:s, s:s}", "node_id", n->node_id, "boot_id", n->boot_id);
		char *s = b ? json_dumps(b, JSON_COMPACT) : NULL;
		sbx_err e2 = SBX_ERR_INIT;
		if (s && sbx_mq_announce(n->mq, sbx_msg_name(SBX_MSG_NODE_STARTED), s, strlen(s), &e2) == 0)
			n->announced = true;
		else
			log_warnx("announcing the node agent's start: %s", s ? e2.msg : "out of memory");
		free(s);
		json_decref(b);
	}
	if (sbx_mq_consume(n->mq, n->queue, 64, err) < 0)
		return -1;
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
		n->mq_wfd = fcntl(sbx_mq_fd(n->mq), F_DUPFD_CLOEXEC, 0);
		if (n->mq_wfd < 0 || epoll_ctl(n->ep, EPOLL_CTL_ADD, n->mq_wfd, &ev) < 0)
			return sbx_err_sys(err, "internal", "watching the broker's socket");
	}
	log_info("node agent consuming %s", n->queue);
	return 0;
}

static void resolve_init_path(struct node *n)
{
	const char *s = sbx_cfg_str(n->cfg, "init_path");
	char self[512];
	ssize_t l;

	if (s[0]) {
		snprintf(n->init_path, sizeof(n->init_path), "%s", s);
		return;
	}
	/* next to sbx-worker: the build tree, or an install's libexec */
	l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (l > 0) {
		char *slash;
		self[l] = 0;
		slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(n->init_path, sizeof(n->init_path), "%s/../src/init/sbx-init", self);
			if (access(n->init_path, X_OK) == 0)
				return;
			snprintf(n->init_path, sizeof(n->init_path), "%s/../libexec/sbx/sbx-init", self);
			if (access(n->init_path, X_OK) == 0)
				return;
		}
	}
	snprintf(n->init_path, sizeof(n->init_path), "/usr/libexec/sbx/sbx-init");
}

static const char *const pass_parts[] = { "register", "orphans", "volumes", "pauses",
					  "snapshots", "disk", "egress from the records" };

static void pass_part(struct node *n, int part, bool first, long long now)
{
	switch (part) {
	case 0:
		node_register(n);
		break;
	case 1:
		reap_orphans(n, first);
		break;
	case 2:
		reap_volumes(n);
		break;
	case 3:
		settle_pauses(n, first);
		break;
	case 4:
		settle_snapshots(n, first);
		break;
	case 5:
		node_disk_pass(n);
		break;
	default:
		egress_node_sync(n->egress, n->node_id);
		/* iptables' FORWARD policy (a Docker engine started later): an
		 * iptables process or more each time, so at most every GUARD_MS
		 * even when passes come faster */
		if (now >= n->next_guard) {
			sbx_err gerr = SBX_ERR_INIT;
			if (egress_forward_guard(&n->net, &gerr) < 0)
				log_warnx("%s", gerr.msg);
			n->next_guard = now + GUARD_MS;
		}
		break;
	}
}

/* A piece of a periodic pass ran from t0: said when it held the loop long
 * (part: which, or NULL) */
static void piece_ran(struct pass_clock *c, const char *pass, const char *part, long long t0)
{
	long long held = sbx_now_ms() - t0;

	c->held += held;
	if (held < PASS_SLOW_MS)
		return;
	if (part)
		log_info("%s pass held the loop %lld ms (%s)", pass, held, part);
	else
		log_info("%s pass held the loop %lld ms", pass, held);
}

/* ...and the pass is whole: said when its pieces together took long */
static void pass_ended(const struct pass_clock *c, const char *pass, const char *pieces)
{
	if (c->held >= PASS_SLOW_MS)
		log_info("%s pass took %lld ms of the loop's time over %lld ms, in %s", pass, c->held,
			 sbx_now_ms() - c->started, pieces);
}

/* The node's periodic pass, one part per turn of the loop, the loop's
 * events served between them (each part reads what it needs itself): with a
 * thousand sandboxes the parts together held the loop up to 560 ms
 * (bench/density), the longest alone ~200. The first pass of a life goes
 * whole: what it adopts must be known before any message is served. True
 * while a pass is under way. */
static bool node_pass_step(struct node *n, const sbx_config *cfg, long long now)
{
	bool first = n->next_orphans == 0;

	do {
		long long t0 = sbx_now_ms();
		int part = n->pass_step;

		if (part == 0)
			n->pass = (struct pass_clock){ t0, 0 };
		pass_part(n, part, first, now);
		piece_ran(&n->pass, "node", pass_parts[part], t0);
	} while (++n->pass_step < (int)SBX_ARRAY_LEN(pass_parts) && first);
	if (n->pass_step < (int)SBX_ARRAY_LEN(pass_parts))
		return true;
	n->pass_step = 0;
	pass_ended(&n->pass, "node", "parts");
	n->next_orphans = now + sbx_cfg_int(cfg, "reaper_interval") * 1000;
	return false;
}

/* The liveness pass, in slices (check_liveness). True while one is under
 * way. */
static bool liveness_step(struct node *n)
{
	long long t0 = sbx_now_ms();
	bool done;

	if (!n->live_cursor)
		n->live = (struct pass_clock){ t0, 0 };
	done = check_liveness(n);
	piece_ran(&n->live, "liveness", NULL, t0);
	if (!done)
		return true;
	pass_ended(&n->live, "liveness", "slices");
	n->next_liveness = n->live.started + LIVENESS_MS;
	return false;
}

int node_run(const sbx_config *cfg, int index, void *ctx)
{
	static struct node nd;
	struct node *n = &nd;
	sbx_err err = SBX_ERR_INIT;
	long retry_ms = WORKER_RETRY_MIN_MS;
	long long mq_retry_at = 0;
	bool mq_up = false, pool_dropped = false, left = false;

	(void)ctx;
	memset(n, 0, sizeof(*n));
	/* its thread before anything is forked (cgwarm.c) */
	cgwarm_init();
	n->mq_wfd = -1;
	n->cfg = cfg;
	n->node_id = worker_node_id(cfg);
	if (sbx_msg_node_queue(n->node_id, n->queue, sizeof(n->queue), &err) < 0)
		fatalx("node %s: %s", n->node_id, err.msg);
	n->net.bridge = sbx_cfg_str(cfg, "net_bridge");
	n->net.subnet = sbx_cfg_str(cfg, "net_subnet");
	n->net.uplink_netns = sbx_cfg_str(cfg, "net_uplink_netns");
	n->net.internal_ranges = sbx_cfg_str(cfg, "net_internal_ranges");
	n->net.resolver = sbx_cfg_str(cfg, "net_resolver");
	resolve_init_path(n);
	node_snapshot_init(n);
	n->sc.state_dir = sbx_cfg_str(cfg, "state_dir");
	n->sc.runsc = sbx_cfg_str(cfg, "runsc_path");
	n->sc.platform = sbx_cfg_str(cfg, "runsc_platform");
	n->sc.init_path = n->init_path;
	n->sc.nproc_limit = (int)sbx_cfg_int(cfg, "sandbox_nproc");
	n->sc.pids_max = (int)sbx_cfg_int(cfg, "sandbox_pids_max");
	n->sc.spare_shell = sbx_cfg_bool(cfg, "exec_spare_shell");
	n->sc.fault_points = sbx_cfg_bool(cfg, "fault_points");
	n->sc.net = &n->net;
	n->sc.snapshot_helper = n->snap_helper;
	n->sc.registry = n->registry;
	n->sc.nomad_alloc_dir = sbx_cfg_str(cfg, "nomad_alloc_dir");
	n->sc.docker_host = sbx_cfg_str(cfg, "nomad_docker_host");
	n->sc.start_timeout_ms = (int)sbx_cfg_int(cfg, "start_timeout") * 1000;
	log_info("node agent #%d started (node %s, state %s, init %s)", index, n->node_id, n->sc.state_dir,
		 n->init_path);
	/* runsc's processes are reparented to us (fast deletes need that) */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	{
		/* a channel per sandbox: a thousand of them pass the usual soft
		 * limit of 1024 descriptors (nothing here uses select()) */
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
				log_warn("raising the descriptor limit");
		}
	}
	n->ep = epoll_create1(EPOLL_CLOEXEC);
	if (n->ep < 0)
		fatal("epoll_create1");
	{
		/* reap at once: a runsc delete waits until its sandbox is reaped */
		sigset_t chld;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &n->sigfd };
		sigemptyset(&chld);
		sigaddset(&chld, SIGCHLD);
		sigprocmask(SIG_BLOCK, &chld, NULL);
		n->sigfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
		if (n->sigfd < 0)
			fatal("signalfd");
		epoll_ctl(n->ep, EPOLL_CTL_ADD, n->sigfd, &ev);
	}
	sbx_id_new(n->boot_id);
	{
		/* Publishing never waits in this loop for the broker: a thread
		 * of its own does (src/lib/outbox.h). OUTBOX_MAX holds 64
		 * streams' full credit windows. */
		char hold[600];
		snprintf(hold, sizeof(hold), "%s/faults/publish-hold.armed", n->sc.state_dir);
		if (sbx_outbox_open(&n->ob, sbx_cfg_str(cfg, "amqp_url"), n->boot_id, OUTBOX_MAX,
				    n->sc.fault_points ? hold : NULL, &err) < 0)
			fatalx("%s", err.msg);
	}
	{
		struct relay_hooks h = { .ctx = n, .state = relay_state, .dead = relay_dead, .wake = relay_wake,
					 .status = relay_status };
		n->relay = relay_new(&n->sc, n->ep, n->ob, &n->db, &h);
		if (!n->relay)
			fatal("relay_new");
		relay_set_answer_ms(n->relay, (int)sbx_cfg_int(cfg, "init_answer_ms"));
	}
	mkdir(n->sc.state_dir, 0700);
	while (!sbx_child_stop && net_node_setup(&n->net, &err) < 0) {
		log_warnx("network setup: %s; retrying", err.msg);
		worker_sleep_ms(5000);
	}
	if (sbx_db_open(&n->db, sbx_cfg_str(cfg, "db_url"), &err) < 0)
		log_warnx("%s (retried)", err.msg);
	n->egress = egress_node_new(&n->net, n->ep, &n->db);
	if (egress_forward_guard(&n->net, &err) < 0)
		log_warnx("%s", err.msg);
	if (!n->egress)
		fatal("egress_node_new");
	egress_node_ip_source(n->egress, node_net_ip, n);
	egress_node_reply_hook(n->egress, node_egress_reply, n);
	/* the sbx CNI network of the sandboxes Nomad runs here (nomad_net.h) */
	if (*sbx_cfg_str(cfg, "nomad_cni_socket")) {
		n->cni = nomad_net_new(&n->sc, sbx_cfg_str(cfg, "nomad_cni_socket"), n->ep, &err);
		if (!n->cni)
			log_warnx("the sbx CNI network is not served: %s", err.msg);
	}
	n->xlog = execlog_new(sbx_cfg_str(cfg, "db_url"));
	relay_set_execlog(n->relay, n->xlog);
	n->next_orphans = 0; /* first pass at once: a crash may have left things */
	pool_adopt(n); /* before the first orphan pass would remove them */
	/* A stop ends the warm pool's members; a reload's (sbx_child_replaced)
	 * leaves them to the successor (pool.c), unless a drain clears it. */
	while (!sbx_child_stop || n->ops || (!pool_dropped && !sbx_child_replaced)) {
		if (sbx_child_stop && !pool_dropped && !sbx_child_replaced) {
			pool_dropped = true;
			pool_drop_all(n);
			if (!n->ops)
				break; /* nothing to wait for: no extra turn of the loop */
		}
		struct epoll_event evs[32];
		long long now = sbx_now_ms();
		int k, timeout = 1000;

		/* retries by the clock: an early wake-up is no reason to retry */
		if (!mq_up && !sbx_child_stop && now >= mq_retry_at) {
			if (mq_setup(n, &err) < 0) {
				log_warnx("%s; retrying in %ld ms", err.msg, retry_ms);
				mq_retry_at = now + retry_ms;
				retry_ms = worker_retry_next(retry_ms);
			} else {
				mq_up = true;
				retry_ms = WORKER_RETRY_MIN_MS;
			}
		}
		if (!mq_up && mq_retry_at - now < timeout)
			timeout = mq_retry_at > now ? (int)(mq_retry_at - now) : 0;
		if ((n->pass_step || now >= n->next_orphans) && !sbx_child_stop && node_pass_step(n, cfg, now))
			timeout = 0; /* the next part once what came meanwhile is served */
		if ((n->live_cursor || now >= n->next_liveness) && liveness_step(n))
			timeout = 0; /* the rest once what came meanwhile is served */
		if (mq_up && n->next_orphans)
			pool_tick(n); /* after the first whole pass: our old members are gone */
		idle_pass(n);
		stats_pass(n);
		{
			/* wake up for the next op whose answer from sbx-init is due */
			long long due = relay_tick(n->relay);
			long xl = execlog_pump(n->xlog);
			if (due >= 0 && due < timeout)
				timeout = (int)due + 1;
			/* and for the next allowed hostname to re-resolve */
			due = egress_node_tick(n->egress);
			if (due >= 0 && due < timeout)
				timeout = (int)due + 1;
			due = node_adopt_tick(n); /* and for Nomad's tasks being adopted */
			if (due >= 0 && due < timeout)
				timeout = (int)due + 1;
			if (xl >= 0 && xl < timeout)
				timeout = (int)xl;
		}
		k = epoll_wait(n->ep, evs, 32, timeout);
		/* children are reaped when one has ended (SIGCHLD, read first so
		 * that one ending meanwhile signals again): a wait for any child
		 * looks at each of them, and runsc's sentries and gofers are ours
		 * (a subreaper), ~2,000 with a thousand sandboxes: waiting after
		 * every wakeup was a third of the agent's CPU */
		for (int i = 0; i < k; i++)
			if (evs[i].data.ptr == &n->sigfd) {
				struct signalfd_siginfo si;
				while (read(n->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
					;
				reap_children(n);
			}
		for (int i = 0; i < k; i++) {
			if (evs[i].data.ptr == &n->sigfd) {
				continue;
			} else if (nomad_net_owns(n->cni, evs[i].data.ptr)) {
				nomad_net_on_event(n->cni);
			} else if (egress_node_owns(n->egress, evs[i].data.ptr)) {
				egress_node_on_event(n->egress, evs[i].data.ptr);
			} else if (relay_owns(n->relay, evs[i].data.ptr)) {
				relay_on_event(n->relay, evs[i].data.ptr, evs[i].events);
			} else if (evs[i].data.ptr) {
				node_op_read(n, evs[i].data.ptr);
			}
		}
		/* the broker's socket, and whatever librabbitmq buffered already */
		while (mq_up && !sbx_child_stop) {
			sbx_mq_msg m;
			int r = sbx_mq_next(n->mq, 0, &m, &err);
			if (r == 0)
				break;
			if (r < 0) {
				log_warnx("%s; reconnecting", err.msg);
				mq_unwatch(n);
				mq_up = false;
				break;
			}
			sbx_log_set_request_id(m.request_id);
			on_message(n, &m);
			sbx_log_set_request_id(NULL);
			sbx_mq_msg_free(&m);
		}
	}
	/* no message is taken any more: what waits in the pool now was handed
	 * to nobody */
	if (sbx_child_replaced && !pool_dropped && pool_hand_over(n) > 0)
		left = true;
	node_adopt_drop(n);
	relay_free(n->relay);
	sbx_outbox_close(n->ob, 2000); /* the last answers go out first */
	stats_free(n);
	execlog_free(n->xlog); /* after the relay: its last ops are recorded */
	nomad_net_free(n->cni);
	egress_node_free(n->egress);
	mq_unwatch(n);
	sbx_mq_close(n->mq);
	sbx_db_close(&n->db);
	log_info("node agent #%d stopped%s", index, left ? " (its warm pool left to the next one)" : "");
	return left ? SBX_EXIT_HANDED_OVER : 0;
}
