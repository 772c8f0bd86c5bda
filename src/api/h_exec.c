/* POST /sandboxes/{id}/exec and /code: run a command, answer as JSON, SSE or
 * NDJSON. Output is relayed as it comes, with a credit window: we grant the
 * node more bytes only as we hand them to our client, so a slow reader slows
 * the command down and nothing piles up anywhere on the way. */
#include "config.h"
#include <errno.h>
#include <fastcgi.h>
#include <signal.h>
#include <stdint.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "bodies.h"
#include "cleanup.h"
#include "clock.h"
#include "json.h"
#include "log.h"
#include "runtime.h"
#include "sandbox_state.h"

/* Output bytes the node may send ahead of what our client has taken. Each
 * grant is a round trip through RabbitMQ, so a stream moves at most about
 * WINDOW/2 per round trip: 256 KiB held one stream near 50 MiB/s on a
 * loaded 2-CPU machine. The node batches up to 512 KiB of output into one
 * message (workers/relay.c), so the window holds several of them: 4 MiB in
 * flight per stream (in RabbitMQ's and our socket buffers) and flow
 * control still bounds every process on the way (bench/exec-latency). */
#define WINDOW (4 * 1024 * 1024)

enum out_mode { OUT_JSON, OUT_SSE, OUT_NDJSON };

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_free(struct buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* Room for n more bytes and a NUL. */
static int buf_reserve(struct buf *b, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 4096;
		char *np;
		while (nc < b->len + n + 1)
			nc *= 2;
		np = realloc(b->p, nc);
		if (!np)
			return -1;
		b->p = np;
		b->cap = nc;
	}
	return 0;
}

static int buf_add(struct buf *b, const char *d, size_t n)
{
	if (buf_reserve(b, n) < 0)
		return -1;
	memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = 0;
	return 0;
}

/* Length of the valid UTF-8 prefix of s[0..n). *incomplete is set when the
 * rest is only the start of a character cut at the end (up to 3 bytes). */
static size_t utf8_prefix(const unsigned char *s, size_t n, bool *incomplete)
{
	size_t i = 0;

	*incomplete = false;
	while (i < n) {
		unsigned char c = s[i];
		size_t k;
		unsigned cp;
		if (c < 0x80) {
			/* output is mostly ASCII: eight bytes a step while it is */
			uint64_t w;
			i++;
			while (i + 8 <= n && (memcpy(&w, s + i, 8), !(w & 0x8080808080808080ULL)))
				i += 8;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			k = 1;
			cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			k = 2;
			cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			k = 3;
			cp = c & 0x07;
		} else {
			return i;
		}
		if (i + k >= n) {
			/* cut at the end: fine if what is there could still be valid */
			for (size_t j = i + 1; j < n; j++)
				if ((s[j] & 0xC0) != 0x80)
					return i;
			*incomplete = true;
			return i;
		}
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return i;
			cp = (cp << 6) | (s[i + j] & 0x3F);
		}
		if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return i;
		i += k + 1;
	}
	return i;
}

char *rt_base64(const void *d, size_t n)
{
	size_t el = sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL);
	char *e = malloc(el);

	if (e)
		sodium_bin2base64(e, el, d, n, sodium_base64_VARIANT_ORIGINAL);
	return e;
}

static json_t *bytes_json(const char *d, size_t n, bool *b64)
{
	bool inc;

	if (utf8_prefix((const unsigned char *)d, n, &inc) == n && !inc) {
		*b64 = false;
		return json_stringn(d, n);
	}
	{
		char *e = rt_base64(d, n);
		json_t *j;
		if (!e)
			return NULL;
		j = json_string(e);
		free(e);
		*b64 = true;
		return j;
	}
}

