/* The volume resource (API.md "Volumes"): list, create, get, delete. A
 * volume's image lives on one node, which makes it (admitting it against
 * its disk budget) before the record is written, and removes it after the
 * record says it is deleted; what a crash interrupts, the node's volume pass
 * finishes (workers/node_volume.c). The attachment to a sandbox is taken in
 * the sandbox's create (h_sandboxes.c) and given back by the database when
 * the sandbox ends (sql/009_persistence.sql). */
#include "config.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api.h"
#include "bodies.h"
#include "cleanup.h"
#include "json.h"
#include "log.h"
#include "page.h"
#include "reply.h"
#include "volumes.h"

bool api_volume_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n < 1 || n > 40)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
			return false;
	return true;
}

int api_volume_size_check(const sbx_config *cfg, const char *field, long long gb, sbx_err *err)
{
	long long lo = sbx_cfg_int(cfg, "volume_min_gb"), hi = sbx_cfg_int(cfg, "volume_max_gb");

	if (gb < lo || gb > hi)
		return sbx_err_set(err, 400, "invalid_field", "%s must be between %lld and %lld", field, lo, hi);
	return 0;
}

int api_volume_limits(struct api_req *r, long long gb, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	if (sbx_db_query(&r->ctx->db, &res, err,
			 "SELECT o.max_volumes, o.max_volume_gb, "
			 "(SELECT count(*) FROM volumes v WHERE v.org_id = o.id AND v.deleted_at IS NULL), "
			 "(SELECT coalesce(sum(size_gb), 0) FROM volumes v WHERE v.org_id = o.id AND v.deleted_at IS NULL) "
			 "FROM orgs o WHERE o.id = $1",
			 1, r->org.org_id) < 0)
		return -1;
	if (PQntuples(res) != 1)
		return sbx_err_set(err, 500, "internal", "organisation not found");
	if (atoll(PQgetvalue(res, 0, 2)) >= atoll(PQgetvalue(res, 0, 0)))
		return sbx_err_set(err, 403, "limit_volumes", "Volume limit reached: your plan allows %s volumes",
				   PQgetvalue(res, 0, 0));
	if (atoll(PQgetvalue(res, 0, 3)) + gb > atoll(PQgetvalue(res, 0, 1)))
		return sbx_err_set(err, 403, "limit_volume_gb",
				   "Volume storage limit reached: your plan allows %s GB of volumes (%s GB in use)",
				   PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 3));
	return 0;
}

int api_volume_node(struct api_req *r, char *node, size_t nodesz, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	if (sbx_db_query(&r->ctx->db, &res, err,
			 "SELECT id FROM nodes WHERE heartbeat_at > now() - interval '2 minutes' "
			 "ORDER BY heartbeat_at DESC, id LIMIT 1",
			 0) < 0)
		return -1;
	if (PQntuples(res) != 1)
		return sbx_err_set(err, 503, "no_capacity", "No node is available for volumes");
	snprintf(node, nodesz, "%s", PQgetvalue(res, 0, 0));
	return 0;
}

/* One request to the volume's node; 503 with the node's reason. */
static int node_call(struct api_req *r, enum sbx_msg_kind k, const char *node, json_t *body, sbx_err *err)
{
	cleanup_json json_t *b = body;
	cleanup_reply struct sbx_reply rep = { 0 };

	if (api_mq(r, err) < 0 ||
	    sbx_msg_call(r->ctx->mq, k, node, b, (int)sbx_cfg_int(r->ctx->cfg, "rpc_timeout") * 1000, NULL, &rep,
			 err) < 0)
		return sbx_err_set(err, 503, "volume_unavailable", "The volume's node did not answer: %s", err->msg);
	if (!rep.ok)
		return sbx_err_set(err, rep.code && !strcmp(rep.code, "volume_in_use") ? 409 : 503,
				   rep.code && !strcmp(rep.code, "no_capacity") ? "no_capacity" : "volume_failed", "%s",
				   rep.error ? rep.error : "the node could not do it");
	return 0;
}

static void volume_fix(const sbx_config *cfg, json_t *v)
{
	if (json_is_object(v))
		json_object_set_new(v, "region", api_region_json(cfg));
}

