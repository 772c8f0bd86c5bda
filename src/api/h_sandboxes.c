/* The sandbox resource: list, get, create, destroy. */
#include "config.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "api.h"
#include "bodies.h"
#include "cleanup.h"
#include "cron.h"
#include "clock.h"
#include "json.h"
#include "log.h"
#include "page.h"
#include "reply.h"
#include "sandbox_state.h"
#include "sql.h"
#include "usage.h"
#include "volumes.h"

/* The region object as JSON text, the parameter SANDBOX_PUBLIC_SQL takes (sql.h);
 * NULL with a 500 in err when out of memory. */
static char *region_text(struct api_req *r, sbx_err *err)
{
	cleanup_json json_t *rj = api_region_json(r->ctx->cfg);
	char *t = rj ? json_dumps(rj, JSON_COMPACT) : NULL;

	if (!t)
		sbx_err_set(err, 500, "nomem", "out of memory");
	return t;
}

static void send_db_error(struct api_req *r, sbx_err *err)
{
	api_send_error(r, err);
}

/* ?metadata.K=V pairs as one jsonb object for "metadata @> $n". */
static int metadata_filter(const char *qs, json_t *filter, sbx_err *err)
{
	const char *p = qs;

	while (p && *p) {
		const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
		const char *eq = memchr(p, '=', (size_t)(end - p));
		char key[160], val[1024];

		if (eq && sbx_url_decode(p, (size_t)(eq - p), key, sizeof(key)) == 0 &&
		    strncmp(key, "metadata.", 9) == 0) {
			if (!key[9] || sbx_url_decode(eq + 1, (size_t)(end - eq - 1), val, sizeof(val)) < 0)
				return sbx_err_set(err, 400, "invalid_query", "Malformed metadata filter");
			if (json_object_size(filter) >= 10)
				return sbx_err_set(err, 400, "invalid_query", "At most 10 metadata filters");
			json_object_set_new(filter, key + 9, json_string(val));
		}
		p = amp ? amp + 1 : NULL;
	}
	return 0;
}