struct exec_run {
	struct api_req *r;
	struct rt_op op;
	enum out_mode mode;
	bool head_sent;
	/* stream mode: bytes of an unfinished UTF-8 character per stream */
	char carry[2][4];
	size_t carry_len[2];
	/* json mode */
	struct buf out[2];
	bool truncated, killed;
	long long cap;
	/* credit */
	long long granted, consumed;
	/* stream mode: the frame being written (kept from frame to frame) */
	struct buf frame;
};

static void send_head_stream(struct exec_run *x)
{
	if (x->head_sent)
		return;
	FCGX_FPrintF(x->r->fcgx->out,
		     "Status: 200 OK\r\nX-Request-Id: %s\r\nCache-Control: no-store\r\nX-Accel-Buffering: no\r\n"
		     "Content-Type: %s\r\n\r\n",
		     x->r->request_id, x->mode == OUT_SSE ? "text/event-stream" : "application/x-ndjson");
	x->r->answered = true;
	x->r->status = 200;
	x->head_sent = true;
}

/* A frame this large goes to nginx as FastCGI records of up to 64 KiB in
 * one writev, not through FCGX's 8 KiB buffer (a write and a record per
 * 8 KiB, which nginx then reads as many small pieces). */
#define LARGE_FRAME (32 * 1024)
#define REC_MAX 65528 /* a record's content: < 64 KiB, 8-byte aligned */

static bool write_records(struct exec_run *x, const char *d, size_t n)
{
	FCGX_Request *f = x->r->fcgx;
	FCGI_Header hdr[16];
	struct iovec iov[32];

	/* what FCGX holds (the head, a small frame) goes first */
	if (FCGX_FFlush(f->out) != 0 || FCGX_GetError(f->out))
		return false;
	x->r->unflushed = false;
	while (n) {
		int k = 0;
		size_t sent = 0;
		while (n > sent && k < 16) {
			size_t c = n - sent > REC_MAX ? REC_MAX : n - sent;
			hdr[k] = (FCGI_Header){ .version = FCGI_VERSION_1, .type = FCGI_STDOUT,
						.requestIdB1 = (unsigned char)(f->requestId >> 8),
						.requestIdB0 = (unsigned char)f->requestId,
						.contentLengthB1 = (unsigned char)(c >> 8),
						.contentLengthB0 = (unsigned char)c };
			iov[2 * k] = (struct iovec){ hdr + k, sizeof(hdr[k]) };
			iov[2 * k + 1] = (struct iovec){ (char *)d + sent, c };
			sent += c;
			k++;
		}
		for (int i = 0; i < 2 * k;) {
			ssize_t w = writev(f->ipcFd, iov + i, 2 * k - i);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return false;
			while (i < 2 * k && (size_t)w >= iov[i].iov_len)
				w -= (ssize_t)iov[i++].iov_len;
			if (i < 2 * k) {
				iov[i].iov_base = (char *)iov[i].iov_base + w;
				iov[i].iov_len -= (size_t)w;
			}
		}
		d += sent;
		n -= sent;
	}
	return true;
}

/* Hands what was written to nginx, unless the node's next message is
 * already here: then it goes out with that one (fewer writes on a fast
 * stream; a frame is never held while we wait for more). */
static bool flush_out(struct exec_run *x)
{
	if (sbx_mq_buffered(x->r->ctx->mq)) {
		x->r->unflushed = true; /* rt_next flushes before it waits */
		return !FCGX_GetError(x->r->fcgx->out);
	}
	x->r->unflushed = false;
	return FCGX_FFlush(x->r->fcgx->out) == 0 && !FCGX_GetError(x->r->fcgx->out);
}

/* Writes one frame to the client; false when the client is gone. */
static bool emit(struct exec_run *x, json_t *frame /* stolen */)
{
	char *s = json_dumps(frame, JSON_COMPACT);

	json_decref(frame);
	if (!s)
		return false;
	send_head_stream(x);
	if (x->mode == OUT_SSE)
		FCGX_PutS("data: ", x->r->fcgx->out);
	FCGX_PutS(s, x->r->fcgx->out);
	FCGX_PutS(x->mode == OUT_SSE ? "\n\n" : "\n", x->r->fcgx->out);
	free(s);
	x->r->unflushed = false;
	return FCGX_FFlush(x->r->fcgx->out) == 0 && !FCGX_GetError(x->r->fcgx->out);
}

