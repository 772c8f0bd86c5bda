#include "config.h"
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include "cleanup.h"
#include "clock.h"
#include "errcode.h"
#include "json.h"
#include "log.h"
#include "runtime.h"
#include "sandbox_state.h"

int rt_sandbox_ready(struct api_req *r, struct rt_sandbox *sb, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;
	json_error_t jerr;
	int st;

	memset(sb, 0, sizeof(*sb));
	if (sbx_sandbox_use(&r->ctx->db, r->m.id, r->org.org_id, &res, err) < 0)
		return -1;
	if (PQntuples(res) != 1)
		return sbx_err_set(err, 404, "not_found", "Sandbox not found");
	st = sbx_sb_status_parse(PQgetvalue(res, 0, 0));
	if (st == SBX_SB_FAILED)
		return sbx_err_code(err, "sandbox_failed", "Sandbox is failed: %s", PQgetvalue(res, 0, 3));
	if (st != SBX_SB_READY)
		return sbx_err_code(err, "not_ready", "Sandbox is %s, not ready", PQgetvalue(res, 0, 0));
	snprintf(sb->id, sizeof(sb->id), "%s", r->m.id);
	snprintf(sb->node_id, sizeof(sb->node_id), "%s", PQgetvalue(res, 0, 1));
	snprintf(sb->placement_id, sizeof(sb->placement_id), "%s", PQgetvalue(res, 0, 4));
	sb->one_shot = PQgetvalue(res, 0, 5)[0] == 't';
	sb->env = json_loads(PQgetvalue(res, 0, 2), 0, &jerr);
	if (!sb->env)
		sb->env = json_object();
	return 0;
}

void rt_sandbox_free(struct rt_sandbox *sb)
{
	json_decref(sb->env);
	sb->env = NULL;
}

int rt_send_raw(struct rt_op *op, enum sbx_msg_kind kind, const void *data, size_t len, sbx_err *err)
{
	struct sbx_mq_pub p = { .type = sbx_msg_name(kind), .correlation_id = op->op_id };

	return sbx_mq_publish(op->r->ctx->mq, op->queue, data, len, &p, err);
}

int rt_send(struct rt_op *op, enum sbx_msg_kind kind, json_t *body, sbx_err *err)
{
	cleanup_free char *s = NULL;

	json_object_set_new(body, "sandbox_id", json_string(op->sb->id));
	json_object_set_new(body, "placement_id", json_string(op->sb->placement_id));
	json_object_set_new(body, "op_id", json_string(op->op_id));
	s = json_dumps(body, JSON_COMPACT);
	if (!s)
		return sbx_err_set(err, 500, "nomem", "out of memory");
	return rt_send_raw(op, kind, s, strlen(s), err);
}

int rt_start(struct rt_op *op, struct api_req *r, struct rt_sandbox *sb, enum sbx_msg_kind kind, json_t *body,
	     sbx_err *err)
{
	cleanup_free char *s = NULL;

	memset(op, 0, sizeof(*op));
	op->r = r;
	op->sb = sb;
	sbx_id_new(op->op_id);
	if (sbx_msg_route(kind, sb->node_id, op->queue, sizeof(op->queue), err) < 0)
		return -1;
	json_object_set_new(body, "sandbox_id", json_string(sb->id));
	json_object_set_new(body, "placement_id", json_string(sb->placement_id));
	json_object_set_new(body, "op_id", json_string(op->op_id));
	s = json_dumps(body, JSON_COMPACT);
	if (!s)
		return sbx_err_set(err, 500, "nomem", "out of memory");
	/* node events first: a restart of the node from now on ends the op */
	if (api_mq(r, err) < 0 || sbx_mq_events(r->ctx->mq, err) < 0 ||
	    sbx_mq_request(r->ctx->mq, op->queue, sbx_msg_name(kind), s, strlen(s), op->op_id, err) < 0)
		return sbx_err_set(err, 503, "mq_unavailable", "The sandbox's node cannot be reached now");
	return 0;
}

/* An op whose node announced a restart before it heard anything from the
 * node may still wait in the node's queue for the new agent: it gets this
 * long to show up, then it is taken as lost. */
#define RESTART_GRACE_MS 2000

static int node_restarted(sbx_err *err)
{
	return sbx_err_set(err, 503, "node_restarted",
			   "the sandbox's node agent restarted; the command's stream was lost "
			   "(background processes keep running)");
}

/* A node event: does it end this op? A "node.started" of the op's node
 * from another life than the one that served it does; before the op heard
 * from any, it starts the grace period. */
