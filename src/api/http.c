/* Request plumbing: parameters, bodies, answers, auth, dispatch. */
#include "config.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "api.h"
#include "sql.h"
#include "volumes.h"
#include "cleanup.h"
#include "errcode.h"
#include "json.h"
#include "log.h"
#include "metrics.h"

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	}
	return "Unknown";
}

const char *api_param(struct api_req *r, const char *name)
{
	return FCGX_GetParam(name, r->fcgx->envp);
}

static void send_head(struct api_req *r, int status, const char *ctype, const char *extra)
{
	FCGX_FPrintF(r->fcgx->out, "Status: %d %s\r\nX-Request-Id: %s\r\nCache-Control: no-store\r\n", status,
		     reason(status), r->request_id);
	if (ctype)
		FCGX_FPrintF(r->fcgx->out, "Content-Type: %s\r\n", ctype);
	if (extra)
		FCGX_PutS(extra, r->fcgx->out);
	FCGX_PutS("\r\n", r->fcgx->out);
	r->answered = true;
	r->status = status;
}

/* A JSON answer with optional extra header lines ("Name: value\r\n"). */
static void send_json(struct api_req *r, int status, json_t *body /* stolen */, const char *extra)
{
	char *s = NULL;

	if (r->answered) {
		json_decref(body);
		return;
	}
	if (body)
		/* 15 digits: a real like 4.27 prints so, not as 4.2699999999999996 */
		s = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(15));
	json_decref(body);
	if (status == 204) {
		send_head(r, status, NULL, extra);
		free(s);
		return;
	}
	if (!s) {
		send_head(r, 500, "application/json", NULL);
		FCGX_PutS("{\"message\":\"Internal error\",\"code\":\"internal\"}", r->fcgx->out);
		return;
	}
	send_head(r, status, "application/json", extra);
	FCGX_PutS(s, r->fcgx->out);
	free(s);
}

void api_send_json(struct api_req *r, int status, json_t *body)
{
	send_json(r, status, body, NULL);
}

void api_send_data(struct api_req *r, int status, const char *message, json_t *data)
{
	json_t *o = json_object();

	json_object_set_new(o, "message", json_string(message));
	json_object_set_new(o, "data", data ? data : json_null());
	api_send_json(r, status, o);
}

/* The envelope around pre, data[0..len) and post, written as they are:
 * JSON text that is never parsed here. */
static void send_data_text(struct api_req *r, int status, const char *message, const char *pre, const char *data,
			   size_t len, const char *post)
{
	cleanup_json json_t *m = json_string(message);
	cleanup_free char *ms = m ? json_dumps(m, JSON_ENCODE_ANY) : NULL;

	if (r->answered)
		return;
	if (!ms) {
		send_json(r, 500, NULL, NULL);
		return;
	}
	send_head(r, status, "application/json", NULL);
	FCGX_PutS("{\"message\":", r->fcgx->out);
	FCGX_PutS(ms, r->fcgx->out);
	FCGX_PutS(",\"data\":", r->fcgx->out);
	FCGX_PutS(pre, r->fcgx->out);
	FCGX_PutStr(data, (int)len, r->fcgx->out);
	FCGX_PutS(post, r->fcgx->out);
	FCGX_PutS("}", r->fcgx->out);
}

void api_send_data_raw(struct api_req *r, int status, const char *message, const char *data, size_t len)
{
	send_data_text(r, status, message, "", data, len, "");
}

void api_send_page_raw(struct api_req *r, const char *message, const sbx_page *pg, PGresult *res)
{
	long long total = atoll(PQgetvalue(res, 0, 0));
	const char *items = PQgetvalue(res, 0, 1);
	size_t n = (size_t)PQgetlength(res, 0, 1);
	char tail[160];

	snprintf(tail, sizeof(tail), ",\"totalCount\":%lld,\"currentPage\":%ld,\"totalPages\":%ld,\"limit\":%ld}",
		 total, pg->page, sbx_page_total_pages((long)total, pg->limit), pg->limit);
	if (!n) {
		items = "[]";
		n = 2;
	}
	send_data_text(r, 200, message, "{\"data\":", items, n, tail);
}

