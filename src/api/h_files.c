/* Files of a running sandbox: raw bytes in and out, streamed both ways (a
 * 50 MB file never sits whole in an API process), plus listing, delete,
 * mkdir and a batch upload. Paths were checked by the router: decoded,
 * absolute, no "..", no encoded slash, no NUL; they resolve inside the
 * sandbox because the sandbox's own init does the work. */
#include "config.h"
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cleanup.h"
#include "clock.h"
#include "json.h"
#include "log.h"
#include "page.h"
#include "runtime.h"

#define CHUNK (64 * 1024)
#define WINDOW (1024 * 1024)
#define FILE_OP_MS 120000
/* What is read and dropped of a body refused part-way (below). */
#define DRAIN_MAX (4 * 1024 * 1024)

static bool query_flag(struct api_req *r, const char *name)
{
	char v[8];
	sbx_err e = SBX_ERR_INIT;

	return sbx_query_get(r->m.query, name, v, sizeof(v), &e) == 1 && strcmp(v, "0") && strcmp(v, "false");
}

static void dirname_of(const char *path, char *out, size_t outsz)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash && slash != path ? (size_t)(slash - path) : 1;

	snprintf(out, outsz, "%.*s", (int)n, path);
}

/* A write answered with not_found means the parent directory is missing. */
static void write_error(const char *path, sbx_err *err)
{
	if (!strcmp(err->code, "not_found")) {
		char dir[SBX_ROUTE_PATH_MAX];
		dirname_of(path, dir, sizeof(dir));
		sbx_err_set(err, 400, "no_directory", "Destination directory does not exist: %s", dir);
	}
}

/* Waits for the node's answer to a write: credit (more may be sent), done
 * or error. Returns 1 done, 0 credit, -1 error. */
static int write_wait(struct rt_op *op, long long deadline, long long *granted, sbx_err *err)
{
	sbx_mq_msg m;
	int n = rt_next(op, deadline, &m, err);
	enum sbx_msg_kind kind;
	json_error_t jerr;

	if (n < 0)
		return -1;
	if (n == 0)
		return sbx_err_set(err, op->client_gone ? 400 : 504, "node_timeout",
				   op->client_gone ? "The client went away" : "The sandbox's node did not answer in time");
	kind = sbx_msg_kind(m.type);
	if (kind == SBX_MSG_FILE_CREDIT) {
		cleanup_json json_t *b = json_loadb(m.body, m.len, 0, &jerr);
		*granted += json_integer_value(json_object_get(b, "bytes"));
		sbx_mq_msg_free(&m);
		return 0;
	}
	if (kind == SBX_MSG_DONE) {
		sbx_mq_msg_free(&m);
		return 1;
	}
	if (kind == SBX_MSG_ERROR)
		rt_error_event(&m, err);
	else
		sbx_err_set(err, 502, "bad_event", "The node sent an unexpected answer");
	sbx_mq_msg_free(&m);
	return -1;
}

/* The upload will not complete: the node drops it (sbx-init removes its
 * temp file, so nothing partial is left). Returns -1 for the caller. */
static int write_abort(struct rt_op *op)
{
	sbx_err e = SBX_ERR_INIT;
	json_t *x = json_object();

	rt_send(op, SBX_MSG_FILE_ABORT, x, &e);
	json_decref(x);
	return -1;
}

/* Streams `len` bytes (from the request body, or from `data` when set) into
 * a new file at path. len < 0: a body of unknown length (chunked), read to
 * its end and cut off past `max` bytes; the node learns the size only at
 * the end, so the file appears whole or not at all. */
