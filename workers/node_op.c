/* The node agent's short-lived processes (node.c's loop reads their pipes):
 * a sandbox's start, destroy, pause, resume and snapshot, a volume's
 * create, delete and mount each run in a fork, so a slow one never holds
 * up anything else; what each one's answer line means once it ends, and
 * destroy_local, which asks for a destroy whatever is under way. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "egress.h"
#include "json.h"
#include "log.h"
#include "relay.h"
#include "reply.h"
#include "sandbox.h"
#include "volume.h"
#include "cgwarm.h"
#include "node_int.h"
#include "nomad_vol.h"

#define send_reply node_reply

static int op_spawn(struct node *n, enum op_kind kind, const char *id, const struct sandbox_spec *spec,
		    const sbx_mq_msg *m, const char *reason, bool pool, int volume_gb)
{
	int p[2];
	pid_t pid;
	struct op *o;
	bool warm = kind == OP_START || kind == OP_RESUME;

	if (pipe2(p, O_CLOEXEC) < 0) {
		log_warn("pipe");
		return -1;
	}
	/* runsc's cgroup moves pass (cgwarm.c): from here, not from the
	 * child's first step, so that the grace period the warm-up's first
	 * write waits for has passed by the time runsc moves */
	if (warm)
		cgwarm_begin();
	pid = fork();
	if (pid < 0) {
		log_warn("fork");
		if (warm)
			cgwarm_end();
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		sbx_err err = SBX_ERR_INIT;
		char line[sizeof(err.msg) + 8], extra[480] = "";
		int r, len;

		close(p[0]);
		close(n->sigfd);
		{
			sigset_t none;
			sigemptyset(&none);
			sigprocmask(SIG_SETMASK, &none, NULL);
		}
		/* if the agent dies mid-way, so do we: its restart removes what we left */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		if (kind == OP_START) {
			/* a test's fault points stop the starts of creates, never the pool's */
			struct sandbox_node_cfg c = n->sc;
			c.fault_points = c.fault_points && !pool;
			r = sandbox_start(&c, spec, &err);
		} else if (kind == OP_VOLUME_CREATE) {
			r = volume_create(&n->sc, id, volume_gb, &err);
		} else if (kind == OP_VOLUME_DELETE) {
			r = volume_delete(&n->sc, id, &err);
		} else if (kind == OP_VOLUME_MOUNT) {
			char vid[SBX_ID_LEN + 1] = "", src[400];
			int create = 0;
			r = sscanf(reason, "%24s %d", vid, &create) == 2
				    ? nomad_vol_mount(&n->sc, id, vid, volume_gb, create, src, sizeof(src), &err)
				    : sbx_err_set(&err, 500, "volume", "bad mount request");
			if (r == 0)
				snprintf(extra, sizeof(extra), "  %s", src);
		} else if (kind == OP_PAUSE) {
			long long bytes = 0;
			r = sandbox_pause(&n->sc, id, &bytes, &err);
			if (r == 0)
				log_info("placement %s: checkpoint of %lld bytes on disk", id, bytes);
		} else if (kind == OP_RESUME) {
			r = sandbox_resume(&n->sc, id, &err);
		} else if (kind == OP_SNAPSHOT) {
			r = node_snapshot_run(n, id, reason, extra, sizeof(extra), &err);
		} else {
			r = sandbox_destroy(&n->sc, id, &err);
		}
		len = snprintf(line, sizeof(line), "%s%s%s\n", r < 0 ? "ERR " : "OK", r < 0 ? "" : extra,
			       r < 0 ? err.msg : "");
		if (write(p[1], line, (size_t)(len < (int)sizeof(line) ? len : (int)sizeof(line) - 1)) < 0)
			_exit(2);
		_exit(r < 0 ? 1 : 0);
	}
	close(p[1]);
	o = calloc(1, sizeof(*o));
	if (!o) {
		if (warm)
			cgwarm_end();
		close(p[0]);
		return -1; /* the child finishes; the orphan pass settles it */
	}
	o->warm = warm;
	o->kind = kind;
	o->pool = pool;
	o->volume_gb = volume_gb;
	o->pid = pid;
	o->fd = p[0];
	snprintf(o->reason, sizeof(o->reason), "%s", reason ? reason : "");
	snprintf(o->id, sizeof(o->id), "%s", id);
	if (m && m->reply_to[0]) {
		o->reply = true;
		snprintf(o->reply_to, sizeof(o->reply_to), "%s", m->reply_to);
		snprintf(o->corr, sizeof(o->corr), "%s", m->correlation_id);
		snprintf(o->req_id, sizeof(o->req_id), "%s", m->request_id);
	}
	{
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = o };
		epoll_ctl(n->ep, EPOLL_CTL_ADD, o->fd, &ev);
	}
	o->next = n->ops;
	n->ops = o;
	return 0;
}


