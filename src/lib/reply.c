#include "config.h"
#include <string.h>
#include "cleanup.h"
#include "json.h"
#include "reply.h"

static bool named(const char *key, const char *const *list)
{
	for (; list && *list; list++)
		if (!strcmp(key, *list))
			return true;
	return false;
}

int sbx_reply_unpack(struct sbx_reply *r, json_t *j, const char *const *extra, sbx_err *err)
{
	const char *key;
	json_t *v;

	memset(r, 0, sizeof(*r));
	if (!json_is_object(j))
		return sbx_err_set(err, 502, "bad_reply", "malformed reply: not an object");
	if (!json_is_boolean(json_object_get(j, "ok")))
		return sbx_err_set(err, 502, "bad_reply", "malformed reply: no boolean 'ok'");
	json_object_foreach(j, key, v) {
		if (!strcmp(key, "ok"))
			continue;
		if (strcmp(key, "error") && strcmp(key, "code") && !named(key, extra))
			return sbx_err_set(err, 502, "bad_reply", "malformed reply: unknown key '%.40s'", key);
		if (!json_is_string(v))
			return sbx_err_set(err, 502, "bad_reply", "malformed reply: '%.40s' is not a string", key);
	}
	r->json = json_incref(j);
	r->ok = json_is_true(json_object_get(j, "ok"));
	r->error = json_string_value(json_object_get(j, "error"));
	r->code = json_string_value(json_object_get(j, "code"));
	return 0;
}

int sbx_reply_parse(struct sbx_reply *r, const void *body, size_t len, const char *const *extra, sbx_err *err)
{
	cleanup_json json_t *j = NULL;
	json_error_t jerr;

	memset(r, 0, sizeof(*r));
	j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!j)
		return sbx_err_set(err, 502, "bad_reply", "malformed reply: %s", jerr.text);
	return sbx_reply_unpack(r, j, extra, err);
}

const char *sbx_reply_str(const struct sbx_reply *r, const char *key)
{
	return json_string_value(json_object_get(r->json, key));
}

void sbx_reply_free(struct sbx_reply *r)
{
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

json_t *sbx_reply_ok(void)
{
	return json_pack("{s:b}", "ok", 1);
}

json_t *sbx_reply_fail(const char *code, const char *error)
{
	json_t *j = json_pack("{s:b, s:s}", "ok", 0, "error", error ? error : "unknown error");

	if (j && code)
		json_object_set_new(j, "code", json_string(code));
	return j;
}

int sbx_msg_call(sbx_mq *mq, enum sbx_msg_kind k, const char *node_id, json_t *body, int timeout_ms,
		 const char *const *extra, struct sbx_reply *out, sbx_err *err)
{
	cleanup_free char *s = NULL;
	sbx_mq_msg reply = { 0 };
	char queue[300];
	int rc;

	memset(out, 0, sizeof(*out));
	if (sbx_msg_route(k, node_id, queue, sizeof(queue), err) < 0)
		return -1;
	s = json_dumps(body, JSON_COMPACT);
	if (!s)
		return sbx_err_set(err, 500, "nomem", "encoding a %s request", sbx_msg_name(k));
	if (sbx_mq_rpc(mq, queue, sbx_msg_name(k), s, strlen(s), timeout_ms, &reply, err) < 0)
		return -1;
	rc = sbx_reply_parse(out, reply.body, reply.len, extra, err);
	sbx_mq_msg_free(&reply);
	return rc;
}
