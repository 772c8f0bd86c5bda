/* Pause, resume and keep-alive of a sandbox (API.md "Sandboxes"). Pause and
 * resume are asynchronous: the status moves to pausing/resuming here, the
 * node takes the request on and answers at once, and its process moves the
 * record on when it ends (workers/node_pause.c); /wait follows. The answer
 * is {message} and nothing else: the official SDKs treat a present data as
 * the result. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "sql.h"
#include "bodies.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "reply.h"
#include "sandbox_state.h"

/* status, node and placement of one sandbox of the caller's; 404 when none. */
static int look(struct api_req *r, char *status, size_t stsz, char *node, size_t nsz, char place[SBX_ID_LEN + 1],
		sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	if (sbx_db_query(&r->ctx->db, &res, err,
			 "SELECT status, coalesce(node_id, ''), placement_id FROM sandboxes WHERE id = $1 AND org_id = $2",
			 2, r->m.id, r->org.org_id) < 0)
		return -1;
	if (PQntuples(res) != 1)
		return sbx_err_set(err, 404, "not_found", "Sandbox not found");
	snprintf(status, stsz, "%s", PQgetvalue(res, 0, 0));
	snprintf(node, nsz, "%s", PQgetvalue(res, 0, 1));
	snprintf(place, SBX_ID_LEN + 1, "%s", PQgetvalue(res, 0, 2));
	return 0;
}

static void pause_or_resume(struct api_req *r, bool pause)
{
	sbx_err err = SBX_ERR_INIT;
	char status[32], node[256], place[SBX_ID_LEN + 1];
	const char *verb = pause ? "paused" : "resumed";
	int ch;

	if (look(r, status, sizeof(status), node, sizeof(node), place, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	if (strcmp(status, pause ? "ready" : "paused")) {
		sbx_err_set(&err, 400, "bad_state", "Sandbox is %s; only a %s sandbox can be %s", status,
			    pause ? "ready" : "paused", verb);
		api_send_error(r, &err);
		return;
	}
	ch = pause ? sbx_sandbox_pause_begin(&r->ctx->db, r->m.id, r->org.org_id, &err)
		   : sbx_sandbox_resume_begin(&r->ctx->db, r->m.id, r->org.org_id, &err);
	if (ch <= 0) {
		if (ch == 0)
			sbx_err_set(&err, 409, "conflict", "Another change to this sandbox is in flight");
		api_send_error(r, &err);
		return;
	}
	{
		cleanup_json json_t *body = json_pack("{s:s, s:s}", "sandbox_id", r->m.id, "placement_id", place);
		cleanup_reply struct sbx_reply rep = { 0 };

		if (api_mq(r, &err) < 0 ||
		    sbx_msg_call(r->ctx->mq, pause ? SBX_MSG_PAUSE : SBX_MSG_RESUME, node, body,
				 (int)sbx_cfg_int(r->ctx->cfg, "rpc_timeout") * 1000, NULL, &rep, &err) < 0 ||
		    !rep.ok) {
			sbx_err e2 = SBX_ERR_INIT;
			char why[300];

			snprintf(why, sizeof(why), "%s", rep.json ? (rep.error ? rep.error : "no reason given") : err.msg);
			/* not taken on: the record goes back (the node's pass settles
			 * one that was taken on after all) */
			if ((pause ? sbx_sandbox_pause_undo(&r->ctx->db, r->m.id, &e2)
				   : sbx_sandbox_resume_undo(&r->ctx->db, r->m.id, &e2)) < 0)
				log_warnx("sandbox %s: undoing %s: %s", r->m.id, pause ? "pausing" : "resuming", e2.msg);
			log_warnx("sandbox %s: %s refused by its node: %s", r->m.id, pause ? "pause" : "resume", why);
			if (rep.json && rep.code && !strcmp(rep.code, "busy")) /* a snapshot in flight */
				sbx_err_set(&err, 409, "conflict", "Another change to this sandbox is in flight");
			else
				sbx_err_set(&err, 503, pause ? "pause_failed" : "resume_failed",
					    "The sandbox could not be %s: %s", verb, why);
			api_send_error(r, &err);
			return;
		}
	}
	log_info("sandbox %s: %s", r->m.id, pause ? "pausing" : "resuming");
	api_send_json(r, 200, json_pack("{s:s}", "message", pause ? "Sandbox is pausing" : "Sandbox is resuming"));
}

void h_sandbox_pause(struct api_req *r)
{
	pause_or_resume(r, true);
}

void h_sandbox_resume(struct api_req *r)
{
	pause_or_resume(r, false);
}

/* Keep-alive: the idle timeout becomes `timeout` seconds from now (the
 * lifetime is not extended: max_lifetime stays the bound). */
void h_sandbox_timeout(struct api_req *r)
{
	cleanup_json json_t *body = NULL;
	cleanup_pgres PGresult *res = NULL;
	sbx_err err = SBX_ERR_INIT;
	char secs[24], status[32], node[256], place[SBX_ID_LEN + 1];
	long long t;
	int ch;
	json_t *s;

	if (api_json_body(r, &body, &err) < 0 || api_body_check(body, &api_timeout_body, &err) < 0 ||
	    look(r, status, sizeof(status), node, sizeof(node), place, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	t = sbx_json_int(body, "timeout", 0);
	if (t > sbx_cfg_int(r->ctx->cfg, "max_lifetime")) {
		sbx_err_set(&err, 400, "invalid_field", "timeout must be between 60 and %lld",
			    sbx_cfg_int(r->ctx->cfg, "max_lifetime"));
		api_send_error(r, &err);
		return;
	}
	snprintf(secs, sizeof(secs), "%lld", t);
	ch = sbx_sandbox_keepalive(&r->ctx->db, r->m.id, r->org.org_id, secs, &err);
	if (ch <= 0) {
		if (ch == 0)
			sbx_err_set(&err, 400, "bad_state", "Sandbox is %s; only a live sandbox can be kept alive",
				    status);
		api_send_error(r, &err);
		return;
	}
	if (sbx_db_query(&r->ctx->db, &res, &err,
			 SQL_SANDBOX_JSON, 2, r->m.id,
			 r->org.org_id) < 0 ||
	    PQntuples(res) != 1) {
		if (!err.msg[0])
			sbx_err_set(&err, 404, "not_found", "Sandbox not found");
		api_send_error(r, &err);
		return;
	}
	s = api_json_from_row(res, 0, 0);
	api_sandbox_public(r->ctx->cfg, s);
	api_send_data(r, 200, "Sandbox timeout updated", s);
}