static bool restart_ends(struct rt_op *op, const sbx_mq_msg *m)
{
	cleanup_json json_t *b = NULL;
	json_error_t jerr;
	const char *node = NULL, *boot = NULL;

	if (sbx_msg_kind(m->type) != SBX_MSG_NODE_STARTED)
		return false;
	b = json_loadb(m->body, m->len, JSON_REJECT_DUPLICATES, &jerr);
	if (!b || json_unpack_ex(b, &jerr, JSON_STRICT, "{s:s, s:s}", "node_id", &node, "boot_id", &boot) < 0) {
		log_warnx("ignoring a malformed node.started event");
		return false;
	}
	if (strcmp(node, op->sb->node_id))
		return false;
	if (op->boot[0])
		return strcmp(op->boot, boot) != 0;
	if (!op->restart_seen)
		op->restart_seen = sbx_now_ms();
	return false;
}

/* nginx closes the FastCGI connection when its client goes away */
static bool client_closed(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

int rt_next(struct rt_op *op, long long deadline_ms, sbx_mq_msg *msg, sbx_err *err)
{
	sbx_mq *mq = op->r->ctx->mq;
	int cfd = op->r->fcgx->ipcFd;

	for (;;) {
		long long now = sbx_now_ms(), left = deadline_ms - now;
		int r;

		if (op->client_gone)
			return 0;
		if (op->restart_seen) {
			if (now - op->restart_seen >= RESTART_GRACE_MS)
				return node_restarted(err);
			if (left > op->restart_seen + RESTART_GRACE_MS - now)
				left = op->restart_seen + RESTART_GRACE_MS - now;
		}
		if (left <= 0)
			return 0;
		if (op->r->unflushed && !sbx_mq_buffered(mq)) {
			/* a frame held back for the next message must not wait with us */
			op->r->unflushed = false;
			if (FCGX_FFlush(op->r->fcgx->out) != 0 || FCGX_GetError(op->r->fcgx->out)) {
				op->client_gone = true;
				return 0;
			}
		}
		if (!sbx_mq_buffered(mq)) {
			struct pollfd p[2] = { { .fd = sbx_mq_fd(mq), .events = POLLIN },
					       { .fd = cfd, .events = POLLIN | POLLRDHUP } };
			int n = poll(p, cfd >= 0 ? 2 : 1, (int)(left > 1000 ? 1000 : left));
			if (n < 0 && errno != EINTR)
				return sbx_err_sys(err, "poll", "poll");
			if (cfd >= 0 && (p[1].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) && client_closed(cfd)) {
				op->client_gone = true;
				return 0;
			}
			if (n <= 0 || !(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
		}
		r = sbx_mq_next(mq, 0, msg, err);
		if (r < 0)
			return -1;
		if (r == 0)
			continue;
		if (msg->event) {
			bool end = restart_ends(op, msg);
			sbx_mq_msg_free(msg);
			if (end)
				return node_restarted(err);
			continue;
		}
		if (strcmp(msg->correlation_id, op->op_id) == 0) {
			if (!op->boot[0])
				snprintf(op->boot, sizeof(op->boot), "%s", msg->boot_id);
			op->restart_seen = 0;
			return 1;
		}
		sbx_mq_msg_free(msg); /* an earlier op's late event */
	}
}

void rt_error_event(const sbx_mq_msg *m, sbx_err *err)
{
	cleanup_json json_t *b = NULL;
	json_error_t jerr;
	const char *msg = NULL, *code = NULL;

	b = json_loadb(m->body, m->len, 0, &jerr);
	if (!b || json_unpack_ex(b, &jerr, 0, "{s:s, s?s}", "message", &msg, "code", &code) < 0) {
		sbx_err_set(err, 502, "bad_event", "The node sent a malformed error");
		return;
	}
	sbx_err_code(err, code ? code : "internal", "%s", msg);
}

int rt_call(struct api_req *r, struct rt_sandbox *sb, enum sbx_msg_kind kind, json_t *body, int timeout_ms,
	    json_t **reply, sbx_err *err)
{
	struct rt_op op;
	sbx_mq_msg m;
	long long deadline = sbx_now_ms() + timeout_ms;
	json_error_t jerr;
	int n;

	*reply = NULL;
	if (rt_start(&op, r, sb, kind, body, err) < 0)
		return -1;
	while ((n = rt_next(&op, deadline, &m, err)) == 1) {
		switch (sbx_msg_kind(m.type)) {
		case SBX_MSG_DONE:
			*reply = json_loadb(m.body, m.len, JSON_REJECT_DUPLICATES, &jerr);
			sbx_mq_msg_free(&m);
			if (!*reply)
				return sbx_err_set(err, 502, "bad_event", "The node sent a malformed answer");
			return 0;
		case SBX_MSG_ERROR:
			rt_error_event(&m, err);
			sbx_mq_msg_free(&m);
			return -1;
		default:
			sbx_mq_msg_free(&m);
		}
	}
	if (n < 0)
		return -1;
	return sbx_err_set(err, 504, "node_timeout", "The sandbox's node did not answer in time");
}
