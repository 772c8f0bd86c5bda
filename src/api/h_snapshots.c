/* The snapshot resource (API.md "Snapshots"): create (asynchronous), the
 * per-sandbox and the organisation's lists (paginated), delete. The record
 * is written first as creating (the intent), then the sandbox's node takes
 * the work on (workers/node_snapshot.c) and moves the record to ready or
 * failed; a request the node does not take on removes the record again.
 * Delete removes the image's manifest from the registry before the record,
 * so a record never outlives the failure to delete its image. */
#include "config.h"
#include <ctype.h>
#include <curl/curl.h>
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

#define REGISTRY_TIMEOUT_S 20

/* One page of snapshots (filtered by org and, when sandbox is set, by it). */
static void send_list(struct api_req *r, const char *sandbox)
{
	cleanup_pgres PGresult *res = NULL;
	sbx_err err = SBX_ERR_INIT;
	char lim[16], off[24];
	sbx_page pg;

	if (api_page(r, &pg, lim, off, &err) < 0 || sbx_db_query(&r->ctx->db, &res, &err,
			 "WITH f AS (SELECT * FROM snapshots p WHERE p.org_id = $1 "
			 "  AND ($4::text = '' OR p.sandbox_id = $4)) "
			 "SELECT (SELECT count(*) FROM f), "
			 "  (SELECT coalesce(jsonb_agg(sbx_snapshot_json(p) ORDER BY p.created_at DESC, p.id), '[]') "
			 "   FROM (SELECT * FROM f ORDER BY created_at DESC, id LIMIT $2::int OFFSET $3::bigint) p)",
			 4, r->org.org_id, lim, off, sandbox ? sandbox : "") < 0) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 200, "Snapshots retrieved", api_page_data(r, &pg, res, NULL));
}

static json_t *load_snapshot(struct api_req *r, const char *id, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	if (sbx_db_query(&r->ctx->db, &res, err,
			 "SELECT sbx_snapshot_json(p) FROM snapshots p WHERE p.id = $1 AND p.org_id = $2", 2, id,
			 r->org.org_id) < 0 || api_one_row(res, "Snapshot", err) < 0)
		return NULL;
	return api_json_from_row(res, 0, 0);
}

