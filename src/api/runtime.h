/* Talking to a sandbox's node about one operation (an exec, a file, a
 * background process): the request goes to sbx.node.<node>, its events come
 * back on this child's direct reply-to, matched by op id. While waiting we
 * also watch our client's connection: a client that goes away ends the op. */
#ifndef SBX_API_RUNTIME_H
#define SBX_API_RUNTIME_H

#include "api.h"
#include "msg.h"

struct rt_sandbox {
	char id[SBX_ID_LEN + 1];
	char node_id[256];
	char placement_id[SBX_ID_LEN + 1]; /* what names it on its node */
	json_t *env; /* the sandbox's default environment */
	bool one_shot; /* it goes when its main process ends (fixed at create) */
};

/* Loads the caller's sandbox and checks it can run things: 404 when it is
 * not theirs, 400 naming the state when it is not ready, 503 with the
 * reason when it failed. Touches last_activity_at. */
int rt_sandbox_ready(struct api_req *r, struct rt_sandbox *sb, sbx_err *err);
void rt_sandbox_free(struct rt_sandbox *sb);

struct rt_op {
	struct api_req *r;
	struct rt_sandbox *sb;
	char op_id[SBX_ID_LEN + 1];
	char queue[300];
	bool client_gone;
	/* the node agent serving it: the boot id on its events ("" before the
	 * first), and when that node announced a restart before we heard of
	 * the op from it (mono ms, 0: not) */
	char boot[40];
	long long restart_seen;
};

/* Sends the op's first request; `body` gets sandbox_id, placement_id and op_id added. */
int rt_start(struct rt_op *op, struct api_req *r, struct rt_sandbox *sb, enum sbx_msg_kind kind, json_t *body,
	     sbx_err *err);
/* Another message for the same op (credit, stdin, signal, file.data...). */
int rt_send(struct rt_op *op, enum sbx_msg_kind kind, json_t *body /* borrowed */, sbx_err *err);
int rt_send_raw(struct rt_op *op, enum sbx_msg_kind kind, const void *data, size_t len, sbx_err *err);
/* Next event of this op: 1 (msg filled), 0 deadline passed, -1 error.
 * Stale events of earlier ops are dropped. Sets op->client_gone when the
 * client's connection closed (then returns 0 at once). When the op's node
 * agent restarted meanwhile (its "node.started" event), the op is lost:
 * -1 with 503 node_restarted. */
int rt_next(struct rt_op *op, long long deadline_ms, sbx_mq_msg *msg, sbx_err *err);
/* A one-shot op: request, then the single final event (done/error). The
 * reply is the `done` body; an `error` event becomes err with its status. */
int rt_call(struct api_req *r, struct rt_sandbox *sb, enum sbx_msg_kind kind, json_t *body, int timeout_ms,
	    json_t **reply, sbx_err *err);
/* Maps an `error` event's body to an sbx_err (status from its code, in
 * src/lib/errcode.c). */
void rt_error_event(const sbx_mq_msg *m, sbx_err *err);

/* Standard base64 of n bytes, malloc'd (NULL when out of memory). */
char *rt_base64(const void *d, size_t n);

/* h_exec.c: relays an exec-like op's output (exec, attach) to the client as
 * JSON (stream false), SSE or NDJSON (Accept) until its last event. */
void rt_relay_output(struct api_req *r, struct rt_op *op, bool stream, bool background, long long deadline);

#endif