/* Appends d[0..n) as the inside of a JSON string, escaped as jansson's
 * JSON_COMPACT dump does (the bytes are valid UTF-8): sbx_json_escape
 * writes straight into the buffer, grown first to the most it can take. */
static int buf_add_escaped(struct buf *b, const char *d, size_t n)
{
	if (n > (SIZE_MAX / 2 - b->len) / 6 || buf_reserve(b, 6 * n) < 0)
		return -1;
	b->len += sbx_json_escape(b->p + b->len, d, n);
	b->p[b->len] = 0;
	return 0;
}

/* One stdout/stderr frame, written without building a JSON tree (the
 * stream's hot path): the same bytes json_dumps would give. `text`: the
 * caller found d[0..n) valid UTF-8 (else it goes as base64). */
static bool emit_output(struct exec_run *x, const char *name, const char *d, size_t n, bool text)
{
	struct buf *b = &x->frame;

	b->len = 0;
	if (buf_add(b, x->mode == OUT_SSE ? "data: {\"type\":\"" : "{\"type\":\"", x->mode == OUT_SSE ? 15 : 9) < 0 ||
	    buf_add(b, name, strlen(name)) < 0 || buf_add(b, "\",\"data\":\"", 10) < 0)
		return false;
	if (text) {
		if (buf_add_escaped(b, d, n) < 0 || buf_add(b, "\"}", 2) < 0)
			return false;
	} else {
		cleanup_free char *e = rt_base64(d, n);
		if (!e || buf_add(b, e, strlen(e)) < 0 ||
		    buf_add(b, "\",\"encoding\":\"base64\"}", sizeof("\",\"encoding\":\"base64\"}") - 1) < 0)
			return false;
	}
	if (buf_add(b, x->mode == OUT_SSE ? "\n\n" : "\n", x->mode == OUT_SSE ? 2 : 1) < 0)
		return false;
	send_head_stream(x);
	if (b->len >= LARGE_FRAME)
		return write_records(x, b->p, b->len);
	FCGX_PutStr(b->p, (int)b->len, x->r->fcgx->out);
	return flush_out(x);
}

static void grant(struct exec_run *x, size_t n)
{
	sbx_err err = SBX_ERR_INIT;

	x->consumed += (long long)n;
	if (x->granted - x->consumed < WINDOW / 2) {
		long long more = x->consumed + WINDOW - x->granted;
		json_t *b = json_pack("{s:I}", "bytes", (json_int_t)more);
		if (rt_send(&x->op, SBX_MSG_CREDIT, b, &err) == 0)
			x->granted += more;
		json_decref(b);
	}
}

static void kill_op(struct exec_run *x)
{
	sbx_err err = SBX_ERR_INIT;
	json_t *b;

	if (x->killed)
		return;
	b = json_pack("{s:i}", "signal", SIGKILL);
	rt_send(&x->op, SBX_MSG_SIGNAL, b, &err);
	json_decref(b);
	x->killed = true;
}