static json_t *load_volume(struct api_req *r, const char *id, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;
	json_t *v;

	if (sbx_db_query(&r->ctx->db, &res, err,
			 "SELECT sbx_volume_json(v) FROM volumes v WHERE v.id = $1 AND v.org_id = $2 "
			 "AND v.deleted_at IS NULL",
			 2, id, r->org.org_id) < 0 || api_one_row(res, "Volume", err) < 0)
		return NULL;
	v = api_json_from_row(res, 0, 0);
	volume_fix(r->ctx->cfg, v);
	return v;
}

void h_volumes_list(struct api_req *r)
{
	cleanup_pgres PGresult *res = NULL;
	sbx_err err = SBX_ERR_INIT;
	char lim[16], off[24];
	sbx_page pg;

	if (api_page(r, &pg, lim, off, &err) < 0 || sbx_db_query(&r->ctx->db, &res, &err,
			 "WITH f AS (SELECT * FROM volumes v WHERE v.org_id = $1 AND v.deleted_at IS NULL) "
			 "SELECT (SELECT count(*) FROM f), "
			 "  (SELECT coalesce(jsonb_agg(sbx_volume_json(p) ORDER BY p.created_at DESC, p.id), '[]') "
			 "   FROM (SELECT * FROM f ORDER BY created_at DESC, id LIMIT $2::int OFFSET $3::bigint) p)",
			 3, r->org.org_id, lim, off) < 0) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 200, "Volumes retrieved", api_page_data(r, &pg, res, volume_fix));
}

void h_volume_get(struct api_req *r)
{
	sbx_err err = SBX_ERR_INIT;
	json_t *v = load_volume(r, r->m.id, &err);

	if (!v) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 200, "Volume retrieved", v);
}

static int validate_volume(struct api_req *r, json_t *body, const char **name, long long *gb, const char **type,
			   sbx_err *err)
{
	const char *region, *team;

	if (api_body_check(body, &api_volume_body, err) < 0)
		return -1;
	*name = sbx_json_str(body, "name", NULL);
	if (!api_volume_name_ok(*name))
		return sbx_err_set(err, 400, "invalid_field", "name must match ^[a-z0-9-]{1,40}$");
	*gb = sbx_json_int(body, "sizeGB", 0);
	if (api_volume_size_check(r->ctx->cfg, "sizeGB", *gb, err) < 0)
		return -1;
	region = sbx_json_str(body, "region", NULL);
	if (region && !sbx_id_valid(region))
		return sbx_err_set(err, 400, "invalid_field", "region must be a region id (24 lowercase hex characters)");
	if (region && strcmp(region, sbx_cfg_str(r->ctx->cfg, "region_id")))
		return sbx_err_set(err, 400, "invalid_field", "Unknown region: %s (available: %s)", region,
				   sbx_cfg_str(r->ctx->cfg, "region_id"));
	*type = sbx_json_str(body, "type", "web");
	if (strcmp(*type, "web") && strcmp(*type, "sandbox"))
		return sbx_err_set(err, 400, "invalid_field", "type must be web or sandbox");
	team = sbx_json_str(body, "teamId", NULL);
	if (team && !sbx_id_valid(team))
		return sbx_err_set(err, 400, "invalid_field", "teamId must be 24 lowercase hex characters");
	if (team && strcmp(team, r->org.org_id))
		return sbx_err_set(err, 404, "not_found", "Team not found");
	return 0;
}

static bool name_taken(struct api_req *r, const char *name, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	if (sbx_db_query(&r->ctx->db, &res, err,
			 "SELECT 1 FROM volumes WHERE org_id = $1 AND name = $2 AND deleted_at IS NULL", 2,
			 r->org.org_id, name) < 0)
		return true;
	if (PQntuples(res) > 0) {
		sbx_err_set(err, 400, "duplicate_name", "A volume named '%s' already exists", name);
		return true;
	}
	return false;
}