void api_send_error(struct api_req *r, const sbx_err *err)
{
	api_send_error_data(r, err, NULL);
}

void api_send_error_data(struct api_req *r, const sbx_err *err, json_t *data)
{
	sbx_err slow = SBX_ERR_INIT;
	char hdr[160] = "";
	int status, retry;
	json_t *o;

	if (r->answered) {
		json_decref(data);
		return;
	}
	/* whatever the handler made of the body it never got whole, the
	 * reason is that the client sent it too slowly */
	if (api_body_guard_tripped(&slow))
		err = &slow;
	status = err->http >= 400 && err->http <= 599 ? err->http : 500;
	if (status >= 500)
		log_warnx("%s %s -> %d %s: %s", r->method, r->uri, status, err->code, err->msg);
	o = json_object();
	/* internal details stay in the log; the client gets a plain sentence */
	if (status == 500)
		json_object_set_new(o, "message", json_string("Internal error"));
	else
		json_object_set_new(o, "message", json_string(err->msg));
	json_object_set_new(o, "code", json_string(err->code[0] ? err->code : "error"));
	if (data)
		json_object_set_new(o, "data", data);
	if (status == 405) {
		char allow[64];
		sbx_route_allow_header(r->m.allowed, allow, sizeof(allow));
		snprintf(hdr, sizeof(hdr), "Allow: %s\r\n", allow);
	} else if ((retry = r->retry_after > 0 ? r->retry_after : sbx_code_retry_after(err->code)) > 0 ||
		   status == 429) {
		/* API.md: every 429 says when to come back */
		snprintf(hdr, sizeof(hdr), "Retry-After: %d\r\n", retry > 0 ? retry : 1);
	}
	send_json(r, status, o, hdr[0] ? hdr : NULL);
}

void api_send_text(struct api_req *r, int status, const char *ctype, const char *text)
{
	if (r->answered)
		return;
	send_head(r, status, ctype, NULL);
	FCGX_PutS(text, r->fcgx->out);
}

int api_read_body(struct api_req *r, size_t limit, char **out, size_t *len, sbx_err *err)
{
	const char *cl = api_param(r, "CONTENT_LENGTH");
	size_t want = 0, have = 0, cap;
	bool known = false;
	char *buf;

	*out = NULL;
	*len = 0;
	if (cl && *cl) {
		char *end;
		unsigned long long v;
		if (strspn(cl, "0123456789") != strlen(cl) || strlen(cl) > 15)
			return sbx_err_set(err, 400, "bad_request", "Invalid Content-Length");
		v = strtoull(cl, &end, 10);
		/* refuse before reading a byte */
		if (v > limit)
			return sbx_err_set(err, 413, "body_too_large", "Request body too large (limit %zu bytes)", limit);
		want = (size_t)v;
		known = true;
	}
	cap = known ? want + 1 : 8192;
	buf = malloc(cap);
	if (!buf)
		return sbx_err_set(err, 500, "nomem", "out of memory");
	for (;;) {
		int n;
		if (known && have == want)
			break;
		if (have + 1 >= cap) {
			char *nb;
			if (cap > limit + 1) {
				free(buf);
				return sbx_err_set(err, 413, "body_too_large", "Request body too large (limit %zu bytes)",
						   limit);
			}
			nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				return sbx_err_set(err, 500, "nomem", "out of memory");
			}
			buf = nb;
			cap *= 2;
		}
		n = FCGX_GetStr(buf + have, (int)(cap - 1 - have), r->fcgx->in);
		if (n <= 0)
			break;
		have += (size_t)n;
		if (have > limit) {
			free(buf);
			return sbx_err_set(err, 413, "body_too_large", "Request body too large (limit %zu bytes)", limit);
		}
	}
	if (known && have != want) {
		free(buf);
		return sbx_err_set(err, 400, "bad_request", "Request body shorter than its Content-Length");
	}
	buf[have] = 0;
	*out = buf;
	*len = have;
	return 0;
}