/* One stdout/stderr event. Returns false when the client went away. */
static bool on_output(struct exec_run *x, int which, const char *d, size_t n)
{
	const char *name = which ? "stderr" : "stdout";

	if (x->mode == OUT_JSON) {
		size_t room = x->out[which].len < (size_t)x->cap ? (size_t)x->cap - x->out[which].len : 0;
		if (n > room) {
			x->truncated = true;
			kill_op(x); /* beyond the cap: stop the command, keep what we have */
		}
		if (buf_add(&x->out[which], d, n > room ? room : n) < 0)
			kill_op(x);
		/* the kill goes out before this credit (kill_op above), on the
		 * same ordered path: all the credit granted before it is the
		 * cap + WINDOW at most, and what comes after is read only to
		 * drain (sbx-init sends EXIT once the pipes are read) */
		grant(x, n);
		return true;
	}
	{
		/* complete characters go out as text; a cut one waits for its end */
		size_t total = x->carry_len[which] + n;
		cleanup_free char *joined = NULL;
		const char *all = d;
		bool inc;
		size_t good, send;

		if (x->carry_len[which]) {
			/* only then a copy: the bytes of the cut character come first */
			if (!(joined = malloc(total)))
				return false;
			memcpy(joined, x->carry[which], x->carry_len[which]);
			memcpy(joined + x->carry_len[which], d, n);
			all = joined;
		}
		good = utf8_prefix((const unsigned char *)all, total, &inc);
		send = total;
		x->carry_len[which] = 0;
		if (inc && good + 4 > total) {
			send = good;
			x->carry_len[which] = total - good;
			memcpy(x->carry[which], all + good, total - good);
		}
		if (!emit_output(x, name, all, send, good == send))
			return false;
		grant(x, n);
		return true;
	}
}

static bool flush_carry(struct exec_run *x)
{
	for (int w = 0; w < 2; w++) {
		if (x->mode != OUT_JSON && x->carry_len[w]) {
			bool b64;
			json_t *fr = json_pack("{s:s, s:o}", "type", w ? "stderr" : "stdout", "data",
					       bytes_json(x->carry[w], x->carry_len[w], &b64));
			if (b64)
				json_object_set_new(fr, "encoding", json_string("base64"));
			x->carry_len[w] = 0;
			if (!emit(x, fr))
				return false;
		}
	}
	return true;
}

struct exec_params {
	json_t *argv;       /* array of strings */
	json_t *env;        /* merged env object */
	const char *cwd;
	long long timeout_s;
	const char *stdin_b64;
	bool stream, background;
	long long cols, rows; /* a pseudo-terminal of that size (cols 0: none) */
};

/* Relays the events of an exec-like op (exec, attach) to the client as
 * JSON, SSE or NDJSON until its end, the deadline, or the client leaves. */