/* m waits for o's result (op_done); answered at once when it cannot. */
static void op_wait(struct node *n, struct op *o, const sbx_mq_msg *m)
{
	struct op_waiter *w;

	if (!m->reply_to[0])
		return;
	if (!o->reply) {
		o->reply = true;
		snprintf(o->reply_to, sizeof(o->reply_to), "%s", m->reply_to);
		snprintf(o->corr, sizeof(o->corr), "%s", m->correlation_id);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "node agent out of memory"));
		return;
	}
	snprintf(w->reply_to, sizeof(w->reply_to), "%s", m->reply_to);
	snprintf(w->corr, sizeof(w->corr), "%s", m->correlation_id);
	w->next = o->waiters;
	o->waiters = w;
}

/* Has o's child written its answer, one line in one write, its last act
 * before _exit? Its pipe's EOF comes only once the child's copy of our
 * address space is torn down (0.9-1.6 ms later for a start), so the answer
 * is acted on at its newline and reap_children reaps the child whenever it
 * has gone. */
static bool op_answered(const struct op *o)
{
	return o->len && o->buf[o->len - 1] == '\n';
}

/* A started sandbox's egress kept by the node: its address and what its
 * start resolved, from the files the start left beside it. */
static void start_egress(struct node *n, const char *id)
{
	char ip[16], path[600];

	egress_node_started(n->egress, id, sandbox_net_ip(&n->sc, id, ip) == 0 ? ip : NULL,
			    sandbox_egress_resolved_path(&n->sc, id, path, sizeof(path)) == 0 ? path : NULL);
}

static void op_done(struct node *n, struct op *o)
{
	bool ok = o->len >= 2 && !memcmp(o->buf, "OK", 2);
	struct sb *s = sb_find(n, o->id);
	char msg[sizeof(o->buf)];
	int st = 0;

	/* a child that answered may still be exiting: not waited for */
	if (o->reaped)
		st = o->status;
	else if (waitpid(o->pid, &st, op_answered(o) ? WNOHANG : 0) <= 0)
		st = 0;
	snprintf(msg, sizeof(msg), "%.*s", (int)(o->len > 4 ? o->len - 4 : 0), o->buf + 4);
	msg[strcspn(msg, "\n")] = 0;
	if (!ok && !msg[0])
		snprintf(msg, sizeof(msg), "%s process died (status %d)",
			 o->kind == OP_START ? "start" : o->kind == OP_DESTROY ? "destroy" : o->kind == OP_SNAPSHOT ? "snapshot" : "volume", st);
	sbx_log_set_request_id(o->req_id);
	if (o->kind == OP_START && o->pool) {
		if (s)
			pool_started(n, s, ok, msg);
	} else if (o->kind == OP_PAUSE || o->kind == OP_RESUME) {
		pause_done(n, o, ok, msg);
	} else if (o->kind == OP_SNAPSHOT) {
		snapshot_done(n, o, ok, msg);
	} else if (o->kind == OP_VOLUME_MOUNT) {
		if (!ok)
			log_warnx("sandbox %s: mounting its volume for Nomad's task failed: %s", o->id, msg);
		if (o->reply)
			send_reply(n, o->reply_to, o->corr,
				   ok ? json_pack("{s:b, s:s}", "ok", 1, "source", msg)
				      : sbx_reply_fail(strstr(msg, "in use") ? "volume_in_use" : NULL, msg));
	} else if (o->kind == OP_VOLUME_CREATE || o->kind == OP_VOLUME_DELETE) {
		const char *what = o->kind == OP_VOLUME_CREATE ? "create" : "delete";
		if (ok)
			log_info("volume %s: %sd", o->id, what);
		else
			log_warnx("volume %s: %s failed: %s", o->id, what, msg);
		if (o->reply)
			send_reply(n, o->reply_to, o->corr,
				   ok ? sbx_reply_ok()
				      : sbx_reply_fail(strstr(msg, "still mounted") ? "volume_in_use" : NULL, msg));
	} else if (o->kind == OP_START) {
		if (ok && s && !s->destroy_after_start) {
			/* hostnames are written to the record before the answer (a
			 * GET right after the 201 shows egress.resolved; one
			 * UPDATE of what the start resolved, those creates only);
			 * the rest of the node's bookkeeping follows it: nothing
			 * else of this sandbox is handled before it is done */
			bool hosts = egress_node_resolves(n->egress, o->id);

			s->st = SB_READY;
			log_info("sandbox %s: started (placement %s)", s->sandbox_id, o->id);
			if (hosts)
				start_egress(n, o->id);
			if (o->reply)
				send_reply(n, o->reply_to, o->corr,
					   json_pack("{s:b, s:s, s:s}", "ok", 1, "container_id", o->id, "placement_id",
						     o->id));
			if (!hosts)
				start_egress(n, o->id);
			idle_ready(s, false);
		} else {
			if (ok)
				snprintf(msg, sizeof(msg), "the sandbox was destroyed while it started");
			log_warnx("sandbox %s: start failed: %s (placement %s)", s ? s->sandbox_id : "?", msg, o->id);
			egress_node_forget(n->egress, o->id);
			if (s)
				s->st = SB_FREE;
			if (o->reply)
				send_reply(n, o->reply_to, o->corr, sbx_reply_fail(NULL, msg));
			if (ok)
				destroy_local(n, o->id, NULL, "cancelled during start");
		}
	} else {
		if (ok) {
			log_info("sandbox %s: destroyed%s%s", o->id, o->reason[0] ? ": " : "", o->reason);
			egress_node_forget(n->egress, o->id);
			if (s)
				s->st = SB_FREE;
		} else {
			log_warnx("sandbox %s: destroy failed: %s", o->id, msg);
			if (s)
				s->st = SB_READY; /* the next orphan or liveness pass tries again */
		}
		if (o->reply)
			send_reply(n, o->reply_to, o->corr, ok ? sbx_reply_ok() : sbx_reply_fail(NULL, msg));
		while (o->waiters) {
			struct op_waiter *w = o->waiters;
			o->waiters = w->next;
			send_reply(n, w->reply_to, w->corr, ok ? sbx_reply_ok() : sbx_reply_fail(NULL, msg));
			free(w);
		}
	}
	sbx_log_set_request_id(NULL);
}

