/* Discovery and operator endpoints: /healthz, /metrics, templates, regions. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "api.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "metrics.h"
#include "mq.h"
#include "usage.h"
#include "msg.h"
#include "page.h"
#include "sql.h"

void h_healthz(struct api_req *r)
{
	sbx_err derr = SBX_ERR_INIT, merr = SBX_ERR_INIT, werr = SBX_ERR_INIT;
	bool db_ok, mq_ok, wk_ok = true, want_workers = false;
	char buf[8];
	json_t *data = json_object();
	char msg[600];

	if (sbx_query_get(r->m.query, "workers", buf, sizeof(buf), &werr) == 1 && strcmp(buf, "0") != 0)
		want_workers = true;
	db_ok = sbx_db_ping(&r->ctx->db, &derr) == 0;
	mq_ok = api_mq(r, &merr) == 0 && sbx_mq_ping(r->ctx->mq, &merr) == 0;
	json_object_set_new(data, "postgres", json_string(db_ok ? "ok" : "down"));
	json_object_set_new(data, "rabbitmq", json_string(mq_ok ? "ok" : "down"));
	if (want_workers) {
		sbx_mq_msg reply = { 0 };
		wk_ok = mq_ok && sbx_mq_rpc(r->ctx->mq, SBX_MSG_Q_PROVISION, sbx_msg_name(SBX_MSG_PING), "{}", 2, 3000,
					    &reply, &werr) == 0;
		sbx_mq_msg_free(&reply);
		json_object_set_new(data, "workers", json_string(wk_ok ? "ok" : "down"));
	}
	if (db_ok && mq_ok && wk_ok) {
		api_send_data(r, 200, "ok", data);
		return;
	}
	if (!db_ok)
		snprintf(msg, sizeof(msg), "postgres unavailable: %s", derr.msg);
	else if (!mq_ok)
		snprintf(msg, sizeof(msg), "rabbitmq unavailable: %s", merr.msg);
	else
		snprintf(msg, sizeof(msg), "workers unavailable: %s", werr.msg);
	log_warnx("healthz: %s", msg);
	{
		json_t *o = json_object();
		json_object_set_new(o, "message", json_string(msg));
		json_object_set_new(o, "code", json_string("unhealthy"));
		json_object_set_new(o, "data", data);
		api_send_json(r, 503, o);
	}
}

static bool is_loopback(const char *a)
{
	return a && (strncmp(a, "127.", 4) == 0 || strcmp(a, "::1") == 0 || strcmp(a, "unix:") == 0);
}

/* Nodes (heartbeat age, live sandboxes, this config's capacity), why
 * sandboxes were destroyed (the reaper's work among them), execs. */
