/* Control replies: every answer to a control request (provision, destroy,
 * start, ping) is one JSON object {ok, error?, code?, ...} with a few
 * documented string fields beside them. They are built and read here
 * only, strictly: an unknown key or a wrong type is a malformed reply. */
#ifndef SBX_REPLY_H
#define SBX_REPLY_H

#include <jansson.h>
#include <stdbool.h>
#include "err.h"
#include "mq.h"
#include "msg.h"

struct sbx_reply {
	json_t *json;      /* the whole reply (owned) */
	bool ok;
	const char *error; /* NULL when absent; points into json */
	const char *code;  /* NULL when absent */
};

/* Reads a reply object. `extra` (NULL-terminated, may be NULL) names the
 * other string fields this reply may carry. -1: 502 "bad_reply". */
int sbx_reply_unpack(struct sbx_reply *r, json_t *j /* borrowed */, const char *const *extra, sbx_err *err);
/* The same from a message body. */
int sbx_reply_parse(struct sbx_reply *r, const void *body, size_t len, const char *const *extra, sbx_err *err);
/* An extra field's value, NULL when absent. */
const char *sbx_reply_str(const struct sbx_reply *r, const char *key);
void sbx_reply_free(struct sbx_reply *r);
#define cleanup_reply __attribute__((cleanup(sbx_reply_free)))

json_t *sbx_reply_ok(void);
/* {ok:false, error, code?} (code NULL: none). */
json_t *sbx_reply_fail(const char *code, const char *error);

/* One control request and its reply: the body goes to sbx_msg_route(k,
 * node_id) over direct reply-to with a deadline. Errors: sbx_mq_rpc's
 * (504 rpc_timeout, 503 mq_unavailable...), or 502 "bad_reply". A reply
 * with ok false is not an error here: the caller reads out->error. */
int sbx_msg_call(sbx_mq *mq, enum sbx_msg_kind k, const char *node_id, json_t *body /* borrowed */,
		 int timeout_ms, const char *const *extra, struct sbx_reply *out, sbx_err *err);

#endif