void node_op_read(struct node *n, struct op *o)
{
	ssize_t r = read(o->fd, o->buf + o->len, sizeof(o->buf) - 1 - o->len);

	if (r > 0) {
		o->len += (size_t)r;
		if (o->len < sizeof(o->buf) - 1 && !op_answered(o))
			return;
	}
	if (r < 0 && errno == EINTR)
		return;
	/* its line, EOF (or full): the child is done */
	epoll_ctl(n->ep, EPOLL_CTL_DEL, o->fd, NULL);
	close(o->fd);
	for (struct op **pp = &n->ops; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	if (o->warm)
		cgwarm_end();
	op_done(n, o);
	free(o);
}

int node_start_op(struct node *n, const struct sandbox_spec *spec, const sbx_mq_msg *m, bool pool)
{
	return op_spawn(n, OP_START, spec->id, spec, m, NULL, pool, 0);
}

int node_op_spawn(struct node *n, enum op_kind kind, const char *id, const sbx_mq_msg *m, int volume_gb)
{
	return op_spawn(n, kind, id, NULL, m, NULL, false, volume_gb);
}

int node_op_spawn_snapshot(struct node *n, const char *id, const char *snap_id)
{
	return op_spawn(n, OP_SNAPSHOT, id, NULL, NULL, snap_id, false, 0);
}

int node_op_spawn_mount(struct node *n, const char *sid, const char *vid, int size_gb, bool create,
			const sbx_mq_msg *m)
{
	char what[SBX_ID_LEN + 8];

	snprintf(what, sizeof(what), "%s %d", vid, create ? 1 : 0);
	return op_spawn(n, OP_VOLUME_MOUNT, sid, NULL, m, what, false, size_gb);
}

void destroy_local(struct node *n, const char *id, const sbx_mq_msg *m, const char *reason)
{
	struct sb *s = sb_find(n, id);
	struct op *o = node_op_find(n, id);

	if (o && o->kind == OP_START) {
		/* let the start finish, then take it down; answer now */
		if (s)
			s->destroy_after_start = true;
		if (m)
			send_reply(n, m->reply_to, m->correlation_id, sbx_reply_ok());
		return;
	}
	if (o && o->kind == OP_DESTROY) {
		/* the destroy under way answers this one too, when it ends: an
		 * OK now would let the record say destroyed while it is not */
		if (m)
			op_wait(n, o, m);
		return;
	}
	if (o && (o->kind == OP_PAUSE || o->kind == OP_RESUME || o->kind == OP_SNAPSHOT || o->kind == OP_VOLUME_MOUNT)) {
		/* let the pause, resume or snapshot end, then take it down (a
		 * volume mounted for a create given up: the volume pass's) */
		if (s)
			s->destroy_after_start = true;
		if (m)
			send_reply(n, m->reply_to, m->correlation_id, sbx_reply_ok());
		return;
	}
	/* relay: its ops end now */
	relay_sandbox_gone(n->relay, id, "not_ready", "the sandbox is being destroyed");
	if (!s)
		s = sb_add(n, id, SB_DESTROYING, 0, 0);
	else
		s->st = SB_DESTROYING;
	if (s && s->pool)
		pool_forget(n, s);
	if (op_spawn(n, OP_DESTROY, id, NULL, m, reason, false, 0) < 0) {
		if (s)
			s->st = SB_READY;
		if (m)
			send_reply(n, m->reply_to, m->correlation_id, sbx_reply_fail(NULL, "node agent could not fork"));
	}
}