void h_volumes_create(struct api_req *r)
{
	cleanup_json json_t *body = NULL;
	sbx_err err = SBX_ERR_INIT;
	const char *name = NULL, *type = NULL;
	long long gb = 0;
	char id[SBX_ID_LEN + 1], node[256], gbs[16];
	json_t *v;

	if (api_json_body(r, &body, &err) < 0 || validate_volume(r, body, &name, &gb, &type, &err) < 0 ||
	    name_taken(r, name, &err) || api_volume_limits(r, gb, &err) < 0 ||
	    api_volume_node(r, node, sizeof(node), &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	sbx_id_new(id);
	snprintf(gbs, sizeof(gbs), "%lld", gb);
	/* the node first: it admits the size against its disk and makes the
	 * image; a record is written only for a volume that exists */
	if (node_call(r, SBX_MSG_VOLUME_CREATE, node, json_pack("{s:s, s:I}", "volume_id", id, "size_gb", (json_int_t)gb),
		      &err) < 0) {
		log_warnx("volume %s: create on node %s failed: %s", id, node, err.msg);
		api_send_error(r, &err);
		return;
	}
	if (sbx_db_query(&r->ctx->db, NULL, &err,
			 "INSERT INTO volumes (id, org_id, name, type, size_gb, region, node_id) "
			 "VALUES ($1, $2, $3, $4, $5::int, $6, $7)",
			 7, id, r->org.org_id, name, type, gbs, sbx_cfg_str(r->ctx->cfg, "region_id"), node) < 0) {
		sbx_err e2 = SBX_ERR_INIT;
		if (sbx_db_is_unique_violation(&err))
			sbx_err_set(&err, 400, "duplicate_name", "A volume named '%s' already exists", name);
		/* undo: the image goes (else the node's volume pass removes it) */
		if (node_call(r, SBX_MSG_VOLUME_DELETE, node, json_pack("{s:s}", "volume_id", id), &e2) < 0)
			log_warnx("volume %s: undo on node %s: %s", id, node, e2.msg);
		api_send_error(r, &err);
		return;
	}
	log_info("volume %s: created (%lld GB on node %s)", id, gb, node);
	v = load_volume(r, id, &err);
	if (!v) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 201, "Volume created", v);
}

void h_volume_delete(struct api_req *r)
{
	cleanup_pgres PGresult *res = NULL, *chk = NULL;
	sbx_err err = SBX_ERR_INIT;

	/* the intent first: an attach can no longer take it */
	if (sbx_db_query(&r->ctx->db, &res, &err,
			 "UPDATE volumes SET deleted_at = now(), updated_at = now() WHERE id = $1 AND org_id = $2 "
			 "AND deleted_at IS NULL AND attached_sandbox_id IS NULL RETURNING node_id",
			 2, r->m.id, r->org.org_id) < 0) {
		api_send_error(r, &err);
		return;
	}
	if (PQntuples(res) != 1) {
		if (sbx_db_query(&r->ctx->db, &chk, &err,
				 "SELECT attached_sandbox_id FROM volumes WHERE id = $1 AND org_id = $2 AND deleted_at IS NULL",
				 2, r->m.id, r->org.org_id) < 0)
			api_send_error(r, &err);
		else {
			if (PQntuples(chk) == 1)
				sbx_err_set(&err, 400, "volume_attached", "Volume is attached; detach it before deleting");
			else
				sbx_err_set(&err, 404, "not_found", "Volume not found");
			api_send_error(r, &err);
		}
		return;
	}
	if (node_call(r, SBX_MSG_VOLUME_DELETE, PQgetvalue(res, 0, 0), json_pack("{s:s}", "volume_id", r->m.id),
		      &err) < 0) {
		/* recorded: the node's volume pass removes the image later */
		log_warnx("volume %s: delete on its node: %s (the node's volume pass finishes it)", r->m.id, err.msg);
	} else if (sbx_db_query(&r->ctx->db, NULL, &err, "DELETE FROM volumes WHERE id = $1 AND deleted_at IS NOT NULL",
				1, r->m.id) < 0) {
		log_warnx("volume %s: %s", r->m.id, err.msg);
	}
	log_info("volume %s: deleted", r->m.id);
	api_send_json(r, 204, NULL);
}
