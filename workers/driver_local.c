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
#include "reply.h"
#include "roles.h"

int sandbox_rec_load(sbx_db *db, const char *id, struct sandbox_rec *out, char *status, size_t stsz,
		     sbx_err *err)
{
	cleanup_pgres PGresult *r = NULL;

	memset(out, 0, sizeof(*out));
	if (sbx_db_query(db, &r, err,
			 "SELECT s.id, s.template, coalesce(s.node_id, ''), s.cpu, s.memory_mb, s.disk_gb, s.env::text, "
			 "s.status, coalesce(v.id, ''), coalesce(s.mount_path, ''), coalesce(v.size_gb, 0), "
			 "coalesce(v.created_for = s.id, false), s.placement_id, s.egress_mode, s.egress_allow::text, "
			 "coalesce((SELECT p.image_repo || '@' || p.image_digest FROM snapshots p "
			 "  WHERE p.id = s.from_snapshot AND p.image_digest IS NOT NULL), ''), coalesce(s.from_snapshot, ''), "
			 "coalesce(v.node_id, '') "
			 "FROM sandboxes s LEFT JOIN volumes v ON v.attached_sandbox_id = s.id WHERE s.id = $1",
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
	snprintf(out->placement_id, sizeof(out->placement_id), "%s", PQgetvalue(r, 0, 12));
	out->env_json = strdup(PQgetvalue(r, 0, 6));
	if (status)
		snprintf(status, stsz, "%s", PQgetvalue(r, 0, 7));
	snprintf(out->volume_id, sizeof(out->volume_id), "%s", PQgetvalue(r, 0, 8));
	snprintf(out->mount_path, sizeof(out->mount_path), "%s", PQgetvalue(r, 0, 9));
	out->volume_gb = atoi(PQgetvalue(r, 0, 10));
	out->volume_create = PQgetvalue(r, 0, 11)[0] == 't';
	snprintf(out->egress_mode, sizeof(out->egress_mode), "%s", PQgetvalue(r, 0, 13));
	out->egress_allow_json = strdup(PQgetvalue(r, 0, 14));
	snprintf(out->image, sizeof(out->image), "%s", PQgetvalue(r, 0, 15));
	snprintf(out->from_snapshot, sizeof(out->from_snapshot), "%s", PQgetvalue(r, 0, 16));
	snprintf(out->volume_node, sizeof(out->volume_node), "%s", PQgetvalue(r, 0, 17));
	return out->env_json && out->egress_allow_json ? 0 : sbx_err_sys(err, "nomem", "strdup");
}

void sandbox_rec_free(struct sandbox_rec *s)
{
	free(s->env_json);
	s->env_json = NULL;
	free(s->egress_allow_json);
	s->egress_allow_json = NULL;
}

int driver_init(struct driver *d, const sbx_config *cfg, sbx_err *err)
{
	memset(d, 0, sizeof(*d));
	d->cfg = cfg;
	d->ops = !strcmp(sbx_cfg_str(cfg, "driver"), "nomad") ? &driver_nomad_ops : &driver_local_ops;
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

/* One request to a node agent and its {ok, error, code} reply. */
static int node_call(struct driver *d, const char *node_id, enum sbx_msg_kind k, json_t *body, int timeout_ms,
		     const char *const *extra, struct sbx_reply *rep, sbx_err *err)
{
	if (!body)
		return sbx_err_set(err, 500, "nomem", "building a %s request", sbx_msg_name(k));
	if (!d->rpc && sbx_mq_open(&d->rpc, sbx_cfg_str(d->cfg, "amqp_url"), err) < 0)
		return -1;
	if (sbx_msg_call(d->rpc, k, node_id, body, timeout_ms, extra, rep, err) < 0) {
		if (!strcmp(err->code, "bad_reply"))
			return sbx_err_set(err, 503, "bad_reply", "node %s: %s reply: %s", node_id,
					   sbx_msg_name(k), err->msg);
		return sbx_err_ctx(err, "node %s", node_id);
	}
	return 0;
}

int driver_node_call(struct driver *d, const char *node_id, enum sbx_msg_kind k, json_t *body, int timeout_ms,
		     const char *const *extra, struct sbx_reply *rep, sbx_err *err)
{
	return node_call(d, node_id, k, body, timeout_ms, extra, rep, err);
}

static int local_start(struct driver *d, const struct sandbox_rec *s, struct placement *out, sbx_err *err)
{
	static const char *const extra[] = { "container_id", "placement_id", NULL };
	const char *node = worker_node_id(d->cfg);
	cleanup_json json_t *env = NULL, *body = NULL, *allow = NULL;
	cleanup_reply struct sbx_reply rep = { 0 };
	json_error_t jerr;
	const char *cid, *plc;

	/* a snapshot deleted since the create checked it: never the bare template instead */
	if (s->from_snapshot[0] && !s->image[0])
		return sbx_err_set(err, 503, "start_failed", "snapshot %s is gone", s->from_snapshot);
	env = json_loads(s->env_json ? s->env_json : "{}", 0, &jerr);
	allow = json_loads(s->egress_allow_json ? s->egress_allow_json : "[]", 0, &jerr);
	if (!allow)
		allow = json_array();
	/* the policy goes with the start: the node puts it in force before the
	 * container runs (or at a warm hand-over), or the start fails (never a
	 * looser policy) */
	body = json_pack("{s:s, s:s, s:s, s:i, s:i, s:i, s:O, s:{s:s, s:O}}", "sandbox_id", s->id, "placement_id",
			 s->placement_id, "template", s->template, "cpu", s->cpu, "memory_mb", s->memory_mb, "disk_gb",
			 s->disk_gb, "env", env ? env : json_object(), "egress", "mode",
			 s->egress_mode[0] ? s->egress_mode : "deny_all", "allow", allow);
	if (body && s->volume_id[0])
		json_object_set_new(body, "volume",
				    json_pack("{s:s, s:s, s:i, s:b}", "id", s->volume_id, "mount_path",
					      s->mount_path[0] ? s->mount_path : "/workspace", "size_gb", s->volume_gb,
					      "create", s->volume_create));
	if (body && s->image[0])
		json_object_set_new(body, "image", json_string(s->image));
	/* less than the API waits, so a node that does not answer is reported, not guessed */
	if (node_call(d, node, SBX_MSG_START, body, (int)(sbx_cfg_int(d->cfg, "rpc_timeout") - 2) * 1000, extra, &rep,
		      err) < 0)
		return -1;
	if (!rep.ok)
		return sbx_err_set(err, 503, rep.code && !strcmp(rep.code, "no_capacity") ? "no_capacity" : "start_failed",
				   "%s", rep.error ? rep.error : "the node could not start the sandbox");
	cid = sbx_reply_str(&rep, "container_id");
	plc = sbx_reply_str(&rep, "placement_id");
	/* a warm start names the pool member it handed over */
	if (plc && !sbx_id_valid(plc))
		return sbx_err_set(err, 503, "bad_reply", "node %s named a malformed placement", node);
	snprintf(out->node_id, sizeof(out->node_id), "%s", node);
	snprintf(out->placement_id, sizeof(out->placement_id), "%s", plc ? plc : s->placement_id);
	snprintf(out->container_id, sizeof(out->container_id), "%s", cid ? cid : out->placement_id);
	return 0;
}

static int local_destroy(struct driver *d, const struct sandbox_rec *s, sbx_err *err)
{
	/* a record that never reached a node: ask this one all the same */
	const char *node = s->node_id[0] ? s->node_id : worker_node_id(d->cfg);
	cleanup_json json_t *body = json_pack("{s:s, s:s}", "sandbox_id", s->id, "placement_id", s->placement_id);
	cleanup_reply struct sbx_reply rep = { 0 };

	/* Less than the API waits, as for a start. A node agent that died with
	 * the request consumed never answers: the provisioner (one message at a
	 * time) waits this long before anything else it holds moves, and a
	 * destroy not confirmed is the reaper's to finish. */
	if (node_call(d, node, SBX_MSG_DESTROY, body, (int)(sbx_cfg_int(d->cfg, "rpc_timeout") - 2) * 1000, NULL,
		      &rep, err) < 0)
		return -1;
	if (!rep.ok)
		return sbx_err_set(err, 503, "destroy_failed", "%s", rep.error ? rep.error : "the node could not destroy it");
	return 0;
}

const struct driver_ops driver_local_ops = {
	.name = "local",
	.start = local_start,
	.destroy = local_destroy,
};