int api_json_body(struct api_req *r, json_t **out, sbx_err *err)
{
	cleanup_free char *body = NULL;
	size_t len;

	if (api_read_body(r, (size_t)sbx_cfg_int(r->ctx->cfg, "api_max_json_body"), &body, &len, err) < 0)
		return -1;
	return sbx_json_parse_body(body, len, (int)sbx_cfg_int(r->ctx->cfg, "api_json_max_depth"), true, out,
				   err);
}

json_t *api_json_from_row(PGresult *res, int row, int col)
{
	json_error_t jerr;

	return json_loadb(PQgetvalue(res, row, col), (size_t)PQgetlength(res, row, col), 0, &jerr);
}

int api_one_row(PGresult *res, const char *what, sbx_err *err)
{
	if (PQntuples(res) != 1)
		return sbx_err_set(err, 404, "not_found", "%s not found", what);
	return 0;
}

int api_page(struct api_req *r, sbx_page *pg, char lim[16], char off[24], sbx_err *err)
{
	if (sbx_page_parse(r->m.query, pg, err) < 0)
		return -1;
	snprintf(lim, 16, "%ld", pg->limit);
	snprintf(off, 24, "%lld", (long long)(pg->page - 1) * pg->limit);
	return 0;
}

json_t *api_page_data(struct api_req *r, const sbx_page *pg, PGresult *res,
		      void (*fix)(const sbx_config *cfg, json_t *item))
{
	long long total = atoll(PQgetvalue(res, 0, 0));
	json_t *items = api_json_from_row(res, 0, 1), *it;
	size_t i;

	if (!items)
		items = json_array();
	if (fix)
		json_array_foreach(items, i, it)
			fix(r->ctx->cfg, it);
	return json_pack("{s:o, s:I, s:i, s:I, s:i}", "data", items, "totalCount", (json_int_t)total, "currentPage",
			 (int)pg->page, "totalPages", (json_int_t)sbx_page_total_pages(total, pg->limit), "limit",
			 (int)pg->limit);
}

int api_mq(struct api_req *r, sbx_err *err)
{
	api_turn_leave(); /* what follows waits for a worker */
	if (!r->ctx->mq)
		return sbx_mq_open(&r->ctx->mq, sbx_cfg_str(r->ctx->cfg, "amqp_url"), err);
	return sbx_mq_ensure(r->ctx->mq, err);
}

/* The key, from any of the three headers clients send it in. */
static const char *find_token(struct api_req *r)
{
	const char *a = api_param(r, "HTTP_AUTHORIZATION");

	if (a && *a) {
		if (strncasecmp(a, "Bearer ", 7) == 0) {
			a += 7;
			while (*a == ' ')
				a++;
			return a;
		}
		return a; /* a bare key in Authorization: still checked */
	}
	a = api_param(r, "HTTP_X_API_KEY");
	if (a && *a)
		return a;
	a = api_param(r, "HTTP_X_BRIMBLE_KEY");
	if (a && *a)
		return a;
	return NULL;
}

