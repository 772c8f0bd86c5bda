/* Background processes (extension): list, state, output (replayed from the
 * start, then followed; any number of readers), stdin and signals. sbx-init
 * keeps them and their output inside the sandbox, so all of this works after
 * a node agent restart too. */
#include "config.h"
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cleanup.h"
#include "clock.h"
#include "json.h"
#include "page.h"
#include "runtime.h"
#include "frame.h"

#define PROC_OP_MS 30000
#define FOLLOW_MAX_MS (24LL * 3600 * 1000)

static int no_such_process(struct api_req *r, sbx_err *err)
{
	return sbx_err_set(err, 404, "not_found", "No background process %ld", r->m.pid);
}

/* One op on the caller's sandbox: the readiness check, the request, the
 * node's reply. `body` is consumed. For an op on one process, the node's
 * not_found means that process: a 404 naming its pid. */
static int proc_call(struct api_req *r, enum sbx_msg_kind kind, json_t *body, json_t **reply, sbx_err *err)
{
	struct rt_sandbox sb;
	int rc;

	memset(&sb, 0, sizeof(sb));
	rc = rt_sandbox_ready(r, &sb, err);
	if (rc == 0) {
		rc = rt_call(r, &sb, kind, body, PROC_OP_MS, reply, err);
		if (rc < 0 && kind != SBX_MSG_PROC_LIST && !strcmp(err->code, "not_found"))
			no_such_process(r, err);
	}
	json_decref(body);
	rt_sandbox_free(&sb);
	return rc;
}

static int list_procs(struct api_req *r, json_t **procs, sbx_err *err)
{
	cleanup_json json_t *reply = NULL;

	if (proc_call(r, SBX_MSG_PROC_LIST, json_object(), &reply, err) < 0)
		return -1;
	*procs = json_incref(json_object_get(reply, "processes"));
	if (!json_is_array(*procs)) {
		json_decref(*procs);
		*procs = NULL;
		return sbx_err_set(err, 502, "bad_event", "The node sent a malformed process list");
	}
	return 0;
}