static void metrics_from_db(struct api_req *r, FILE *f)
{
	cleanup_pgres PGresult *n = NULL, *d = NULL, *e = NULL;
	sbx_err err = SBX_ERR_INIT;

	if (sbx_db_query(&r->ctx->db, &n, &err,
			 "SELECT n.id, extract(epoch FROM now() - n.heartbeat_at)::float8, "
			 "(SELECT count(*) FROM sandboxes s WHERE s.node_id = n.id AND s.status IN "
			 "('starting', 'ready', 'pausing', 'paused', 'resuming')) FROM nodes n ORDER BY n.id",
			 0) == 0) {
		fprintf(f, "# HELP sbx_node_heartbeat_age_seconds Seconds since the node agent last said it is alive.\n"
			   "# TYPE sbx_node_heartbeat_age_seconds gauge\n");
		for (int i = 0; i < PQntuples(n); i++)
			fprintf(f, "sbx_node_heartbeat_age_seconds{node=\"%s\"} %s\n", PQgetvalue(n, i, 0),
				PQgetvalue(n, i, 1));
		fprintf(f, "# HELP sbx_node_sandboxes Sandboxes placed on the node and not ended.\n"
			   "# TYPE sbx_node_sandboxes gauge\n");
		for (int i = 0; i < PQntuples(n); i++)
			fprintf(f, "sbx_node_sandboxes{node=\"%s\"} %s\n", PQgetvalue(n, i, 0), PQgetvalue(n, i, 2));
		fprintf(f, "# HELP sbx_node_capacity Sandboxes a node runs at most (node_max_sandboxes).\n"
			   "# TYPE sbx_node_capacity gauge\n");
		for (int i = 0; i < PQntuples(n); i++)
			fprintf(f, "sbx_node_capacity{node=\"%s\"} %lld\n", PQgetvalue(n, i, 0),
				sbx_cfg_int(r->ctx->cfg, "node_max_sandboxes"));
	}
	if (sbx_db_query(&r->ctx->db, &d, &err,
			 "SELECT destroy_reason, count(*) FROM sandboxes WHERE destroy_reason IS NOT NULL "
			 "GROUP BY 1 ORDER BY 1",
			 0) == 0) {
		fprintf(f, "# HELP sbx_sandboxes_destroyed_total Sandboxes destroyed, by reason (user, or the reaper's: "
			   "idle_ttl, max_lifetime, one_shot_stopped, failed, ...).\n"
			   "# TYPE sbx_sandboxes_destroyed_total counter\n");
		for (int i = 0; i < PQntuples(d); i++)
			fprintf(f, "sbx_sandboxes_destroyed_total{reason=\"%s\"} %s\n", PQgetvalue(d, i, 0),
				PQgetvalue(d, i, 1));
	}
	if (sbx_db_query(&r->ctx->db, &e, &err,
			 "SELECT count(*), coalesce(sum(duration_ms), 0) / 1000.0, count(*) FILTER (WHERE timed_out) "
			 "FROM execs",
			 0) == 0 &&
	    PQntuples(e) == 1) {
		fprintf(f, "# HELP sbx_execs_total Commands run in sandboxes (as the node recorded them).\n"
			   "# TYPE sbx_execs_total counter\nsbx_execs_total %s\n"
			   "# HELP sbx_exec_duration_seconds_total Time commands ran, summed.\n"
			   "# TYPE sbx_exec_duration_seconds_total counter\nsbx_exec_duration_seconds_total %s\n"
			   "# HELP sbx_execs_timed_out_total Commands killed at their timeout.\n"
			   "# TYPE sbx_execs_timed_out_total counter\nsbx_execs_timed_out_total %s\n",
			PQgetvalue(e, 0, 0), PQgetvalue(e, 0, 1), PQgetvalue(e, 0, 2));
	}
	if (err.msg[0])
		log_warnx("metrics: %s", err.msg);
}

/* The provisioners' queue: what waits, and who takes it. */
static void metrics_queues(struct api_req *r, FILE *f)
{
	sbx_err err = SBX_ERR_INIT;
	long msgs, cons;

	if (sbx_mq_queue_depth(r->ctx->mq, SBX_MSG_Q_PROVISION, &msgs, &cons, &err) < 0) {
		log_warnx("metrics: %s", err.msg);
		return;
	}
	fprintf(f, "# HELP sbx_queue_messages Messages waiting in a RabbitMQ queue.\n# TYPE sbx_queue_messages gauge\n"
		   "sbx_queue_messages{queue=\"%s\"} %ld\n"
		   "# HELP sbx_queue_consumers Consumers of a RabbitMQ queue.\n# TYPE sbx_queue_consumers gauge\n"
		   "sbx_queue_consumers{queue=\"%s\"} %ld\n",
		SBX_MSG_Q_PROVISION, msgs, SBX_MSG_Q_PROVISION, cons);
}