static int write_file(struct api_req *r, struct rt_sandbox *sb, const char *path, bool mkdir_parents,
		      const char *data, long long len, long long max, sbx_err *err)
{
	struct rt_op op;
	long long deadline = sbx_now_ms() + FILE_OP_MS, sent = 0, granted = WINDOW;
	json_t *b = json_pack("{s:s, s:b}", "path", path, "mkdir", mkdir_parents);
	char chunk[CHUNK];
	bool eof = false;
	int w;

	if (len >= 0)
		json_object_set_new(b, "size", json_integer((json_int_t)len));
	if (rt_start(&op, r, sb, SBX_MSG_FILE_WRITE, b, err) < 0) {
		json_decref(b);
		return -1;
	}
	json_decref(b);
	while (!eof && (len < 0 || sent < len)) {
		int n, want = (int)(len < 0 || len - sent > CHUNK ? CHUNK : len - sent);
		while (sent >= granted) {
			if ((w = write_wait(&op, deadline, &granted, err)) != 0) {
				if (w > 0)
					sbx_err_set(err, 502, "bad_event", "The node finished early");
				goto fail;
			}
		}
		if (data) {
			n = want;
			memcpy(chunk, data + sent, (size_t)n);
		} else {
			/* blocks until `want` bytes or the body's end, however
			 * slowly the client sends */
			n = FCGX_GetStr(chunk, want, r->fcgx->in);
			if (len >= 0 && n <= 0) {
				sbx_err_set(err, 400, "bad_request", "Request body shorter than its Content-Length");
				return write_abort(&op);
			}
			if (len < 0 && n < want) {
				/* the end of the body, or the front end gave up on
				 * the client: a cut body is never taken as a file */
				if (FCGX_GetError(r->fcgx->in) != 0) {
					sbx_err_set(err, 400, "bad_request", "The request body was cut off");
					return write_abort(&op);
				}
				eof = true;
			}
			if (len < 0 && sent + n > max) {
				sbx_err_set(err, 413, "body_too_large", "File too large (limit %lld bytes)", max);
				return write_abort(&op);
			}
		}
		if (n > 0 && rt_send_raw(&op, SBX_MSG_FILE_DATA, chunk, (size_t)n, err) < 0)
			goto fail;
		sent += n;
	}
	b = json_object();
	w = rt_send(&op, SBX_MSG_FILE_END, b, err);
	json_decref(b);
	if (w < 0)
		goto fail;
	while ((w = write_wait(&op, deadline, &granted, err)) == 0)
		;
	if (w > 0)
		return 0;
fail:
	return write_abort(&op);
}

/* An upload refused part-way: the rest of its body is read and dropped
 * (up to DRAIN_MAX) before the answer. Closing the FastCGI connection with
 * the body still coming makes the kernel reset it, and nginx then loses the
 * answer (seen: a 413 without its body). nginx's own client_max_body_size
 * ends a longer body (1 MiB over file_max_bytes by default). */
static void drain_body(struct api_req *r)
{
	char buf[CHUNK];
	long long n = 0;
	int got;

	while (n < DRAIN_MAX && (got = FCGX_GetStr(buf, (int)sizeof(buf), r->fcgx->in)) > 0)
		n += got;
}

static void put_file(struct api_req *r, struct rt_sandbox *sb)
{
	sbx_err err = SBX_ERR_INIT;
	const char *cl = api_param(r, "CONTENT_LENGTH");
	long long max = sbx_cfg_int(r->ctx->cfg, "file_max_bytes"), len = -1;

	/* no Content-Length: a chunked body (the SDKs send streams so), its
	 * length known only at its end */
	if (cl && *cl && (strspn(cl, "0123456789") != strlen(cl) || strlen(cl) > 15)) {
		sbx_err_set(&err, 400, "bad_request", "Invalid Content-Length");
		goto fail;
	}
	if (cl && *cl)
		len = atoll(cl);
	if (len > max) {
		/* refused before a byte of the body is read */
		sbx_err_set(&err, 413, "body_too_large", "File too large (limit %lld bytes)", max);
		goto fail;
	}
	if (!strcmp(r->m.path, "/")) {
		sbx_err_set(&err, 400, "invalid_path", "A file path is required");
		goto fail;
	}
	if (write_file(r, sb, r->m.path, query_flag(r, "mkdir"), NULL, len, max, &err) < 0) {
		write_error(r->m.path, &err);
		drain_body(r);
		goto fail;
	}
	api_send_json(r, 204, NULL);
	return;
fail:
	api_send_error(r, &err);
}

static void get_file(struct api_req *r, struct rt_sandbox *sb)
{
	struct rt_op op;
	sbx_err err = SBX_ERR_INIT;
	long long deadline = sbx_now_ms() + FILE_OP_MS, granted = WINDOW, consumed = 0;
	json_t *b = json_pack("{s:s, s:I}", "path", r->m.path, "credit", (json_int_t)WINDOW);
	bool head = false;
	sbx_mq_msg m;
	int n;

	if (rt_start(&op, r, sb, SBX_MSG_FILE_READ, b, &err) < 0) {
		json_decref(b);
		api_send_error(r, &err);
		return;
	}
	json_decref(b);
	while ((n = rt_next(&op, deadline, &m, &err)) == 1) {
		enum sbx_msg_kind kind = sbx_msg_kind(m.type);

		if (kind == SBX_MSG_FILE_DATA || kind == SBX_MSG_STDOUT) {
			if (!head) {
				FCGX_FPrintF(r->fcgx->out,
					     "Status: 200 OK\r\nX-Request-Id: %s\r\nCache-Control: no-store\r\n"
					     "Content-Type: application/octet-stream\r\n\r\n",
					     r->request_id);
				r->answered = true;
				r->status = 200;
				head = true;
			}
			FCGX_PutStr(m.body, (int)m.len, r->fcgx->out);
			if (FCGX_FFlush(r->fcgx->out) != 0) {
				sbx_mq_msg_free(&m);
				break; /* client gone */
			}
			consumed += (long long)m.len;
			if (granted - consumed < WINDOW / 2) {
				json_t *c = json_pack("{s:I}", "bytes", (json_int_t)(consumed + WINDOW - granted));
				if (rt_send(&op, SBX_MSG_CREDIT, c, &err) == 0)
					granted = consumed + WINDOW;
				json_decref(c);
			}
		} else if (kind == SBX_MSG_DONE || kind == SBX_MSG_EXIT) {
			sbx_mq_msg_free(&m);
			if (!head)
				api_send_text(r, 200, "application/octet-stream", "");
			return;
		} else if (kind == SBX_MSG_ERROR) {
			rt_error_event(&m, &err);
			sbx_mq_msg_free(&m);
			if (!head) {
				if (!strcmp(err.code, "not_found"))
					sbx_err_set(&err, 404, "not_found", "File not found: %s", r->m.path);
				api_send_error(r, &err);
			}
			return; /* after the head, a cut body is all we can say */
		}
		sbx_mq_msg_free(&m);
	}
	if (!head) {
		if (n == 0)
			sbx_err_set(&err, 504, "node_timeout", "The sandbox's node did not answer in time");
		api_send_error(r, &err);
	}
	r->answered = true;
}

