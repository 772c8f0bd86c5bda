/* GET /sandboxes/{id}/stats?hoursAgo=N (API.md "Sandboxes"): a sandbox's
 * resource use over the last N hours, from the samples its node agent
 * keeps (workers/node_stats.c), ending with one taken as the request
 * arrived; src/lib/stats_view.c makes the public shape of them. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "page.h"
#include "reply.h"
#include "stats_view.h"

#define HOURS_MAX 720
void h_sandbox_stats(struct api_req *r)
{
	static const char *const extra[] = { "stats", NULL };
	cleanup_pgres PGresult *res = NULL;
	cleanup_json json_t *msg = NULL, *st = NULL;
	cleanup_reply struct sbx_reply rep = { 0 };
	sbx_err err = SBX_ERR_INIT;
	json_error_t jerr;
	json_t *data = NULL;
	char buf[16], status[32], node[256], place[SBX_ID_LEN + 1];
	long hours = 1;
	const char *text;
	int q = sbx_query_get(r->m.query, "hoursAgo", buf, sizeof(buf), &err);

	if (q < 0 || (q == 1 && (!buf[0] || strlen(buf) > 4 || strspn(buf, "0123456789") != strlen(buf) ||
				 (hours = atol(buf)) < 1 || hours > HOURS_MAX))) {
		sbx_err_set(&err, 400, "invalid_query", "hoursAgo must be an integer between 1 and %d", HOURS_MAX);
		goto fail;
	}
	if (sbx_db_query(&r->ctx->db, &res, &err,
			 "SELECT status, coalesce(node_id, ''), coalesce(placement_id, '') FROM sandboxes "
			 "WHERE id = $1 AND org_id = $2",
			 2, r->m.id, r->org.org_id) < 0)
		goto fail;
	if (PQntuples(res) != 1) {
		sbx_err_set(&err, 404, "not_found", "Sandbox not found");
		goto fail;
	}
	snprintf(status, sizeof(status), "%s", PQgetvalue(res, 0, 0));
	snprintf(node, sizeof(node), "%s", PQgetvalue(res, 0, 1));
	snprintf(place, sizeof(place), "%s", PQgetvalue(res, 0, 2));
	if (strcmp(status, "ready") || !node[0] || !place[0]) {
		sbx_err_set(&err, 400, "bad_state", "Sandbox is %s; its stats are read only while it is ready", status);
		goto fail;
	}
	msg = json_pack("{s:s, s:s, s:i}", "sandbox_id", r->m.id, "placement_id", place, "hours", (int)hours);
	if (!msg) {
		sbx_err_set(&err, 500, "nomem", "out of memory");
		goto fail;
	}
	if (api_mq(r, &err) < 0 ||
	    sbx_msg_call(r->ctx->mq, SBX_MSG_STATS, node, msg, (int)sbx_cfg_int(r->ctx->cfg, "rpc_timeout") * 1000,
			 extra, &rep, &err) < 0) {
		log_warnx("sandbox %s: stats from node %s: %s", r->m.id, node, err.msg);
		sbx_err_set(&err, 503, "stats_unavailable", "The sandbox's node did not answer with its stats");
		goto fail;
	}
	if (!rep.ok) {
		/* the record moved on meanwhile (a pause begun, a destroy) */
		if (rep.code && !strcmp(rep.code, "bad_state"))
			sbx_err_set(&err, 400, "bad_state", "Sandbox is %s; its stats are read only while it is ready",
				    rep.error ? rep.error : "not ready");
		else if (rep.code && !strcmp(rep.code, "not_found"))
			sbx_err_set(&err, 400, "bad_state", "Sandbox is not running on its node");
		else
			sbx_err_set(&err, 503, "stats_unavailable", "The sandbox's stats could not be read: %s",
				    rep.error ? rep.error : "no reason given");
		goto fail;
	}
	text = sbx_reply_str(&rep, "stats");
	st = text ? json_loads(text, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	if (!st) {
		sbx_err_set(&err, 502, "bad_reply", "malformed stats from the node");
		goto fail;
	}
	if (sbx_stats_view(st, &data, &err) < 0)
		goto fail;
	api_send_data(r, 200, "Sandbox stats", data);
	return;
fail:
	if (!err.http)
		sbx_err_set(&err, 500, "internal", "stats failed");
	api_send_error(r, &err);
}
