/* The provisioner: takes work from its queue (sbx.provision): pings (which
 * prove the whole path: queue, reply-to, request id in the log), provision
 * and destroy. A driver decides where a sandbox runs. The record is the
 * source of truth: 'ready' is written only if the record is still
 * 'starting' and nobody asked to destroy it meanwhile; otherwise what was
 * made is undone at once.
 *
 * The broker may be down when we start or go away later: we never exit for
 * that, we retry with back-off, so the master does not see a crash loop. */
#include "config.h"
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "daemon.h"
#include "json.h"
#include "cleanup.h"
#include "db.h"
#include "driver.h"
#include "id.h"
#include "log.h"
#include "mq.h"
#include "msg.h"
#include "reply.h"
#include "roles.h"
#include "sandbox.h"
#include "sandbox_state.h"

#define NEXT_WAIT_MS 1000 /* how long one wait for a message may delay a drain */

/* (Re)connects from scratch: a fresh handle declares the queue before it
 * consumes, so a broker that lost the queue gets it back. */
static int consume_setup(sbx_mq **mq, const char *url, sbx_err *err)
{
	sbx_mq_close(*mq);
	*mq = NULL;
	if (sbx_mq_open(mq, url, err) < 0)
		return -1;
	if (sbx_mq_declare_queue(*mq, SBX_MSG_Q_PROVISION, err) < 0)
		return -1;
	/* one message at a time: a drain then finishes at most one */
	return sbx_mq_consume(*mq, SBX_MSG_Q_PROVISION, 1, err);
}

static int reply(sbx_mq *mq, const sbx_mq_msg *m, json_t *body_json /* stolen */, enum sbx_msg_kind kind,
		 sbx_err *err)
{
	cleanup_json json_t *j = body_json;
	char *body;
	int r;

	if (!j)
		return sbx_err_set(err, 0, "nomem", "building a reply");
	body = json_dumps(j, JSON_COMPACT);
	if (!body)
		return sbx_err_set(err, 0, "nomem", "encoding a reply");
	r = sbx_mq_publish(mq, m->reply_to, body, strlen(body),
			   &(struct sbx_mq_pub){ .correlation_id = m->correlation_id, .type = sbx_msg_name(kind) }, err);
	free(body);
	return r;
}

struct prov {
	sbx_db db;
	struct driver drv;
	const char *node;
	bool fault_points;
	const char *state_dir;
};

static json_t *do_provision(struct prov *p, const char *id)
{
	struct sandbox_rec rec;
	struct placement pl = { { 0 }, { 0 }, { 0 } };
	sbx_err err = SBX_ERR_INIT;
	char status[32];
	int rc;

	if (sandbox_rec_load(&p->db, id, &rec, status, sizeof(status), &err) < 0)
		return sbx_reply_fail(NULL, err.msg);
	if (sbx_sb_status_parse(status) != SBX_SB_STARTING) {
		sandbox_rec_free(&rec);
		return sbx_reply_fail(NULL, "the sandbox is no longer starting");
	}
	if (p->drv.ops->start(&p->drv, &rec, &pl, &err) < 0) {
		sandbox_rec_free(&rec);
		log_warnx("sandbox %s: start failed: %s", id, err.msg);
		return sbx_reply_fail(err.code, err.msg);
	}
	/* a test holds this gap (the node answered, ready not recorded yet):
	 * the node's orphan pass must keep the sandbox (sandbox-crash.t h) */
	fault_point(p->fault_points, p->state_dir, "provision-ready", id);
	rc = sbx_sandbox_ready(&p->db, id, pl.node_id, pl.container_id, pl.placement_id, &err);
	if (rc <= 0) {
		sbx_err derr = SBX_ERR_INIT;
		/* cancelled, failed by a deadline, or the database is gone: undo */
		snprintf(rec.node_id, sizeof(rec.node_id), "%s", pl.node_id);
		snprintf(rec.placement_id, sizeof(rec.placement_id), "%s", pl.placement_id);
		if (p->drv.ops->destroy(&p->drv, &rec, &derr) < 0)
			log_warnx("sandbox %s: undo failed (%s); the node's reaper will remove it", id, derr.msg);
		sandbox_rec_free(&rec);
		return sbx_reply_fail(NULL, err.msg[0] ? err.msg : "the sandbox was cancelled while it started");
	}
	sandbox_rec_free(&rec);
	log_info("sandbox %s: ready on node %s (placement %s)", id, pl.node_id, pl.placement_id);
	/* a test kills the provisioner here (ready recorded, no answer sent):
	 * the redelivery finds the record no longer starting, and the API
	 * must answer with the ready sandbox (sandbox-crash.t i) */
	fault_point(p->fault_points, p->state_dir, "provision-answer", id);
	return json_pack("{s:b, s:s, s:s}", "ok", 1, "node_id", pl.node_id, "container_id", pl.container_id);
}

