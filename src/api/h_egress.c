/* Egress: the policy check shared by create, and PUT /sandboxes/{id}/egress,
 * which switches a running sandbox's policy without restarting it.
 *
 * The switch is the node's (one nft transaction, in force before it
 * answers); the record follows only once the node said so, under a row
 * lock held across the request, so two switches of one sandbox never
 * interleave (the second waits, then is a 409) and the record never shows a policy the
 * node is not enforcing. A node that refuses leaves its old policy, and
 * the record keeps it too. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "api.h"
#include "sql.h"
#include "cleanup.h"
#include "egress_policy.h"
#include "json.h"
#include "log.h"
#include "reply.h"
#include "sandbox_state.h"

int api_egress_check(const char *mode, const json_t *allow, sbx_err *err)
{
	static struct sbx_egress p; /* 50 entries of 270 bytes: not on the stack */

	return sbx_egress_parse(mode, allow, &p, err);
}


static const struct sbx_jfield egress_body[] = {
	{ "mode", SBX_J_STRING, true, 1, 16 },
	{ "allow", SBX_J_ARRAY, false, 0, 50 },
};

void h_sandbox_egress(struct api_req *r)
{
	/* the node's answer carries what it resolved: it cannot write the
	 * record itself while we hold its row */
	static const char *const extra[] = { "resolved", NULL };
	cleanup_json json_t *body = NULL, *msg = NULL;
	cleanup_pgres PGresult *res = NULL;
	cleanup_free char *allow_s = NULL;
	cleanup_reply struct sbx_reply rep = { 0 };
	sbx_err err = SBX_ERR_INIT;
	const char *mode;
	json_t *allow, *s;
	char status[32], node[256], place[SBX_ID_LEN + 1];

	if (api_json_body(r, &body, &err) < 0 ||
	    sbx_json_check(body, egress_body, SBX_ARRAY_LEN(egress_body), NULL, &err) < 0)
		goto fail;
	mode = sbx_json_str(body, "mode", "");
	allow = json_object_get(body, "allow");
	if (api_egress_check(mode, allow, &err) < 0)
		goto fail;
	allow_s = json_dumps(allow && json_is_array(allow) ? allow : json_array(), JSON_COMPACT);

	if (sbx_db_begin(&r->ctx->db, &err) < 0)
		goto fail;
	/* a second switch in flight answers 409 after a short wait (a plain
	 * update of the row, e.g. its activity time, holds it for an instant) */
	if (sbx_db_query(&r->ctx->db, NULL, &err, "SET LOCAL lock_timeout = '3s'", 0) < 0 ||
	    sbx_db_query(&r->ctx->db, &res, &err,
			 "SELECT status, coalesce(node_id, ''), placement_id FROM sandboxes WHERE id = $1 AND org_id = $2 "
			 "FOR UPDATE",
			 2, r->m.id, r->org.org_id) < 0) {
		if (!strcmp(err.code, "db:55P03"))
			sbx_err_set(&err, 409, "conflict", "Another change to this sandbox's egress is in flight");
		goto rollback;
	}
	if (PQntuples(res) != 1) {
		sbx_err_set(&err, 404, "not_found", "Sandbox not found");
		goto rollback;
	}
	snprintf(status, sizeof(status), "%s", PQgetvalue(res, 0, 0));
	snprintf(node, sizeof(node), "%s", PQgetvalue(res, 0, 1));
	snprintf(place, sizeof(place), "%s", PQgetvalue(res, 0, 2));
	if (strcmp(status, "ready") != 0 || !node[0]) {
		sbx_err_set(&err, 400, "invalid_state", "Sandbox is %s; egress can be changed only when it is ready",
			    status);
		goto rollback;
	}

	msg = json_pack("{s:s, s:s, s:{s:s, s:O}}", "sandbox_id", r->m.id, "placement_id", place, "egress", "mode", mode,
			"allow",
			allow && json_is_array(allow) ? allow : json_array());
	if (!msg) {
		sbx_err_set(&err, 500, "nomem", "out of memory");
		goto rollback;
	}
	if (api_mq(r, &err) < 0 ||
	    sbx_msg_call(r->ctx->mq, SBX_MSG_EGRESS, node, msg, (int)sbx_cfg_int(r->ctx->cfg, "rpc_timeout") * 1000,
			 extra, &rep, &err) < 0) {
		log_warnx("sandbox %s: egress %s not confirmed by node %s: %s", r->m.id, mode, node, err.msg);
		sbx_err_set(&err, 503, "egress_unconfirmed",
			    "The node did not confirm the new egress policy; the sandbox keeps the one it shows");
		goto rollback;
	}
	if (!rep.ok) {
		bool refused = rep.code && !strcmp(rep.code, "not_supported");
		log_warnx("sandbox %s: egress %s refused by node %s: %s", r->m.id, mode, node,
			  rep.error ? rep.error : "no reason given");
		sbx_err_set(&err, refused ? 400 : 503, refused ? "not_supported" : "egress_failed",
			    "The egress policy could not be applied (the previous one stays in force): %s",
			    rep.error ? rep.error : "no reason given");
		goto rollback;
	}
	PQclear(res);
	res = NULL;
	if (sbx_db_query(&r->ctx->db, NULL, &err,
			 "UPDATE sandboxes SET egress_mode = $2, egress_allow = $3::jsonb, block_outbound = ($2 = 'deny_all'), "
			 "egress_resolved = coalesce($4::jsonb, '{}') WHERE id = $1",
			 4, r->m.id, mode, allow_s, sbx_reply_str(&rep, "resolved")) < 0 ||
	    sbx_db_commit(&r->ctx->db, &err) < 0) {
		/* the node enforces the new policy; the record lags: say so */
		log_warnx("sandbox %s: egress %s in force but not recorded: %s", r->m.id, mode, err.msg);
		goto rollback;
	}
	log_info("sandbox %s: egress switched to %s", r->m.id, mode);
	if (sbx_db_query(&r->ctx->db, &res, &err,
			 SQL_SANDBOX_JSON, 2, r->m.id,
			 r->org.org_id) < 0 ||
	    PQntuples(res) != 1)
		goto fail;
	s = api_json_from_row(res, 0, 0);
	api_sandbox_public(r->ctx->cfg, s);
	json_object_set_new(s, "network_updated", json_true());
	api_send_data(r, 200, "Sandbox egress updated", s);
	return;
rollback:
	sbx_db_rollback(&r->ctx->db);
fail:
	if (!err.http)
		sbx_err_set(&err, 500, "internal", "egress update failed");
	api_send_error(r, &err);
}