void rt_relay_output(struct api_req *r, struct rt_op *op, bool stream, bool background, long long deadline)
{
	struct exec_run x;
	sbx_err err = SBX_ERR_INIT;
	sbx_mq_msg m;
	const char *acc = api_param(r, "HTTP_ACCEPT");
	int n;

	memset(&x, 0, sizeof(x));
	x.r = r;
	x.op = *op;
	x.cap = sbx_cfg_int(r->ctx->cfg, "exec_json_cap");
	x.mode = !stream || background ? OUT_JSON
		 : (acc && strstr(acc, "application/x-ndjson") ? OUT_NDJSON : OUT_SSE);
	x.granted = WINDOW;
	while ((n = rt_next(&x.op, deadline, &m, &err)) == 1) {
		enum sbx_msg_kind kind = sbx_msg_kind(m.type);
		bool done = false, ok = true;

		if (kind == SBX_MSG_STDOUT || kind == SBX_MSG_STDERR) {
			ok = on_output(&x, kind == SBX_MSG_STDERR, m.body, m.len);
		} else if (kind == SBX_MSG_STARTED) {
			if (background) {
				cleanup_json json_t *b = json_loadb(m.body, m.len, 0, NULL);
				json_int_t pid = json_integer_value(json_object_get(b, "pid"));
				sbx_mq_msg_free(&m);
				api_send_data(r, 200, "Process started in the background", json_pack("{s:I}", "pid", pid));
				return;
			}
		} else if (kind == SBX_MSG_EXIT) {
			cleanup_json json_t *b = json_loadb(m.body, m.len, 0, NULL);
			json_int_t code = json_integer_value(json_object_get(b, "exit_code"));
			json_int_t dur = json_integer_value(json_object_get(b, "duration_ms"));
			bool timed_out = json_is_true(json_object_get(b, "timed_out"));
			bool oom = json_is_true(json_object_get(b, "oom"));
			done = true;
			if (x.mode == OUT_JSON) {
				bool b64o, b64e;
				json_t *d = json_pack("{s:o, s:o, s:I, s:I}", "stdout",
						      bytes_json(x.out[0].p ? x.out[0].p : "", x.out[0].len, &b64o), "stderr",
						      bytes_json(x.out[1].p ? x.out[1].p : "", x.out[1].len, &b64e),
						      "exit_code", code, "duration_ms", dur);
				if (b64o)
					json_object_set_new(d, "stdout_encoding", json_string("base64"));
				if (b64e)
					json_object_set_new(d, "stderr_encoding", json_string("base64"));
				if (x.truncated)
					json_object_set_new(d, "truncated", json_true());
				if (timed_out)
					json_object_set_new(d, "timed_out", json_true());
				if (oom)
					json_object_set_new(d, "oom_killed", json_true());
				api_send_data(r, 200, "Command finished", d);
			} else {
				json_t *fr = json_pack("{s:s, s:I, s:I}", "type", "done", "exit_code", code, "duration_ms", dur);
				if (timed_out)
					json_object_set_new(fr, "timed_out", json_true());
				if (oom)
					json_object_set_new(fr, "oom_killed", json_true());
				ok = flush_carry(&x) && emit(&x, fr);
			}
		} else if (kind == SBX_MSG_ERROR) {
			rt_error_event(&m, &err);
			done = true;
			if (x.mode == OUT_JSON)
				api_send_error(r, &err);
			else
				ok = flush_carry(&x) &&
				     emit(&x, json_pack("{s:s, s:s}", "type", "error", "message", err.msg));
		}
		sbx_mq_msg_free(&m);
		if (!ok) {
			x.op.client_gone = true;
			break;
		}
		if (done) {
			buf_free(&x.out[0]);
			buf_free(&x.out[1]);
			buf_free(&x.frame);
			return;
		}
	}
	if (x.op.client_gone) {
		/* nobody reads any more: the command must not run on unseen */
		log_info("client went away; killing the command");
		kill_op(&x);
	} else if (n == 0) {
		sbx_err_set(&err, 504, "node_timeout", "The sandbox's node did not finish the command in time");
		kill_op(&x);
		if (x.mode == OUT_JSON)
			api_send_error(r, &err);
		else
			emit(&x, json_pack("{s:s, s:s}", "type", "error", "message", err.msg));
	} else {
		if (x.mode == OUT_JSON)
			api_send_error(r, &err);
		else
			emit(&x, json_pack("{s:s, s:s}", "type", "error", "message", err.msg));
	}
	buf_free(&x.out[0]);
	buf_free(&x.out[1]);
	buf_free(&x.frame);
	if (!r->answered)
		r->answered = true; /* the client is gone: nothing more to say */
}

static void run_exec(struct api_req *r, struct rt_sandbox *sb, struct exec_params *p)
{
	struct rt_op op;
	sbx_err err = SBX_ERR_INIT;
	json_t *body;

	body = json_pack("{s:O, s:O, s:s, s:I, s:I, s:b, s:b}", "argv", p->argv, "env", p->env, "cwd", p->cwd,
			 "timeout_ms", (json_int_t)(p->timeout_s * 1000), "credit", (json_int_t)WINDOW,
			 /* a background process keeps its stdin for POST .../stdin */
			 "stdin_open", p->background, "background", p->background);
	if (p->stdin_b64)
		json_object_set_new(body, "stdin_b64", json_string(p->stdin_b64));
	if (p->cols)
		json_object_set_new(body, "pty", json_pack("{s:I, s:I}", "cols", (json_int_t)p->cols, "rows",
							   (json_int_t)p->rows));
	if (rt_start(&op, r, sb, SBX_MSG_EXEC, body, &err) < 0) {
		json_decref(body);
		api_send_error(r, &err);
		return;
	}
	json_decref(body);
	/* the node enforces the timeout; we wait a little longer for its answer */
	rt_relay_output(r, &op, p->stream, p->background, sbx_now_ms() + p->timeout_s * 1000 + 15000);
	/* oneShot: its main process (a command run in the foreground) has
	 * ended, so the sandbox goes (the reaper does the destroy); any other
	 * sandbox is left alone without a round trip to Postgres */
	if (sb->one_shot && !p->background && sbx_sandbox_one_shot_stopped(&r->ctx->db, sb->id, &err) < 0)
		log_warnx("sandbox %s: one-shot stop: %s", sb->id, err.msg);
}