void h_sandboxes_list(struct api_req *r)
{
	cleanup_pgres PGresult *res = NULL;
	cleanup_json json_t *filter = json_object();
	cleanup_free char *filter_s = NULL, *region = NULL;
	sbx_err err = SBX_ERR_INIT;
	char status[32], lim[16], off[24];
	const char *status_p = NULL;
	int st;
	sbx_page pg;
	int q;

	if (api_page(r, &pg, lim, off, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	q = sbx_query_get(r->m.query, "status", status, sizeof(status), &err);
	if (q < 0) {
		api_send_error(r, &err);
		return;
	}
	if (q == 1) {
		if ((st = sbx_sb_status_parse(status)) >= 0)
			status_p = sbx_sb_status_name((enum sbx_sb_status)st);
		if (!status_p) {
			sbx_err_set(&err, 400, "invalid_query",
				    "status must be one of starting, ready, pausing, paused, resuming, failed, destroyed");
			api_send_error(r, &err);
			return;
		}
	}
	if (metadata_filter(r->m.query, filter, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	filter_s = json_dumps(filter, JSON_COMPACT);
	if (!filter_s)
		sbx_err_set(&err, 500, "nomem", "out of memory");
	if (!filter_s || !(region = region_text(r, &err))) {
		api_send_error(r, &err);
		return;
	}
	/* the page's rows go to the client as Postgres wrote them (h_sandbox_get) */
	if (api_limits_read(r, &res, &err,
			    SQL_SANDBOX_LIST, 6, r->org.org_id, status_p, filter_s, lim, off, region) < 0) {
		send_db_error(r, &err);
		return;
	}
	api_send_page_raw(r, "Sandboxes retrieved", &pg, res);
}

/* What the record's JSON lacks of the public Sandbox object. The GET and
 * the list add the same in their queries (SANDBOX_PUBLIC_SQL): change both
 * together. */
void api_sandbox_public(const sbx_config *cfg, json_t *s)
{
	json_t *mode;

	if (!json_is_object(s))
		return;
	/* One install is one region: every sandbox it holds runs there, and
	 * clients read the region object, as the regions list shows it. */
	json_object_set_new(s, "region", api_region_json(cfg));
	/* manual is every sandbox's mode unless it asked for automatic
	 * (records written before the mode was stored have none) */
	mode = json_object_get(s, "snapshot_mode");
	if (!mode || json_is_null(mode))
		json_object_set_new(s, "snapshot_mode", json_string("manual"));
}

/* One sandbox of the caller's organisation as JSON, or NULL with 404. */
static json_t *load_sandbox(struct api_req *r, const char *id, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;
	json_t *s;

	if (api_limits_read(r, &res, err,
			    SQL_SANDBOX_JSON, 2, id,
			    r->org.org_id) < 0 || api_one_row(res, "Sandbox", err) < 0)
		return NULL;
	s = api_json_from_row(res, 0, 0);
	api_sandbox_public(r->ctx->cfg, s);
	return s;
}

/* The most frequent request: the row is the answer's data as Postgres
 * wrote it, with what api_sandbox_public adds done in the query, so the
 * JSON is neither parsed nor printed again here (bench/api-get). */
void h_sandbox_get(struct api_req *r)
{
	cleanup_pgres PGresult *res = NULL;
	cleanup_free char *region = NULL;
	sbx_err err = SBX_ERR_INIT;

	if (!(region = region_text(r, &err)) ||
	    api_limits_read(r, &res, &err,
			    SQL_SANDBOX_GET, 3, r->m.id, r->org.org_id, region) < 0 ||
	    api_one_row(res, "Sandbox", &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	api_send_data_raw(r, 200, "Sandbox retrieved", PQgetvalue(res, 0, 0), (size_t)PQgetlength(res, 0, 0));
}

static bool settled(json_t *s)
{
	return sbx_sb_settled(sbx_sb_status_parse(json_string_value(json_object_get(s, "status"))));
}

/* Long-poll until ready or terminal: LISTEN first, hold the waiter's lock
 * (sandbox_state.h), then look, then sleep until a status change of this
 * sandbox (or the deadline). */
void h_sandbox_wait(struct api_req *r)
{
	sbx_err err = SBX_ERR_INIT;
	char buf[16], payload[64];
	long timeout = 60;
	long long deadline;
	json_t *s = NULL;
	int q = sbx_query_get(r->m.query, "timeout", buf, sizeof(buf), &err);

	if (q < 0 || (q == 1 && (strspn(buf, "0123456789") != strlen(buf) || !buf[0] || strlen(buf) > 4 ||
				 (timeout = atol(buf)) > 300))) {
		sbx_err_set(&err, 400, "invalid_query", "timeout must be an integer between 0 and 300");
		api_send_error(r, &err);
		return;
	}
	deadline = sbx_now_ms() + timeout * 1000;
	if (sbx_db_listen(&r->ctx->db, "sbx_sandbox_status", &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	/* changes are announced only to a waiter holding this (sql/019) */
	if (sbx_sandbox_wait_begin(&r->ctx->db, r->m.id, &err) < 0) {
		sbx_db_unlisten(&r->ctx->db, "sbx_sandbox_status");
		api_send_error(r, &err);
		return;
	}
	for (;;) {
		long long left;
		int w;

		json_decref(s);
		s = load_sandbox(r, r->m.id, &err);
		if (!s || settled(s))
			break;
		left = deadline - sbx_now_ms();
		if (left <= 0)
			break;
		/* any sandbox's change wakes us; only ours ends the wait */
		while ((w = sbx_db_wait_notify(&r->ctx->db, "sbx_sandbox_status", (int)left, payload,
					       sizeof(payload), &err)) == 1 &&
		       strcmp(payload, r->m.id) != 0) {
			left = deadline - sbx_now_ms();
			if (left <= 0)
				break;
		}
		if (w < 0) {
			json_decref(s);
			s = NULL;
			break;
		}
	}
	sbx_sandbox_wait_end(&r->ctx->db, r->m.id);
	sbx_db_unlisten(&r->ctx->db, "sbx_sandbox_status");
	if (!s) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 200, settled(s) ? "Sandbox settled" : "Still waiting: timeout reached", s);
}

/* ---- create ---- */

struct create_req {
	const char *name, *template, *region, *destroy_timeout, *environment, *snapshot_mode;
	long long cpu, memory, disk, idle_timeout, lifetime;
	bool auto_destroy, one_shot;
	/* persistence: a fresh volume (persistent) or an existing one (volume_id) */
	bool persistent;
	long long persistent_gb;
	const char *volume_id, *mount_path;
	json_t *env, *metadata;
	const char *egress_mode;
	json_t *egress_allow; /* borrowed from the body; NULL: [] */
	const char *from_snapshot; /* a snapshot id of the caller's, or NULL */
	const char *snapshot_frequency; /* automatic: the validated cron, else NULL */
};

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static bool env_name_ok(const char *k)
{
	if (!(isalpha((unsigned char)k[0]) || k[0] == '_') || strlen(k) > 128)
		return false;
	for (; *k; k++)
		if (!(isalnum((unsigned char)*k) || *k == '_'))
			return false;
	return true;
}

/* An absolute path of plain names, not one of the places the sandbox's
 * own mounts live at. */
static bool mount_path_ok(const char *p)
{
	static const char *const reserved[] = { "/proc", "/sys", "/dev", "/run/sbx", "/.sbx", "/tmp" };
	size_t n = strlen(p);

	if (p[0] != '/' || n < 2 || n > 200 || p[n - 1] == '/' || strstr(p, "//"))
		return false;
	for (const char *q = p; *q; q++)
		if (!(isalnum((unsigned char)*q) || strchr("/._-", *q)))
			return false;
	if (!strcmp(p, "/.") || strstr(p, "/./") || strstr(p, "/../") || (n >= 2 && !strcmp(p + n - 2, "/.")) ||
	    (n >= 3 && !strcmp(p + n - 3, "/..")))
		return false;
	for (size_t i = 0; i < SBX_ARRAY_LEN(reserved); i++) {
		size_t l = strlen(reserved[i]);
		if (!strncmp(p, reserved[i], l) && (p[l] == 0 || p[l] == '/'))
			return false;
	}
	return true;
}

static int validate_persistence(const sbx_config *cfg, json_t *body, struct create_req *c, sbx_err *err)
{
	json_t *gb = json_object_get(body, "persistentDiskGB");

	c->persistent = sbx_json_bool(body, "persistent", false);
	c->volume_id = sbx_json_str(body, "volumeId", NULL);
	c->mount_path = sbx_json_str(body, "mountPath", NULL);
	if (c->persistent && c->volume_id)
		return sbx_err_set(err, 400, "invalid_field", "Use either persistent or volumeId, not both");
	if (gb && !json_is_null(gb) && !c->persistent)
		return sbx_err_set(err, 400, "invalid_field", "persistentDiskGB needs persistent: true");
	if (c->persistent) {
		c->persistent_gb = sbx_json_int(body, "persistentDiskGB", sbx_cfg_int(cfg, "volume_min_gb"));
		if (api_volume_size_check(cfg, "persistentDiskGB", c->persistent_gb, err) < 0)
			return -1;
	}
	if (c->volume_id && !sbx_id_valid(c->volume_id))
		return sbx_err_set(err, 400, "invalid_field", "Invalid volume id");
	if (c->mount_path && !c->persistent && !c->volume_id)
		return sbx_err_set(err, 400, "invalid_field", "mountPath needs persistent: true or a volumeId");
	if (c->persistent || c->volume_id) {
		if (!c->mount_path)
			c->mount_path = "/workspace";
		if (!mount_path_ok(c->mount_path))
			return sbx_err_set(err, 400, "invalid_field",
					   "mountPath must be an absolute path of plain names (not /, /proc, /sys, /dev, "
					   "/tmp or /run/sbx)");
	}
	return 0;
}

static int validate_create(struct api_req *r, json_t *body, struct create_req *c, sbx_err *err)
{
	const sbx_config *cfg = r->ctx->cfg;
	json_t *specs, *egress;
	const char *k;
	json_t *v;

	if (api_body_check(body, &api_create_body, err) < 0)
		return -1;
	specs = json_object_get(body, "specs");
	if (specs && !json_is_null(specs) && api_body_check(specs, &api_create_specs, err) < 0)
		return -1;
	egress = json_object_get(body, "egress");
	if (egress && !json_is_null(egress) && api_body_check(egress, &api_create_egress, err) < 0)
		return -1;

	c->name = sbx_json_str(body, "name", NULL);
	if (c->name && !printable(c->name))
		return sbx_err_set(err, 400, "invalid_field", "name must not contain control characters");
	c->template = sbx_json_str(body, "template", sbx_cfg_str(cfg, "default_template"));
	c->region = sbx_json_str(body, "region", "auto");
	if (strcmp(c->region, "auto") && strcmp(c->region, sbx_cfg_str(cfg, "region_id")))
		return sbx_err_set(err, 400, "invalid_field", "Unknown region: %.64s (available: auto, %s)",
				   c->region, sbx_cfg_str(cfg, "region_id"));
	c->region = sbx_cfg_str(cfg, "region_id");
	{
		const char *team = sbx_json_str(body, "teamId", NULL);
		if (team && !sbx_id_valid(team))
			return sbx_err_set(err, 400, "invalid_field", "teamId must be 24 lowercase hex characters");
		/* another organisation's team answers as one that does not exist */
		if (team && strcmp(team, r->org.org_id))
			return sbx_err_set(err, 404, "not_found", "Team not found");
		c->environment = sbx_json_str(body, "environmentId", NULL);
		if (c->environment && !sbx_id_valid(c->environment))
			return sbx_err_set(err, 400, "invalid_field",
					   "environmentId must be 24 lowercase hex characters");
	}
	c->cpu = sbx_json_int(specs, "cpu", 1000);
	c->memory = sbx_json_int(specs, "memory", 512);
	c->disk = sbx_json_int(specs, "disk", 1);
	if (c->memory > 2048 && c->memory > r->org.max_memory_mb)
		return sbx_err_set(err, 400, "invalid_field", "specs.memory must be between 1 and 2048");
	if (c->memory > r->org.max_memory_mb)
		return sbx_err_set(err, 403, "limit_memory",
				   "Memory limit exceeded: your plan allows at most %lld MB per sandbox",
				   r->org.max_memory_mb);

	/* egress: blockOutbound true is deny_all, false is open; none: the
	 * operator's default. Never silently downgraded: what cannot be
	 * enforced is refused (400) or fails the create (503). */
	{
		json_t *bo = json_object_get(body, "blockOutbound");
		const char *mode = egress ? sbx_json_str(egress, "mode", NULL) : NULL;
		if (egress && !json_is_null(egress) && bo && !json_is_null(bo))
			return sbx_err_set(err, 400, "invalid_field", "Use either egress or blockOutbound, not both");
		if (bo && json_is_false(bo))
			mode = "open";
		if (bo && json_is_true(bo))
			mode = "deny_all";
		if (!mode)
			mode = sbx_cfg_str(cfg, "default_egress");
		c->egress_allow = egress ? json_object_get(egress, "allow") : NULL;
		if (api_egress_check(mode, c->egress_allow, err) < 0)
			return -1;
		c->egress_mode = mode;
	}

	c->auto_destroy = sbx_json_bool(body, "autoDestroy", false);
	c->one_shot = sbx_json_bool(body, "oneShot", false);
	c->destroy_timeout = sbx_json_str(body, "destroyTimeout", NULL);
	c->lifetime = sbx_cfg_int(cfg, "max_lifetime");
	if (c->destroy_timeout) {
		static const struct { const char *s; long long secs; } dt[] = {
			{ "30m", 1800 }, { "1h", 3600 }, { "3h", 10800 }, { "6h", 21600 }, { "12h", 43200 }, { "18h", 64800 },
		};
		size_t i;
		for (i = 0; i < SBX_ARRAY_LEN(dt); i++)
			if (!strcmp(c->destroy_timeout, dt[i].s))
				break;
		if (i == SBX_ARRAY_LEN(dt))
			return sbx_err_set(err, 400, "invalid_field", "destroyTimeout must be one of 30m, 1h, 3h, 6h, 12h, 18h");
		/* without autoDestroy the hosted service ignores it: so do we */
		if (!c->auto_destroy)
			c->destroy_timeout = NULL;
		else if (dt[i].secs < c->lifetime)
			c->lifetime = dt[i].secs;
	}
	c->idle_timeout = sbx_json_int(body, "timeout", sbx_cfg_int(cfg, "idle_timeout"));
	if (c->idle_timeout > sbx_cfg_int(cfg, "max_lifetime"))
		return sbx_err_set(err, 400, "invalid_field", "timeout must be between 60 and %lld",
				   sbx_cfg_int(cfg, "max_lifetime"));

	c->env = json_object_get(body, "env");
	json_object_foreach(c->env, k, v) {
		if (!env_name_ok(k))
			return sbx_err_set(err, 400, "invalid_field", "env names must match [A-Za-z_][A-Za-z0-9_]*");
		if (json_string_length(v) > 32768)
			return sbx_err_set(err, 400, "invalid_field", "env values must be at most 32768 bytes");
	}
	c->metadata = json_object_get(body, "metadata");
	json_object_foreach(c->metadata, k, v) {
		if (strlen(k) > 64 || json_string_length(v) > 512)
			return sbx_err_set(err, 400, "invalid_field",
					   "metadata keys are at most 64 and values at most 512 bytes");
	}

	/* manual (the default) means: snapshots only when asked for */
	c->snapshot_mode = sbx_json_str(body, "snapshotMode", "manual");
	if (strcmp(c->snapshot_mode, "manual") && strcmp(c->snapshot_mode, "automatic"))
		return sbx_err_set(err, 400, "invalid_field", "snapshotMode must be manual or automatic");
	if (!strcmp(c->snapshot_mode, "manual") && sbx_json_str(body, "snapshotFrequency", NULL))
		return sbx_err_set(err, 400, "invalid_field", "snapshotFrequency needs snapshotMode: automatic");

	if (!strcmp(c->snapshot_mode, "automatic")) {
		sbx_cron cron;
		c->snapshot_frequency = sbx_json_str(body, "snapshotFrequency", NULL);
		if (!c->snapshot_frequency)
			return sbx_err_set(err, 400, "invalid_field", "snapshotMode automatic needs snapshotFrequency");
		if (sbx_cron_parse(c->snapshot_frequency, &cron, err) < 0)
			return -1;
	}
	if (validate_persistence(cfg, body, c, err) < 0)
		return -1;
	c->from_snapshot = sbx_json_str(body, "fromSnapshot", NULL);
	if (c->from_snapshot && !sbx_id_valid(c->from_snapshot))
		return sbx_err_set(err, 400, "invalid_field", "fromSnapshot must be a snapshot id (24 lowercase hex characters)");
	return 0;
}

/* fromSnapshot: the caller's ready snapshot; its template replaces the
 * body's (the sandbox's filesystem is the snapshot's, over that template). */
static int snapshot_template(struct api_req *r, const char *snap, char *tmpl, size_t tsz, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	if (sbx_db_query(&r->ctx->db, &res, err,
			 "SELECT status, source_template FROM snapshots WHERE id = $1 AND org_id = $2", 2, snap,
			 r->org.org_id) < 0)
		return -1;
	if (PQntuples(res) != 1)
		return sbx_err_set(err, 404, "not_found", "Snapshot not found");
	if (strcmp(PQgetvalue(res, 0, 0), "ready"))
		return sbx_err_set(err, 400, "bad_state", "Snapshot is %s; only a ready snapshot can be restored",
				   PQgetvalue(res, 0, 0));
	snprintf(tmpl, tsz, "%s", PQgetvalue(res, 0, 1));
	return 0;
}

/* In the create's transaction: a fresh volume made for this sandbox
 * (persistent), or the attachment of an existing detached one (volumeId),
 * and the sandbox's record of it. */
static int attach_volume(struct api_req *r, const struct create_req *c, const char *id, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;
	char vid[SBX_ID_LEN + 1], gbs[16], node[256], vname[48];

	if (!c->persistent && !c->volume_id)
		return 0;
	if (c->persistent) {
		if (api_volume_limits(r, c->persistent_gb, err) < 0 || api_volume_node(r, node, sizeof(node), err) < 0)
			return -1;
		sbx_id_new(vid);
		snprintf(gbs, sizeof(gbs), "%lld", c->persistent_gb);
		snprintf(vname, sizeof(vname), "sandbox-%s", id);
		if (sbx_db_query(&r->ctx->db, NULL, err,
				 "INSERT INTO volumes (id, org_id, name, type, size_gb, region, node_id, mount_path, "
				 "attached_sandbox_id, last_attached_at, created_for) "
				 "VALUES ($1, $2, $3, 'sandbox', $4::int, $5, $6, $7, $8, now(), $8)",
				 8, vid, r->org.org_id, vname, gbs, sbx_cfg_str(r->ctx->cfg, "region_id"), node,
				 c->mount_path, id) < 0)
			return -1;
	} else {
		snprintf(vid, sizeof(vid), "%s", c->volume_id);
		if (sbx_db_query(&r->ctx->db, &res, err,
				 "UPDATE volumes SET attached_sandbox_id = $3, last_attached_at = now(), mount_path = $4, "
				 "updated_at = now() WHERE id = $1 AND org_id = $2 AND deleted_at IS NULL "
				 "AND attached_sandbox_id IS NULL RETURNING size_gb",
				 4, vid, r->org.org_id, id, c->mount_path) < 0)
			return -1;
		if (PQntuples(res) != 1) {
			cleanup_pgres PGresult *chk = NULL;
			if (sbx_db_query(&r->ctx->db, &chk, err,
					 "SELECT attached_sandbox_id FROM volumes WHERE id = $1 AND org_id = $2 "
					 "AND deleted_at IS NULL",
					 2, vid, r->org.org_id) < 0)
				return -1;
			if (PQntuples(chk) == 1)
				return sbx_err_set(err, 400, "volume_attached",
						   "Volume is attached to another sandbox (%s)", PQgetvalue(chk, 0, 0));
			return sbx_err_set(err, 404, "not_found", "Volume not found");
		}
		snprintf(gbs, sizeof(gbs), "%s", PQgetvalue(res, 0, 0));
	}
	return sbx_db_query(&r->ctx->db, NULL, err,
			    "UPDATE sandboxes SET persistent = true, persistent_disk_gb = $2::int, volume_id = $3, "
			    "mount_path = $4 WHERE id = $1",
			    4, id, gbs, vid, c->mount_path);
}

/* Marks a record failed with a reason the owner can read. */
/* The organisation's monthly spending limit (sbx-admin org limits
 * --monthly-spend-limit-cents): reached, a create is a 403 naming it;
 * what runs keeps running. 1 reached, 0 not, -1 error (err set). */
static int spend_limit_reached(struct api_req *r, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;
	double used;
	long long limit;

	if (sbx_db_query(&r->ctx->db, &res, err, "SELECT monthly_spend_limit_cents FROM orgs WHERE id = $1", 1,
			 r->org.org_id) < 0)
		return -1;
	if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0))
		return 0;
	limit = atoll(PQgetvalue(res, 0, 0));
	if (sbx_usage_month_cents(&r->ctx->db, r->ctx->cfg, r->org.org_id, &used, err) < 0)
		return -1;
	if (used < (double)limit)
		return 0;
	sbx_err_set(err, 403, "limit_spending",
		    "Monthly spending limit reached: $%.2f used of your plan's $%.2f this month; "
		    "running sandboxes keep running", used / 100.0, (double)limit / 100.0);
	return 1;
}

/* 1: the record went from starting to failed; 0: it was no longer
 * starting; -1: the database failed (the reaper will). */
static int mark_failed(struct api_req *r, const char *id, const char *reason)
{
	sbx_err err = SBX_ERR_INIT;
	int rc = sbx_sandbox_fail_start(&r->ctx->db, id, r->org.org_id, reason, &err);

	if (rc < 0)
		log_warnx("sandbox %s: could not record failure (%s); the reaper will", id, err.msg);
	return rc;
}

/* A create whose provisioner failed it, but whose record was no longer
 * starting: a provisioner recorded it ready and died before it answered,
 * and the message's redelivery found it "no longer starting". The answer
 * says what the record says: the ready sandbox, 201 (not a 503 for a
 * sandbox that runs). Returns 1 when it answered. */
static int answer_if_ready(struct api_req *r, const char *id)
{
	sbx_err err = SBX_ERR_INIT;
	json_t *s = load_sandbox(r, id, &err);
	const char *st = s ? json_string_value(json_object_get(s, "status")) : NULL;

	if (!st || strcmp(st, "ready")) {
		json_decref(s);
		return 0;
	}
	log_info("sandbox %s: ready, though its provisioner's answer said otherwise", id);
	api_send_data(r, 201, "Sandbox created", s);
	return 1;
}

/* The create; *leased names the record whose lease it took (the caller lets
 * it go, whichever way the create ended). */
static void create(struct api_req *r, char leased[SBX_ID_LEN + 1])
{
	cleanup_json json_t *body = NULL;
	cleanup_pgres PGresult *res = NULL;
	cleanup_free char *env_s = NULL, *meta_s = NULL, *allow_s = NULL;
	struct create_req c = { 0 };
	sbx_err err = SBX_ERR_INIT;
	char id[SBX_ID_LEN + 1], name[80], cpu[16], mem[16], disk[16], idle[16], life[16], tmpl[80], stmpl[80];
	json_t *s;

	/* an alias becomes the template it names: the record and the answer say which */
	if (api_json_body(r, &body, &err) < 0 || validate_create(r, body, &c, &err) < 0 ||
	    (c.from_snapshot && snapshot_template(r, c.from_snapshot, stmpl, sizeof(stmpl), &err) < 0) ||
	    api_template_lookup(r, c.from_snapshot ? stmpl : c.template, tmpl, sizeof(tmpl), &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	c.template = tmpl;
	sbx_id_new(id);
	if (!c.name) {
		snprintf(name, sizeof(name), "sandbox-%.8s", id);
		c.name = name;
	}
	snprintf(cpu, sizeof(cpu), "%lld", c.cpu);
	snprintf(mem, sizeof(mem), "%lld", c.memory);
	snprintf(disk, sizeof(disk), "%lld", c.disk);
	snprintf(idle, sizeof(idle), "%lld", c.idle_timeout);
	snprintf(life, sizeof(life), "%lld", c.lifetime);
	env_s = json_dumps(c.env ? c.env : json_object(), JSON_COMPACT);
	meta_s = json_dumps(c.metadata ? c.metadata : json_object(), JSON_COMPACT);
	allow_s = c.egress_allow && json_is_array(c.egress_allow) ? json_dumps(c.egress_allow, JSON_COMPACT) : NULL;

	/* the concurrency limit and the insert are one decision per organisation */
	if (sbx_db_begin(&r->ctx->db, &err) < 0)
		goto fail;
	if (sbx_db_query(&r->ctx->db, &res, &err, SQL_CREATE_COUNT, 1, r->org.org_id) < 0)
		goto fail;
	if (atoll(PQgetvalue(res, 0, 1)) >= r->org.max_sandboxes) {
		sbx_db_rollback(&r->ctx->db);
		sbx_err_set(&err, 403, "limit_sandboxes",
			    "Sandbox limit reached: your plan allows %lld concurrent sandboxes", r->org.max_sandboxes);
		api_send_error(r, &err);
		return;
	}
	if (spend_limit_reached(r, &err) != 0) {
		sbx_db_rollback(&r->ctx->db);
		api_send_error(r, &err);
		return;
	}
	{
		bool held;
		if (sbx_sandbox_lease(&r->ctx->db, id, &held, &err) < 0)
			goto fail;
		if (held)
			snprintf(leased, SBX_ID_LEN + 1, "%s", id);
	}
	if (sbx_db_query(&r->ctx->db, NULL, &err, SQL_CREATE_INSERT, 22, id, r->org.org_id, c.name, c.template,
			 c.region, cpu, mem, disk, c.auto_destroy ? "true" : "false", c.destroy_timeout,
			 c.one_shot ? "true" : "false", env_s, meta_s, idle, life, r->request_id, c.environment,
			 c.snapshot_mode, c.egress_mode, allow_s, c.from_snapshot, c.snapshot_frequency) < 0 ||
	    attach_volume(r, &c, id, &err) < 0 || sbx_db_commit_lazy(&r->ctx->db, &err) < 0)
		goto fail;
	/* Committed without waiting for the disk (~1 ms): the record is
	 * durable before any answer says it exists, since the provisioner's
	 * `ready` (or our `failed`) commits after it, synchronously. Lost in a
	 * crash before that, its sandbox is an orphan the node's reaper ends. */
	log_info("sandbox %s: starting (template %s, %lld MB)", id, c.template, c.memory);

	/* ask a provisioner; whatever happens, the record does not stay 'starting' */
	{
		static const char *const extra[] = { "node_id", "container_id", NULL };
		cleanup_json json_t *m = json_pack("{s:s}", "sandbox_id", id);
		cleanup_reply struct sbx_reply rep = { 0 };
		char reason[600];

		if (api_mq(r, &err) < 0 ||
		    sbx_msg_call(r->ctx->mq, SBX_MSG_PROVISION, NULL, m, (int)sbx_cfg_int(r->ctx->cfg, "rpc_timeout") * 1000,
				 extra, &rep, &err) < 0 ||
		    !rep.ok) {
			bool malformed = !rep.json && !strcmp(err.code, "bad_reply");

			if (rep.json)
				snprintf(reason, sizeof(reason), "%s", rep.error ? rep.error : "unknown error");
			else if (malformed)
				snprintf(reason, sizeof(reason), "provisioner sent a malformed reply");
			else
				snprintf(reason, sizeof(reason), "%s", err.http == 504 ? "no provisioner answered in time"
										     : "the work queue is unavailable");
			if (mark_failed(r, id, reason) == 0 && answer_if_ready(r, id))
				return;
			sbx_err_set(&err, 503, "provisioning_failed", "Provisioning failed: %s",
				    malformed ? "malformed reply" : reason);
			api_send_error_data(r, &err, json_pack("{s:s, s:s}", "id", id, "status", "failed"));
			return;
		}
		/* the provisioner answers ok only once it has marked it ready
		 * (provisioner.c): the record is read as it is now */
	}
	s = load_sandbox(r, id, &err);
	if (!s)
		goto fail;
	api_send_data(r, 201, "Sandbox created", s);
	return;
fail:
	sbx_db_rollback(&r->ctx->db);
	api_send_error(r, &err);
}

void h_sandboxes_create(struct api_req *r)
{
	char leased[SBX_ID_LEN + 1] = "";

	create(r, leased);
	if (leased[0])
		sbx_sandbox_lease_end(&r->ctx->db, leased);
}

void h_sandbox_delete(struct api_req *r)
{
	sbx_err err = SBX_ERR_INIT;
	int was, found;

	/* Write the intent first. A record that never got a sandbox (starting,
	 * failed) is destroyed at once: a create still running sees it and
	 * undoes its work; a node's leftovers are its reaper's. */
	found = sbx_sandbox_destroy_intent(&r->ctx->db, r->m.id, r->org.org_id, "user", &was, &err);
	if (found < 0) {
		api_send_error(r, &err);
		return;
	}
	if (!found) {
		sbx_err_set(&err, 404, "not_found", "Sandbox not found");
		api_send_error(r, &err);
		return;
	}
	if (was == SBX_SB_DESTROYED || (was >= 0 && (SBX_SB_UNPLACED & SBX_SB_BIT(was)))) {
		log_info("sandbox %s: destroyed (was %s)", r->m.id, sbx_sb_status_name((enum sbx_sb_status)was));
		api_send_json(r, 204, NULL);
		return;
	}
	{
		cleanup_json json_t *body = json_pack("{s:s}", "sandbox_id", r->m.id);
		cleanup_reply struct sbx_reply rep = { 0 };

		if (api_mq(r, &err) < 0 ||
		    sbx_msg_call(r->ctx->mq, SBX_MSG_DESTROY, NULL, body,
				 (int)sbx_cfg_int(r->ctx->cfg, "rpc_timeout") * 1000, NULL, &rep, &err) < 0 ||
		    !rep.ok) {
			if (rep.json || !strcmp(err.code, "bad_reply"))
				log_warnx("sandbox %s: destroy failed: %s", r->m.id,
					  rep.json ? (rep.error ? rep.error : "no reason given") : "malformed reply");
			sbx_err_set(&err, 503, "destroy_pending",
				    "The sandbox could not be destroyed now; the destroy is recorded and will be retried");
			api_send_error(r, &err);
			return;
		}
	}
	api_send_json(r, 204, NULL);
}