static void one_shot(struct api_req *r, struct rt_sandbox *sb, enum sbx_msg_kind kind, json_t *body, int ok_status,
		     const char *message)
{
	cleanup_json json_t *reply = NULL;
	sbx_err err = SBX_ERR_INIT;

	if (rt_call(r, sb, kind, body, FILE_OP_MS, &reply, &err) < 0) {
		if (!strcmp(err.code, "not_found"))
			sbx_err_set(&err, 404, "not_found", "Not found: %s", r->m.path);
		api_send_error(r, &err);
		return;
	}
	if (ok_status == 204)
		api_send_json(r, 204, NULL);
	else
		api_send_data(r, ok_status, message, json_incref(reply));
}

void h_file(struct api_req *r)
{
	struct rt_sandbox sb;
	sbx_err err = SBX_ERR_INIT;

	memset(&sb, 0, sizeof(sb));
	/* a body over the cap is refused before anything else is looked at */
	if (r->m.method == SBX_M_PUT) {
		const char *cl = api_param(r, "CONTENT_LENGTH");
		if (cl && strspn(cl, "0123456789") == strlen(cl) && *cl &&
		    (strlen(cl) > 15 || atoll(cl) > sbx_cfg_int(r->ctx->cfg, "file_max_bytes"))) {
			sbx_err_set(&err, 413, "body_too_large", "File too large (limit %lld bytes)",
				    sbx_cfg_int(r->ctx->cfg, "file_max_bytes"));
			api_send_error(r, &err);
			return;
		}
	}
	if (rt_sandbox_ready(r, &sb, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	if (r->m.method == SBX_M_PUT) {
		put_file(r, &sb);
	} else if (r->m.method == SBX_M_DELETE) {
		json_t *b = json_pack("{s:s, s:b}", "path", r->m.path, "recursive", query_flag(r, "recursive"));
		one_shot(r, &sb, SBX_MSG_FILE_DELETE, b, 204, NULL);
		json_decref(b);
	} else if (query_flag(r, "list")) {
		json_t *b = json_pack("{s:s}", "path", r->m.path);
		one_shot(r, &sb, SBX_MSG_FILE_LIST, b, 200, "Directory listed");
		json_decref(b);
	} else {
		get_file(r, &sb);
	}
	rt_sandbox_free(&sb);
}

/* One file of a batch, decoded: its bytes in *out (NULL: `content` as is). */
static int batch_content(json_t *f, const char **content, char **out, size_t *len, sbx_err *err)
{
	const char *b64 = sbx_json_str(f, "content_base64", NULL), *enc = sbx_json_str(f, "encoding", NULL);
	json_t *v = json_object_get(f, b64 ? "content_base64" : sbx_json_str(f, "content", NULL) ? "content" : "body");
	/* a JSON string may hold NUL bytes: its length, not strlen */
	const char *src = json_is_string(v) ? json_string_value(v) : "";
	size_t slen = json_is_string(v) ? json_string_length(v) : 0;

	*out = NULL;
	*content = src;
	*len = slen;
	if (enc && strcmp(enc, "utf8") && strcmp(enc, "utf-8") && strcmp(enc, "base64"))
		return sbx_err_set(err, 400, "invalid_field", "encoding must be utf-8 or base64");
	if (b64 && enc && strcmp(enc, "base64"))
		return sbx_err_set(err, 400, "invalid_field", "content_base64 is base64: encoding can only be base64");
	if (!b64 && !(enc && !strcmp(enc, "base64")))
		return 0;
	*out = malloc(slen + 1);
	if (!*out)
		return sbx_err_set(err, 500, "nomem", "out of memory");
	if (sodium_base642bin((unsigned char *)*out, slen + 1, src, slen, " \r\n", len, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0) {
		*len = 0;
		return sbx_err_set(err, 400, "invalid_field", "%s is not valid base64", b64 ? "content_base64" : "content");
	}
	return 0;
}

/* POST .../files/batch {files:[{path, content_base64}]} (what the official
 * SDKs send; extension: content + encoding, mkdir) -> {uploaded, failed,
 * results:[{path, bytes, success, error?}]}, one result per file in order. */
void h_files_batch(struct api_req *r)
{
	static const struct sbx_jfield spec[] = { { "files", SBX_J_ARRAY, true, 1, 100 } };
	static const struct sbx_jfield fspec[] = {
		{ "path", SBX_J_STRING, true, 1, 4096 }, { "content_base64", SBX_J_STRING, false, 0, 0 },
		{ "content", SBX_J_STRING, false, 0, 0 }, { "body", SBX_J_STRING, false, 0, 0 },
		{ "encoding", SBX_J_STRING, false, 1, 16 }, { "mkdir", SBX_J_BOOL, false, 0, 0 },
	};
	cleanup_json json_t *body = NULL;
	struct rt_sandbox sb;
	sbx_err err = SBX_ERR_INIT;
	cleanup_free char *raw = NULL;
	long long max = sbx_cfg_int(r->ctx->cfg, "file_max_bytes");
	size_t rawlen;
	json_t *files, *f, *results;
	size_t i;
	int failed = 0;

	memset(&sb, 0, sizeof(sb));
	if (api_read_body(r, (size_t)max * 2, &raw, &rawlen, &err) < 0 ||
	    sbx_json_parse_body(raw, rawlen, (int)sbx_cfg_int(r->ctx->cfg, "api_json_max_depth"), false, &body, &err) < 0 ||
	    sbx_json_check(body, spec, SBX_ARRAY_LEN(spec), NULL, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	files = json_object_get(body, "files");
	json_array_foreach(files, i, f) {
		char where[32];
		snprintf(where, sizeof(where), "files[%zu]", i);
		if (sbx_json_check(f, fspec, SBX_ARRAY_LEN(fspec), where, &err) < 0) {
			api_send_error(r, &err);
			return;
		}
		if ((sbx_json_str(f, "content_base64", NULL) != NULL) +
			    (sbx_json_str(f, "content", NULL) != NULL) + (sbx_json_str(f, "body", NULL) != NULL) > 1) {
			sbx_err_set(&err, 400, "invalid_field", "%s: give one of content_base64 and content", where);
			api_send_error(r, &err);
			return;
		}
	}
	if (rt_sandbox_ready(r, &sb, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	results = json_array();
	json_array_foreach(files, i, f) {
		const char *path = sbx_json_str(f, "path", ""), *content = NULL;
		struct sbx_route_match pm;
		sbx_err ferr = SBX_ERR_INIT;
		cleanup_free char *uri = NULL, *dec = NULL;
		size_t dlen = 0;
		int rc = batch_content(f, &content, &dec, &dlen, &ferr);
		json_t *res;

		/* the same path rules as the URL form: run it through the router */
		if (rc == 0 &&
		    (asprintf(&uri, "/sandboxes/%s/files/%s", sb.id, path[0] == '/' ? path + 1 : path) < 0 ||
		     strchr(path, '%') || strchr(path, '?') || strchr(path, '#') ||
		     sbx_route_match("PUT", uri, &pm, &ferr) < 0 || pm.route != SBX_R_FILE || !strcmp(pm.path, "/"))) {
			if (!ferr.msg[0])
				sbx_err_set(&ferr, 400, "invalid_path", "Invalid path");
			rc = -1;
		}
		if (rc == 0 && (long long)dlen > max) {
			sbx_err_set(&ferr, 413, "body_too_large", "File too large (limit %lld bytes)", max);
			rc = -1;
		}
		if (rc == 0 && write_file(r, &sb, pm.path, sbx_json_bool(f, "mkdir", false), dec ? dec : content,
					  (long long)dlen, max, &ferr) < 0) {
			write_error(pm.path, &ferr);
			rc = -1;
		}
		res = json_pack("{s:s, s:I, s:b}", "path", rc == 0 ? pm.path : path, "bytes", (json_int_t)dlen,
				"success", rc == 0);
		if (rc < 0) {
			failed++;
			json_object_set_new(res, "error", json_string(ferr.msg));
		}
		json_array_append_new(results, res);
	}
	rt_sandbox_free(&sb);
	api_send_data(r, 200, failed ? "Some files failed" : "Files written",
		      json_pack("{s:i, s:i, s:o}", "uploaded", (int)json_array_size(results) - failed, "failed", failed,
				"results", results));
}