/* What the command's environment adds to the sandbox's base: the
 * sandbox's env, then this call's. The base (PATH, HOME, LANG, the
 * template image's Env) is sbx-init's own, from the bundle (oci.c): a
 * default sent from here would hide the image's. */
static json_t *merged_env(struct rt_sandbox *sb, json_t *call_env)
{
	json_t *e = json_object();

	json_object_update(e, sb->env);
	if (call_env)
		json_object_update(e, call_env);
	return e;
}

static int common_params(struct api_req *r, json_t *body, struct exec_params *p, sbx_err *err)
{
	const char *k;
	json_t *v, *env = json_object_get(body, "env");

	p->timeout_s = sbx_json_int(body, "timeout_seconds", sbx_cfg_int(r->ctx->cfg, "exec_timeout"));
	if (p->timeout_s > sbx_cfg_int(r->ctx->cfg, "exec_timeout_max"))
		return sbx_err_set(err, 400, "invalid_field", "timeout_seconds must be between 1 and %lld",
				   sbx_cfg_int(r->ctx->cfg, "exec_timeout_max"));
	p->cwd = sbx_json_str(body, "cwd", "/");
	if (p->cwd[0] != '/')
		return sbx_err_set(err, 400, "invalid_field", "cwd must be an absolute path");
	json_object_foreach(env, k, v) {
		if (!(k[0] == '_' || (k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z')) ||
		    strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != strlen(k))
			return sbx_err_set(err, 400, "invalid_field", "env names must match [A-Za-z_][A-Za-z0-9_]*");
	}
	p->stream = sbx_json_bool(body, "stream", false);
	return 0;
}

/* Runs `script` with /bin/sh -c in the caller's sandbox once it is ready,
 * with the merged environment; answers the request either way. */
static void run_shell(struct api_req *r, struct exec_params *p, const char *script, json_t *call_env)
{
	cleanup_json json_t *argv = NULL, *env = NULL;
	struct rt_sandbox sb;
	sbx_err err = SBX_ERR_INIT;

	memset(&sb, 0, sizeof(sb));
	if (rt_sandbox_ready(r, &sb, &err) < 0) {
		rt_sandbox_free(&sb);
		api_send_error(r, &err);
		return;
	}
	argv = json_pack("[s, s, s]", "/bin/sh", "-c", script);
	env = merged_env(&sb, call_env);
	/* a terminal's programs need to know what it is; the caller may say */
	if (p->cols && !json_object_get(env, "TERM"))
		json_object_set_new(env, "TERM", json_string("xterm-256color"));
	p->argv = argv;
	p->env = env;
	run_exec(r, &sb, p);
	rt_sandbox_free(&sb);
}

void h_exec(struct api_req *r)
{
	cleanup_json json_t *body = NULL;
	cleanup_free char *stdin_b64 = NULL;
	struct exec_params p = { 0 };
	sbx_err err = SBX_ERR_INIT;
	const char *cmd, *sin, *senc;

	if (api_json_body(r, &body, &err) < 0 || api_body_check(body, &api_exec_body, &err) < 0 ||
	    common_params(r, body, &p, &err) < 0)
		goto fail;
	cmd = sbx_json_str(body, "cmd", sbx_json_str(body, "command", NULL));
	if (!cmd) {
		sbx_err_set(&err, 400, "invalid_field", "cmd is required");
		goto fail;
	}
	sin = sbx_json_str(body, "stdin", NULL);
	senc = sbx_json_str(body, "stdin_encoding", "utf8");
	if (strcmp(senc, "utf8") && strcmp(senc, "utf-8") && strcmp(senc, "base64")) {
		sbx_err_set(&err, 400, "invalid_field", "stdin_encoding must be utf8 or base64");
		goto fail;
	}
	if (sin) {
		size_t sl = strlen(sin);
		if (!strcmp(senc, "base64")) {
			/* check it now: a bad one is the client's error, not the node's */
			size_t bl;
			unsigned char *tmp = malloc(sl + 1);
			if (!tmp || sodium_base642bin(tmp, sl + 1, sin, sl, " \r\n", &bl, NULL,
						      sodium_base64_VARIANT_ORIGINAL) != 0) {
				free(tmp);
				sbx_err_set(&err, 400, "invalid_field", "stdin is not valid base64");
				goto fail;
			}
			free(tmp);
			if (bl > 1048576) {
				sbx_err_set(&err, 413, "body_too_large", "stdin is limited to 1 MiB");
				goto fail;
			}
			stdin_b64 = strdup(sin);
		} else {
			if (sl > 1048576) {
				sbx_err_set(&err, 413, "body_too_large", "stdin is limited to 1 MiB");
				goto fail;
			}
			stdin_b64 = rt_base64(sin, sl);
		}
	}
	p.background = sbx_json_bool(body, "background", false);
	/* a background process runs until it exits or is signalled (a shell
	 * someone works in for an hour); a timeout only when asked for */
	if (p.background && !json_object_get(body, "timeout_seconds"))
		p.timeout_s = 0;
	p.stdin_b64 = stdin_b64;
	if (json_object_get(body, "pty") && !json_is_null(json_object_get(body, "pty"))) {
		json_t *pty = json_object_get(body, "pty");
		if (api_body_check(pty, &api_exec_pty, &err) < 0)
			goto fail;
		p.cols = sbx_json_int(pty, "cols", 80);
		p.rows = sbx_json_int(pty, "rows", 24);
	}
	run_shell(r, &p, cmd, json_object_get(body, "env"));
	return;
fail:
	api_send_error(r, &err);
}

void h_code(struct api_req *r)
{
	cleanup_json json_t *body = NULL;
	cleanup_free char *code_b64 = NULL;
	struct exec_params p = { 0 };
	sbx_err err = SBX_ERR_INIT;
	const char *lang, *code, *interp;
	char script[256];

	if (api_json_body(r, &body, &err) < 0 || api_body_check(body, &api_code_body, &err) < 0 ||
	    common_params(r, body, &p, &err) < 0)
		goto fail;
	lang = sbx_json_str(body, "language", "");
	code = sbx_json_str(body, "code", "");
	if (!strcmp(lang, "python"))
		interp = "python3";
	else if (!strcmp(lang, "node") || !strcmp(lang, "javascript"))
		interp = "node";
	else {
		sbx_err_set(&err, 400, "invalid_field", "language must be python or node");
		goto fail;
	}
	code_b64 = rt_base64(code, strlen(code));
	if (!code_b64) {
		sbx_err_set(&err, 500, "nomem", "out of memory");
		goto fail;
	}
	/* the code arrives on stdin and is written to a temporary file first */
	snprintf(script, sizeof(script),
		 "f=$(mktemp /tmp/sbx-code-XXXXXX) || exit 125; trap 'rm -f \"$f\"' EXIT; cat > \"$f\" && %s \"$f\"",
		 interp);
	p.stdin_b64 = code_b64;
	run_shell(r, &p, script, json_object_get(body, "env"));
	return;
fail:
	api_send_error(r, &err);
}
