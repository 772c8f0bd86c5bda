/* The local driver: the sandbox runs on this machine's node agent, asked
 * over its own queue (sbx.node.<node id>) with a deadline. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cleanup.h"
#include "driver.h"
#include "json.h"
#include "log.h"
#include "roles.h"

void node_queue_name(const char *node_id, char *out, size_t outsz)
{
	snprintf(out, outsz, "sbx.node.%s", node_id);
}

int sandbox_rec_load(sbx_db *db, const char *id, struct sandbox_rec *out, char *status, size_t stsz,
		     sbx_err *err)
{
	cleanup_pgres PGresult *r = NULL;

	memset(out, 0, sizeof(*out));
	if (sbx_db_query(db, &r, err,
			 "SELECT id, template, coalesce(node_id, ''), cpu, memory_mb, disk_gb, env::text, status "
			 "FROM sandboxes WHERE id = $1",
			 1, id) < 0)
		return -1;
	if (PQntuples(r) != 1)
		return sbx_err_set(err, 404, "not_found", "sandbox %s has no record", id);
	snprintf(out->id, sizeof(out->id), "%s", PQgetvalue(r, 0, 0));
	snprintf(out->template, sizeof(out->template), "%s", PQgetvalue(r, 0, 1));
	snprintf(out->node_id, sizeof(out->node_id), "%s", PQgetvalue(r, 0, 2));
	out->cpu = atoi(PQgetvalue(r, 0, 3));
	out->memory_mb = atoi(PQgetvalue(r, 0, 4));
	out->disk_gb = atoi(PQgetvalue(r, 0, 5));
	out->env_json = strdup(PQgetvalue(r, 0, 6));
	if (status)
		snprintf(status, stsz, "%s", PQgetvalue(r, 0, 7));
	return out->env_json ? 0 : sbx_err_sys(err, "nomem", "strdup");
}

void sandbox_rec_free(struct sandbox_rec *s)
{
	free(s->env_json);
	s->env_json = NULL;
}

int driver_init(struct driver *d, const sbx_config *cfg, sbx_err *err)
{
	memset(d, 0, sizeof(*d));
	d->cfg = cfg;
	d->ops = &driver_local_ops;
	/* a broker that is down now is retried per request */
	if (sbx_mq_open(&d->rpc, sbx_cfg_str(cfg, "amqp_url"), err) < 0)
		log_warnx("driver: %s", err->msg);
	return 0;
}

void driver_fini(struct driver *d)
{
	sbx_mq_close(d->rpc);
	d->rpc = NULL;
}

/* One request to a node agent; *reply_out is the decoded reply object. */
static int node_call(struct driver *d, const char *node_id, const char *type, json_t *body, int timeout_ms,
		     json_t **reply_out, sbx_err *err)
{
	cleanup_free char *msg = json_dumps(body, JSON_COMPACT);
	char q[300];
	sbx_mq_msg reply = { 0 };
	json_error_t jerr;
	json_t *rep;

	if (!msg)
		return sbx_err_set(err, 500, "nomem", "encoding a node request");
	if (!d->rpc && sbx_mq_open(&d->rpc, sbx_cfg_str(d->cfg, "amqp_url"), err) < 0)
		return -1;
	node_queue_name(node_id, q, sizeof(q));
	if (sbx_mq_rpc(d->rpc, q, type, msg, strlen(msg), timeout_ms, &reply, err) < 0)
		return sbx_err_ctx(err, "node %s", node_id);
	rep = json_loadb(reply.body, reply.len, JSON_REJECT_DUPLICATES, &jerr);
	sbx_mq_msg_free(&reply);
	if (!rep || !json_is_object(rep)) {
		json_decref(rep);
		return sbx_err_set(err, 503, "bad_reply", "node %s sent a malformed reply", node_id);
	}
	*reply_out = rep;
	return 0;
}

static int local_start(struct driver *d, const struct sandbox_rec *s, struct placement *out, sbx_err *err)
{
	const char *node = worker_node_id(d->cfg);
	cleanup_json json_t *env = NULL, *body = NULL, *rep = NULL;
	json_error_t jerr;
	const char *why = NULL, *code = NULL, *cid = NULL;
	int ok = 0;

	env = json_loads(s->env_json ? s->env_json : "{}", 0, &jerr);
	body = json_pack("{s:s, s:s, s:i, s:i, s:i, s:O}", "sandbox_id", s->id, "template", s->template, "cpu", s->cpu,
			 "memory_mb", s->memory_mb, "disk_gb", s->disk_gb, "env", env ? env : json_object());
	if (!body)
		return sbx_err_set(err, 500, "nomem", "building a start request");
	/* less than the API waits, so a node that does not answer is reported, not guessed */
	if (node_call(d, node, "start", body, (int)(sbx_cfg_int(d->cfg, "rpc_timeout") - 2) * 1000, &rep, err) < 0)
		return -1;
	if (json_unpack_ex(rep, &jerr, JSON_STRICT, "{s:b, s?s, s?s, s?s}", "ok", &ok, "error", &why, "code", &code,
			   "container_id", &cid) < 0)
		return sbx_err_set(err, 503, "bad_reply", "node %s: malformed start reply: %s", node, jerr.text);
	if (!ok)
		return sbx_err_set(err, 503, code && !strcmp(code, "no_capacity") ? "no_capacity" : "start_failed", "%s",
				   why ? why : "the node could not start the sandbox");
	snprintf(out->node_id, sizeof(out->node_id), "%s", node);
	snprintf(out->container_id, sizeof(out->container_id), "%s", cid ? cid : s->id);
	return 0;
}

static int local_destroy(struct driver *d, const struct sandbox_rec *s, sbx_err *err)
{
	/* a record that never reached a node: ask this one all the same */
	const char *node = s->node_id[0] ? s->node_id : worker_node_id(d->cfg);
	cleanup_json json_t *body = json_pack("{s:s}", "sandbox_id", s->id), *rep = NULL;
	json_error_t jerr;
	const char *why = NULL;
	int ok = 0;

	if (node_call(d, node, "destroy", body, 60000, &rep, err) < 0)
		return -1;
	if (json_unpack_ex(rep, &jerr, JSON_STRICT, "{s:b, s?s}", "ok", &ok, "error", &why) < 0)
		return sbx_err_set(err, 503, "bad_reply", "node %s: malformed destroy reply: %s", node, jerr.text);
	if (!ok)
		return sbx_err_set(err, 503, "destroy_failed", "%s", why ? why : "the node could not destroy it");
	return 0;
}

const struct driver_ops driver_local_ops = {
	.name = "local",
	.start = local_start,
	.destroy = local_destroy,
};