int api_authenticate(struct api_req *r, sbx_err *err)
{
	unsigned char hash[SBX_KEY_HASH_LEN];
	char hash_hex[2 * SBX_KEY_HASH_LEN + 3];
	cleanup_pgres PGresult *res = NULL;
	const char *tok = find_token(r);

	if (!tok)
		return sbx_err_set(err, 401, "unauthorized", "Missing API key");
	if (!sbx_auth_token_wellformed(tok))
		return sbx_err_set(err, 401, "unauthorized", "Invalid API key");
	sbx_auth_hash(&r->ctx->auth, tok, hash);
	if (api_auth_cache_get(r->ctx, hash, &r->org))
		return 0;
	hash_hex[0] = '\\';
	hash_hex[1] = 'x';
	sbx_hex(hash, sizeof(hash), hash_hex + 2);
	if (sbx_db_query(&r->ctx->db, &res, err, SQL_AUTH_KEY, 1, hash_hex) < 0)
		return -1;
	if (PQntuples(res) != 1)
		return sbx_err_set(err, 401, "unauthorized", "Invalid API key");
	{
		/* the index found it; compare in constant time all the same */
		size_t blen = 0;
		unsigned char *stored = PQunescapeBytea((const unsigned char *)PQgetvalue(res, 0, 2), &blen);
		bool same = stored && blen == SBX_KEY_HASH_LEN && sbx_auth_hash_equal(stored, hash);
		PQfreemem(stored);
		if (!same)
			return sbx_err_set(err, 401, "unauthorized", "Invalid API key");
	}
	snprintf(r->org.key_id, sizeof(r->org.key_id), "%s", PQgetvalue(res, 0, 0));
	snprintf(r->org.org_id, sizeof(r->org.org_id), "%s", PQgetvalue(res, 0, 1));
	r->org.is_admin = PQgetvalue(res, 0, 3)[0] == 't';
	r->org.max_sandboxes = atoll(PQgetvalue(res, 0, 4));
	r->org.max_memory_mb = atoll(PQgetvalue(res, 0, 5));
	r->org.max_requests = atoll(PQgetvalue(res, 0, 7));
	r->org.max_streams = atoll(PQgetvalue(res, 0, 8));
	r->org.key_rate = atoll(PQgetvalue(res, 0, 9));
	r->org.key_burst = atoll(PQgetvalue(res, 0, 10));
	r->org.max_sandbox_execs = atoll(PQgetvalue(res, 0, 11));
	api_auth_cache_put(r->ctx, hash, &r->org);
	if (PQgetvalue(res, 0, 6)[0] == 't') {
		sbx_err ignore = SBX_ERR_INIT;
		/* at most once a minute: a write per request would cost more than it tells */
		sbx_db_query(&r->ctx->db, NULL, &ignore, "UPDATE api_keys SET last_used_at = now() WHERE id = $1", 1,
			     r->org.key_id);
	}
	return 0;
}

static void not_implemented(struct api_req *r)
{
	sbx_err err = SBX_ERR_INIT;

	sbx_err_set(&err, 501, "not_implemented", "Not implemented yet: %s", sbx_route_name(r->m.route));
	api_send_error(r, &err);
}

static const struct {
	api_handler get, post, put, del;
	bool public; /* no key needed */
} handlers[SBX_R__COUNT] = {
	[SBX_R_HEALTHZ] = { .get = h_healthz, .public = true },
	[SBX_R_METRICS] = { .get = h_metrics, .public = true /* checked inside: local or admin */ },
	[SBX_R_TEMPLATES] = { .get = h_templates },
	[SBX_R_REGIONS] = { .get = h_regions },
	[SBX_R_SANDBOXES] = { .get = h_sandboxes_list, .post = h_sandboxes_create },
	[SBX_R_SANDBOX] = { .get = h_sandbox_get, .del = h_sandbox_delete },
	[SBX_R_SANDBOX_WAIT] = { .get = h_sandbox_wait },
	[SBX_R_SANDBOX_PAUSE] = { .post = h_sandbox_pause },
	[SBX_R_SANDBOX_RESUME] = { .post = h_sandbox_resume },
	[SBX_R_SANDBOX_TIMEOUT] = { .post = h_sandbox_timeout },
	[SBX_R_SANDBOX_EGRESS] = { .put = h_sandbox_egress },
	[SBX_R_SANDBOX_STATS] = { .get = h_sandbox_stats },
	[SBX_R_EXEC] = { .post = h_exec },
	[SBX_R_CODE] = { .post = h_code },
	[SBX_R_FILE] = { .get = h_file, .put = h_file, .del = h_file },
	[SBX_R_FILES_BATCH] = { .post = h_files_batch },
	[SBX_R_PROCESSES] = { .get = h_processes },
	[SBX_R_PROCESS] = { .get = h_process },
	[SBX_R_PROCESS_OUTPUT] = { .get = h_process_output },
	[SBX_R_PROCESS_STDIN] = { .post = h_process_stdin },
	[SBX_R_PROCESS_SIGNAL] = { .post = h_process_signal },
	[SBX_R_PROCESS_RESIZE] = { .post = h_process_resize },
	[SBX_R_USAGE] = { .get = h_usage },
	[SBX_R_VOLUMES] = { .get = h_volumes_list, .post = h_volumes_create },
	[SBX_R_VOLUME] = { .get = h_volume_get, .del = h_volume_delete },
	[SBX_R_SANDBOX_SNAPSHOTS] = { .get = h_sandbox_snapshots, .post = h_sandbox_snapshots },
	[SBX_R_SNAPSHOTS] = { .get = h_snapshots_list },
	[SBX_R_SNAPSHOT] = { .del = h_snapshot_delete },
};