static void snapshot_create(struct api_req *r)
{
	cleanup_json json_t *body = NULL;
	cleanup_pgres PGresult *res = NULL;
	sbx_err err = SBX_ERR_INIT;
	char id[SBX_ID_LEN + 1], repo[64], name[48];
	const char *status, *node, *place, *tmpl, *given;
	json_t *snap;

	if (api_json_body(r, &body, &err) < 0 || api_body_check(body, &api_snapshot_body, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	sbx_id_new(id);
	given = sbx_json_str(body, "name", NULL);
	if (!api_volume_name_ok(given)) {
		sbx_err_set(&err, 400, "invalid_field", "name must match ^[a-z0-9-]{1,40}$");
		api_send_error(r, &err);
		return;
	}
	snprintf(name, sizeof(name), "%s", given);
	if (sbx_db_query(&r->ctx->db, &res, &err,
			 "SELECT status, coalesce(node_id, ''), coalesce(placement_id, ''), template FROM sandboxes "
			 "WHERE id = $1 AND org_id = $2",
			 2, r->m.id, r->org.org_id) < 0 || api_one_row(res, "Sandbox", &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	status = PQgetvalue(res, 0, 0);
	node = PQgetvalue(res, 0, 1);
	place = PQgetvalue(res, 0, 2);
	tmpl = PQgetvalue(res, 0, 3);
	if (strcmp(status, "ready") || !node[0] || !sbx_id_valid(place)) {
		sbx_err_set(&err, 400, "bad_state", "Sandbox is %s; only a ready sandbox can be snapshotted", status);
		api_send_error(r, &err);
		return;
	}
	snprintf(repo, sizeof(repo), "sbx/snapshots/%s", id);
	/* the intent first: the node moves it on (or the node's pass fails it) */
	if (sbx_db_query(&r->ctx->db, NULL, &err,
			 "INSERT INTO snapshots (id, org_id, sandbox_id, name, source_template, node_id, image_repo) "
			 "VALUES ($1, $2, $3, $4, $5, $6, $7)",
			 7, id, r->org.org_id, r->m.id, name, tmpl, node, repo) < 0) {
		api_send_error(r, &err);
		return;
	}
	{
		cleanup_json json_t *msg =
			json_pack("{s:s, s:s, s:s}", "sandbox_id", r->m.id, "placement_id", place, "snapshot_id", id);
		cleanup_reply struct sbx_reply rep = { 0 };

		if (api_mq(r, &err) < 0 ||
		    sbx_msg_call(r->ctx->mq, SBX_MSG_SNAPSHOT, node, msg,
				 (int)sbx_cfg_int(r->ctx->cfg, "rpc_timeout") * 1000, NULL, &rep, &err) < 0 ||
		    !rep.ok) {
			sbx_err e2 = SBX_ERR_INIT;
			bool busy = rep.json && rep.code && !strcmp(rep.code, "busy");
			bool state = rep.json && rep.code && !strcmp(rep.code, "bad_state");
			char why[300];

			snprintf(why, sizeof(why), "%s", rep.json ? (rep.error ? rep.error : "no reason given") : err.msg);
			/* not taken on: the record goes (only while still creating:
			 * a node that took it on after all moved it on) */
			if (sbx_db_query(&r->ctx->db, NULL, &e2,
					 "DELETE FROM snapshots WHERE id = $1 AND status = 'creating'", 1, id) < 0)
				log_warnx("snapshot %s: undoing the record: %s", id, e2.msg);
			log_warnx("sandbox %s: snapshot refused by its node: %s", r->m.id, why);
			if (busy)
				sbx_err_set(&err, 409, "conflict", "Another change to this sandbox is in flight");
			else if (state)
				sbx_err_set(&err, 400, "bad_state", "Sandbox is not ready on its node; try again");
			else
				sbx_err_set(&err, 503, "snapshot_failed", "The snapshot could not be started: %s", why);
			api_send_error(r, &err);
			return;
		}
	}
	log_info("sandbox %s: snapshot %s creating", r->m.id, id);
	if (!(snap = load_snapshot(r, id, &err))) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 202, "Snapshot is being created", snap);
}

void h_sandbox_snapshots(struct api_req *r)
{
	cleanup_pgres PGresult *res = NULL;
	sbx_err err = SBX_ERR_INIT;

	if (r->m.method == SBX_M_POST) {
		snapshot_create(r);
		return;
	}
	/* the sandbox's own list: the sandbox must be the caller's (a
	 * destroyed one keeps its snapshots) */
	if (sbx_db_query(&r->ctx->db, &res, &err, "SELECT 1 FROM sandboxes WHERE id = $1 AND org_id = $2", 2,
			 r->m.id, r->org.org_id) < 0 || api_one_row(res, "Sandbox", &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	send_list(r, r->m.id);
}

void h_snapshots_list(struct api_req *r)
{
	send_list(r, NULL);
}

static size_t discard(void *p, size_t s, size_t n, void *u)
{
	(void)p;
	(void)u;
	return s * n;
}

/* DELETE of the manifest in the registry; a manifest already gone is fine. */
static int registry_delete(struct api_req *r, const char *repo, const char *digest, sbx_err *err)
{
	const char *base = sbx_cfg_str(r->ctx->cfg, "registry_url");
	char url[600];
	long code = 0;
	CURLcode cc;
	CURL *c;

	if (strncmp(base, "http://", 7) && strncmp(base, "https://", 8))
		return sbx_err_set(err, 500, "registry", "registry_url must be an http(s) URL");
	/* repo and digest come from the record (our own id, the node's
	 * digest), never from the request */
	if (base[strlen(base) - 1] == '/')
		snprintf(url, sizeof(url), "%sv2/%s/manifests/%s", base, repo, digest);
	else
		snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", base, repo, digest);
	if (!(c = curl_easy_init()))
		return sbx_err_set(err, 500, "registry", "curl_easy_init failed");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)REGISTRY_TIMEOUT_S);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	cc = curl_easy_perform(c);
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(c);
	if (cc != CURLE_OK)
		return sbx_err_set(err, 503, "registry_unavailable", "The registry did not answer: %s",
				   curl_easy_strerror(cc));
	if (code != 202 && code != 200 && code != 404)
		return sbx_err_set(err, 503, "registry_unavailable", "The registry refused to delete the image (HTTP %ld)",
				   code);
	return 0;
}

void h_snapshot_delete(struct api_req *r)
{
	cleanup_pgres PGresult *res = NULL;
	sbx_err err = SBX_ERR_INIT;
	const char *status, *repo, *digest;

	if (sbx_db_query(&r->ctx->db, &res, &err,
			 "SELECT status, image_repo, coalesce(image_digest, '') FROM snapshots WHERE id = $1 AND org_id = $2",
			 2, r->m.id, r->org.org_id) < 0 || api_one_row(res, "Snapshot", &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	status = PQgetvalue(res, 0, 0);
	repo = PQgetvalue(res, 0, 1);
	digest = PQgetvalue(res, 0, 2);
	if (!strcmp(status, "creating")) {
		sbx_err_set(&err, 409, "conflict", "Snapshot is being created; delete it once it is ready or failed");
		api_send_error(r, &err);
		return;
	}
	if (digest[0] && registry_delete(r, repo, digest, &err) < 0) {
		log_warnx("snapshot %s: deleting %s@%s: %s", r->m.id, repo, digest, err.msg);
		api_send_error(r, &err);
		return;
	}
	if (sbx_db_query(&r->ctx->db, NULL, &err, "DELETE FROM snapshots WHERE id = $1 AND org_id = $2", 2, r->m.id,
			 r->org.org_id) < 0) {
		api_send_error(r, &err);
		return;
	}
	log_info("snapshot %s: deleted (%s)", r->m.id, digest[0] ? digest : "no image");
	api_send_json(r, 204, NULL);
}