void h_processes(struct api_req *r)
{
	sbx_err err = SBX_ERR_INIT;
	json_t *procs = NULL;

	if (list_procs(r, &procs, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 200, "Processes retrieved", procs);
}

void h_process(struct api_req *r)
{
	sbx_err err = SBX_ERR_INIT;
	cleanup_json json_t *procs = NULL;
	json_t *p;
	size_t i;

	if (list_procs(r, &procs, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	json_array_foreach(procs, i, p) {
		if (json_integer_value(json_object_get(p, "pid")) == r->m.pid) {
			api_send_data(r, 200, "Process retrieved", json_incref(p));
			return;
		}
	}
	no_such_process(r, &err);
	api_send_error(r, &err);
}

void h_process_output(struct api_req *r)
{
	struct rt_sandbox sb;
	struct rt_op op;
	sbx_err err = SBX_ERR_INIT;
	char v[24];
	long long offset = 0;
	bool follow = false;
	json_t *b;
	int q;

	memset(&sb, 0, sizeof(sb));
	if (sbx_query_get(r->m.query, "follow", v, sizeof(v), &err) == 1)
		follow = strcmp(v, "0") && strcmp(v, "false");
	q = sbx_query_get(r->m.query, "offset", v, sizeof(v), &err);
	if (q < 0 || (q == 1 && (strspn(v, "0123456789") != strlen(v) || !v[0] || strlen(v) > 15))) {
		sbx_err_set(&err, 400, "invalid_query", "offset must be a whole number of bytes");
		api_send_error(r, &err);
		return;
	}
	if (q == 1)
		offset = atoll(v);
	if (rt_sandbox_ready(r, &sb, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	b = json_pack("{s:I, s:I, s:b, s:I}", "pid", (json_int_t)r->m.pid, "offset", (json_int_t)offset, "follow",
		      follow, "credit", (json_int_t)(256 * 1024));
	if (rt_start(&op, r, &sb, SBX_MSG_PROC_ATTACH, b, &err) < 0) {
		json_decref(b);
		rt_sandbox_free(&sb);
		api_send_error(r, &err);
		return;
	}
	json_decref(b);
	/* always a stream (SSE, or NDJSON by Accept): it may last as long as the process */
	rt_relay_output(r, &op, true, false, sbx_now_ms() + (follow ? FOLLOW_MAX_MS : PROC_OP_MS));
	rt_sandbox_free(&sb);
}

void h_process_stdin(struct api_req *r)
{
	sbx_err err = SBX_ERR_INIT;
	cleanup_free char *data = NULL, *b64 = NULL;
	cleanup_json json_t *reply = NULL;
	size_t len;
	char v[8];
	bool close_it = false;
	json_t *b;

	if (sbx_query_get(r->m.query, "close", v, sizeof(v), &err) == 1)
		close_it = strcmp(v, "0") && strcmp(v, "false");
	if (api_read_body(r, 1024 * 1024, &data, &len, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	b64 = rt_base64(data, len);
	b = json_pack("{s:I, s:s, s:b}", "pid", (json_int_t)r->m.pid, "data_b64", b64 ? b64 : "", "close", close_it);
	if (proc_call(r, SBX_MSG_PROC_STDIN, b, &reply, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	api_send_json(r, 204, NULL);
}

static int signal_number(json_t *v)
{
	static const struct { const char *name; int sig; } names[] = {
		{ "SIGTERM", SIGTERM }, { "SIGKILL", SIGKILL }, { "SIGINT", SIGINT }, { "SIGHUP", SIGHUP },
		{ "SIGQUIT", SIGQUIT }, { "SIGUSR1", SIGUSR1 }, { "SIGUSR2", SIGUSR2 }, { "SIGSTOP", SIGSTOP },
		{ "SIGCONT", SIGCONT },
	};

	if (json_is_integer(v)) {
		json_int_t n = json_integer_value(v);
		return n >= 1 && n <= 64 ? (int)n : -1;
	}
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		for (size_t i = 0; i < SBX_ARRAY_LEN(names); i++)
			if (!strcmp(s, names[i].name) || !strcmp(s, names[i].name + 3))
				return names[i].sig;
	}
	return -1;
}

/* A background process on a pseudo-terminal gets a new terminal size (its
 * foreground process group gets SIGWINCH). */
void h_process_resize(struct api_req *r)
{
	static const struct sbx_jfield spec[] = {
		{ "cols", SBX_J_INT, true, 1, SBX_PTY_MAX },
		{ "rows", SBX_J_INT, true, 1, SBX_PTY_MAX },
	};
	sbx_err err = SBX_ERR_INIT;
	cleanup_json json_t *body = NULL, *reply = NULL;
	json_int_t cols, rows;
	json_t *b;

	if (api_json_body(r, &body, &err) < 0 || sbx_json_check(body, spec, 2, NULL, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	cols = json_integer_value(json_object_get(body, "cols"));
	rows = json_integer_value(json_object_get(body, "rows"));
	b = json_pack("{s:I, s:I, s:I}", "pid", (json_int_t)r->m.pid, "cols", cols, "rows", rows);
	if (proc_call(r, SBX_MSG_PROC_RESIZE, b, &reply, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 200, "Terminal resized",
		      json_pack("{s:I, s:I, s:I}", "pid", (json_int_t)r->m.pid, "cols", cols, "rows", rows));
}

void h_process_signal(struct api_req *r)
{
	static const struct sbx_jfield spec[] = { { "signal", SBX_J_ANY, true, 0, 0 } };
	sbx_err err = SBX_ERR_INIT;
	cleanup_json json_t *body = NULL, *reply = NULL;
	json_t *b;
	int sig;

	if (api_json_body(r, &body, &err) < 0 || sbx_json_check(body, spec, 1, NULL, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	sig = signal_number(json_object_get(body, "signal"));
	if (sig < 0) {
		sbx_err_set(&err, 400, "invalid_field", "signal must be a number 1..64 or a name like SIGTERM");
		api_send_error(r, &err);
		return;
	}
	b = json_pack("{s:I, s:i}", "pid", (json_int_t)r->m.pid, "signal", sig);
	if (proc_call(r, SBX_MSG_PROC_SIGNAL, b, &reply, &err) < 0) {
		api_send_error(r, &err);
		return;
	}
	api_send_data(r, 200, "Signal sent", json_pack("{s:I, s:i}", "pid", (json_int_t)r->m.pid, "signal", sig));
}