static long long mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void api_handle(struct api_ctx *ctx, FCGX_Request *fcgx)
{
	struct api_req r;
	sbx_err err = SBX_ERR_INIT;
	const char *rid;
	long long t0 = mono_us();
	api_handler h = NULL;

	memset(&r, 0, sizeof(r));
	r.ctx = ctx;
	r.fcgx = fcgx;
	r.slots.request = r.slots.stream = -1;
	api_body_guard_start(&r);
	r.method = api_param(&r, "REQUEST_METHOD");
	r.uri = api_param(&r, "REQUEST_URI");
	if (!r.method)
		r.method = "";
	if (!r.uri)
		r.uri = "";
	rid = api_param(&r, "HTTP_X_REQUEST_ID");
	if (sbx_request_id_valid(rid))
		snprintf(r.request_id, sizeof(r.request_id), "%s", rid);
	else
		sbx_id_new(r.request_id);
	sbx_log_set_request_id(r.request_id);

	if (sbx_route_match(r.method, r.uri, &r.m, &err) < 0) {
		/* a malformed id or path under a private resource: who asks comes first */
		sbx_err aerr = SBX_ERR_INIT;
		if (err.http == 400 && api_authenticate(&r, &aerr) < 0)
			api_send_error(&r, &aerr);
		else
			api_send_error(&r, &err);
		goto done;
	}
	switch (r.m.method) {
	case SBX_M_GET: h = handlers[r.m.route].get; break;
	case SBX_M_POST: h = handlers[r.m.route].post; break;
	case SBX_M_PUT: h = handlers[r.m.route].put; break;
	case SBX_M_DELETE: h = handlers[r.m.route].del; break;
	}
	if (!handlers[r.m.route].public &&
	    (api_authenticate(&r, &err) < 0 || api_rate_check(&r, &err) < 0 ||
	     api_limits_acquire(&r, &err) < 0)) {
		api_send_error(&r, &err);
		goto done;
	}
	if (api_route_is_long(&r))
		api_turn_leave(); /* a stream, a transfer or a long poll */
	if (!h)
		not_implemented(&r);
	else
		h(&r);
	if (!r.answered) {
		sbx_err_set(&err, 500, "internal", "handler gave no answer");
		api_send_error(&r, &err);
	}
done:
	api_limits_release(&r);
	api_metrics_observe(r.m.route, r.method, r.status, mono_us() - t0);
	log_info("%s %.200s %d %lldus%s%s", r.method, r.uri, r.status, mono_us() - t0,
		 r.org.org_id[0] ? " org=" : "", r.org.org_id);
	sbx_log_set_request_id(NULL);
}