json_t *provisioner_destroy(sbx_db *db, struct driver *drv, const char *id, const char *reason)
{
	struct sandbox_rec rec;
	sbx_err err = SBX_ERR_INIT;
	char status[32];

	if (sandbox_rec_load(db, id, &rec, status, sizeof(status), &err) < 0)
		return sbx_reply_fail(NULL, err.msg);
	if (sbx_sb_status_parse(status) == SBX_SB_DESTROYED && !reason) {
		sandbox_rec_free(&rec);
		return sbx_reply_ok();
	}
	if (drv->ops->destroy(drv, &rec, &err) < 0) {
		sandbox_rec_free(&rec);
		log_warnx("sandbox %s: destroy failed: %s (the reaper retries)", id, err.msg);
		return sbx_reply_fail(NULL, err.msg);
	}
	sandbox_rec_free(&rec);
	if (sbx_sandbox_destroyed(db, id, reason, &err) < 0)
		return sbx_reply_fail(NULL, err.msg);
	log_info("sandbox %s: destroyed", id);
	return sbx_reply_ok();
}

/* Handles one delivery. Returns < 0 only when the connection failed (the
 * caller reconnects); a bad message is rejected, not fatal. */
static int handle(sbx_mq *mq, const sbx_mq_msg *m, struct prov *p, sbx_err *err)
{
	cleanup_json json_t *body = NULL;
	json_error_t jerr;
	const char *why = NULL, *sandbox_id = NULL;
	enum sbx_msg_kind kind = sbx_msg_kind(m->type);
	bool ping = kind == SBX_MSG_PING;

	if (!(sbx_msg_flags(kind) & SBX_MSGF_PROVISIONER)) {
		why = "unknown message type";
	} else if (!m->reply_to[0]) {
		why = "no reply_to";
	} else {
		body = json_loadb(m->body, m->len, JSON_REJECT_DUPLICATES, &jerr);
		/* a ping carries nothing: exactly {} */
		if (!body || (ping && json_unpack_ex(body, &jerr, JSON_STRICT, "{}") < 0) ||
		    (!ping && json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s}", "sandbox_id", &sandbox_id) < 0))
			why = jerr.text;
		else if (!ping && !sbx_id_valid(sandbox_id))
			why = "sandbox_id is not an id";
	}
	if (why) {
		log_warnx("rejecting message of type '%.32s' (%zu bytes): %s", m->type, m->len, why);
		return sbx_mq_reject(mq, m->delivery_tag, 0, err);
	}
	switch (kind) {
	case SBX_MSG_PING:
		if (reply(mq, m,
			  json_pack("{s:b, s:s, s:i, s:s}", "ok", 1, "role", "provisioner", "pid", (int)getpid(),
				    "node", p->node),
			  SBX_MSG_PONG, err) < 0)
			return -1; /* not acked: the broker gives it to someone else */
		log_info("ping answered");
		break;
	case SBX_MSG_PROVISION:
		if (reply(mq, m, do_provision(p, sandbox_id), SBX_MSG_PROVISIONED, err) < 0)
			return -1;
		break;
	case SBX_MSG_DESTROY:
		if (reply(mq, m, provisioner_destroy(&p->db, &p->drv, sandbox_id, NULL), SBX_MSG_DESTROYED, err) < 0)
			return -1;
		break;
	default:
		log_warnx("rejecting message of type '%s': no provisioner handles it yet", m->type);
		return sbx_mq_reject(mq, m->delivery_tag, 0, err);
	}
	return sbx_mq_ack(mq, m->delivery_tag, err);
}

int provisioner_run(const sbx_config *cfg, int index, void *ctx)
{
	const char *url = sbx_cfg_str(cfg, "amqp_url");
	const char *node = worker_node_id(cfg);
	long retry_ms = WORKER_RETRY_MIN_MS;
	bool ready = false;
	sbx_mq *mq = NULL;
	struct prov p = { .node = node,
			  .fault_points = sbx_cfg_bool(cfg, "fault_points"),
			  .state_dir = sbx_cfg_str(cfg, "state_dir") };
	sbx_err ierr = SBX_ERR_INIT;

	(void)ctx;
	if (sbx_db_open(&p.db, sbx_cfg_str(cfg, "db_url"), &ierr) < 0)
		log_warnx("%s (retried per request)", ierr.msg);
	driver_init(&p.drv, cfg, &ierr);
	p.drv.db = &p.db;
	log_info("provisioner #%d started (node %s)", index, node);
	while (!sbx_child_stop) {
		sbx_err err = SBX_ERR_INIT;
		sbx_mq_msg msg;
		int r;

		if (!ready) {
			if (consume_setup(&mq, url, &err) < 0) {
				log_warnx("%s; retrying in %ld ms", err.msg, retry_ms);
				worker_sleep_ms(retry_ms);
				retry_ms = worker_retry_next(retry_ms);
				continue;
			}
			ready = true;
			retry_ms = WORKER_RETRY_MIN_MS;
			log_info("consuming %s", SBX_MSG_Q_PROVISION);
		}
		r = sbx_mq_next(mq, NEXT_WAIT_MS, &msg, &err);
		if (r == 0)
			continue;
		if (r < 0) {
			log_warnx("%s; reconnecting", err.msg);
			ready = false;
			continue;
		}
		sbx_log_set_request_id(msg.request_id);
		if (handle(mq, &msg, &p, &err) < 0) {
			log_warnx("%s; reconnecting", err.msg);
			ready = false;
		}
		sbx_log_set_request_id(NULL);
		sbx_mq_msg_free(&msg);
	}
	sbx_mq_close(mq);
	driver_fini(&p.drv);
	sbx_db_close(&p.db);
	log_info("provisioner #%d stopped", index);
	return 0;
}