void h_metrics(struct api_req *r)
{
	cleanup_pgres PGresult *res = NULL;
	sbx_err err = SBX_ERR_INIT;
	const char *fwd = api_param(r, "HTTP_X_FORWARDED_FOR");
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	/* local only, or an operator key: metrics name every organisation */
	if (!is_loopback(api_param(r, "REMOTE_ADDR")) || (fwd && *fwd)) {
		if (api_authenticate(r, &err) < 0) {
			api_send_error(r, &err);
			return;
		}
		if (!r->org.is_admin) {
			sbx_err_set(&err, 403, "forbidden", "Metrics need an operator key");
			api_send_error(r, &err);
			return;
		}
	}
	if (sbx_db_query(&r->ctx->db, &res, &err,
			 "SELECT s.st::text, count(x.id) FROM unnest(enum_range(NULL::sandbox_status)) s(st) "
			 "LEFT JOIN sandboxes x ON x.status = s.st GROUP BY s.st ORDER BY s.st",
			 0) < 0) {
		api_send_error(r, &err);
		return;
	}
	f = open_memstream(&text, &len);
	if (!f) {
		sbx_err_set(&err, 500, "nomem", "out of memory");
		api_send_error(r, &err);
		return;
	}
	fprintf(f, "# HELP sbx_sandboxes Sandboxes by status.\n# TYPE sbx_sandboxes gauge\n");
	for (int i = 0; i < PQntuples(res); i++)
		fprintf(f, "sbx_sandboxes{status=\"%s\"} %s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
	fprintf(f, "# HELP sbx_api_up The API answers.\n# TYPE sbx_api_up gauge\nsbx_api_up 1\n");
	metrics_from_db(r, f);
	metrics_queues(r, f);
	api_metrics_write(f);
	fclose(f);
	api_send_text(r, 200, "text/plain; version=0.0.4", text);
	free(text);
}

/* GET /usage?from=&to=: the caller's organisation (usage.h). */
void h_usage(struct api_req *r)
{
	sbx_err err = SBX_ERR_INIT;
	char from[64], to[64];
	int hf, ht;
	json_t *u;

	hf = sbx_query_get(r->m.query, "from", from, sizeof(from), &err);
	ht = hf < 0 ? -1 : sbx_query_get(r->m.query, "to", to, sizeof(to), &err);
	if (hf < 0 || ht < 0) {
		sbx_err_set(&err, 400, "invalid_query", "from and to must be RFC 3339 times or dates");
		api_send_error(r, &err);
		return;
	}
	if (sbx_usage(&r->ctx->db, r->ctx->cfg, r->org.org_id, hf == 1 ? from : NULL, ht == 1 ? to : NULL, &u,
		      &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 200, "Usage retrieved", u);
}

int api_template_lookup(struct api_req *r, const char *name, char *out, size_t outsz, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	if (sbx_db_query(&r->ctx->db, &res, err, SQL_TEMPLATE_LOOKUP, 2, sbx_cfg_str(r->ctx->cfg, "default_template"),
			 name) < 0)
		return -1;
	if (PQgetisnull(res, 0, 0))
		return sbx_err_set(err, 400, "unknown_template", "Unknown template '%.64s'. Available: %s", name,
				   PQgetvalue(res, 0, 1));
	if ((size_t)snprintf(out, outsz, "%s", PQgetvalue(res, 0, 0)) >= outsz)
		return sbx_err_set(err, 500, "template", "template name too long");
	return 0;
}

void h_templates(struct api_req *r)
{
	cleanup_pgres PGresult *res = NULL;
	sbx_err err = SBX_ERR_INIT;
	json_t *arr;

	/* the default first, the other templates by name, then the aliases */
	if (sbx_db_query(&r->ctx->db, &res, &err,
			 AVAILABLE_SQL "SELECT coalesce(jsonb_agg(jsonb_build_object('name', name, 'display_name', "
				       "display_name, 'description', description) ORDER BY k, name), '[]') FROM names",
			 1, sbx_cfg_str(r->ctx->cfg, "default_template")) < 0) {
		api_send_error(r, &err);
		return;
	}
	arr = api_json_from_row(res, 0, 0);
	/* the object form: the Go SDK reads only data.templates, the others
	 * take either form */
	api_send_data(r, 200, "Templates retrieved", json_pack("{s:o}", "templates", arr ? arr : json_array()));
}

json_t *api_region_json(const sbx_config *c)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:b, s:s}", "id", sbx_cfg_str(c, "region_id"), "name",
			 sbx_cfg_str(c, "region_name"), "country", sbx_cfg_str(c, "region_country"), "continent",
			 sbx_cfg_str(c, "region_continent"), "enabled", 1, "type", "sandbox");
}

void h_regions(struct api_req *r)
{
	api_send_data(r, 200, "Regions retrieved", json_pack("{s:[o]}", "regions", api_region_json(r->ctx->cfg)));
}
