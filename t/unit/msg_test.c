/* Proves: every message kind has one distinct wire name that maps back to
 * it, unknown names are SBX_MSG_UNKNOWN, the names and flags are the ones
 * doc/internal-protocol.md documents (the relay's op starts and follow-ups,
 * the raw-bodied kinds), routing keys go to a node's queue or the
 * provisioners' and refuse a kind the target does not take, and control
 * replies {ok, error, code} are built and read strictly (unknown keys,
 * wrong types and missing ok are malformed). */
#include "config.h"
#include <string.h>
#include "msg.h"
#include "reply.h"
#include "../tap.h"

static int has(enum sbx_msg_kind k, unsigned f)
{
	return (sbx_msg_flags(k) & f) == f;
}

int main(void)
{
	static const char *const ops[] = { "exec", "file.write", "file.read", "file.list", "file.delete",
					   "file.mkdir", "proc.list", "proc.attach", "proc.stdin", "proc.signal" };
	static const char *const followups[] = { "credit", "stdin", "signal", "file.data", "file.end", "file.abort" };
	static const char *const events[] = { "started", "stdout", "stderr", "stdin.credit", "file.credit",
					      "file.stat", "file.data", "exit", "error", "done" };
	static const char *const extra[] = { "node_id", NULL };
	sbx_err err = SBX_ERR_INIT;
	struct sbx_reply rep;
	char q[64];
	int dup = 0, back = 1, named = 1;

	for (int k = 1; k < SBX_MSG_NKINDS; k++) {
		const char *n = sbx_msg_name((enum sbx_msg_kind)k);
		named &= n[0] != 0;
		back &= sbx_msg_kind(n) == (enum sbx_msg_kind)k;
		for (int j = k + 1; j < SBX_MSG_NKINDS; j++)
			dup += !strcmp(n, sbx_msg_name((enum sbx_msg_kind)j));
	}
	ok(named, "every kind has a wire name");
	ok(back, "every name maps back to its kind");
	is_int(dup, 0, "no two kinds share a name");
	is_int(sbx_msg_kind("nope"), SBX_MSG_UNKNOWN, "an unknown name is SBX_MSG_UNKNOWN");
	is_int(sbx_msg_kind(""), SBX_MSG_UNKNOWN, "an empty name is SBX_MSG_UNKNOWN");
	is_int(sbx_msg_kind(NULL), SBX_MSG_UNKNOWN, "NULL is SBX_MSG_UNKNOWN");
	is_int(sbx_msg_kind("EXEC"), SBX_MSG_UNKNOWN, "names are case-sensitive");
	is_str(sbx_msg_name(SBX_MSG_UNKNOWN), "", "SBX_MSG_UNKNOWN has no name");
	is_str(sbx_msg_name(SBX_MSG_NKINDS), "", "an out-of-range kind has no name");
	is_int(sbx_msg_flags(SBX_MSG_NKINDS), 0, "an out-of-range kind has no flags");

	is_str(sbx_msg_name(SBX_MSG_PROVISION), "provision", "provision");
	is_str(sbx_msg_name(SBX_MSG_STDIN_CREDIT), "stdin.credit", "stdin.credit");
	ok(has(SBX_MSG_PING, SBX_MSGF_PROVISIONER | SBX_MSGF_NODE), "ping goes to provisioners and nodes");
	ok(has(SBX_MSG_DESTROY, SBX_MSGF_PROVISIONER | SBX_MSGF_NODE), "destroy goes to provisioners and nodes");
	ok(has(SBX_MSG_PROVISION, SBX_MSGF_PROVISIONER) && !has(SBX_MSG_PROVISION, SBX_MSGF_NODE),
	   "provision goes to provisioners only");
	ok(has(SBX_MSG_START, SBX_MSGF_NODE) && !has(SBX_MSG_START, SBX_MSGF_PROVISIONER), "start goes to nodes only");
	ok(has(SBX_MSG_PONG, SBX_MSGF_REPLY) && has(SBX_MSG_PROVISIONED, SBX_MSGF_REPLY) &&
	   has(SBX_MSG_DESTROYED, SBX_MSGF_REPLY), "pong, provisioned, destroyed are replies");
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		ok(has(sbx_msg_kind(ops[i]), SBX_MSGF_NODE | SBX_MSGF_OP_START) &&
		   !has(sbx_msg_kind(ops[i]), SBX_MSGF_OP_FOLLOWUP), "%s starts an op on a node", ops[i]);
	for (size_t i = 0; i < sizeof(followups) / sizeof(followups[0]); i++)
		ok(has(sbx_msg_kind(followups[i]), SBX_MSGF_NODE | SBX_MSGF_OP_FOLLOWUP) &&
		   !has(sbx_msg_kind(followups[i]), SBX_MSGF_OP_START), "%s follows up an op", followups[i]);
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++)
		ok(has(sbx_msg_kind(events[i]), SBX_MSGF_EVENT), "%s is an op's event", events[i]);
	ok(has(SBX_MSG_STDOUT, SBX_MSGF_RAW) && has(SBX_MSG_STDERR, SBX_MSGF_RAW) && has(SBX_MSG_FILE_DATA, SBX_MSGF_RAW),
	   "stdout, stderr and file.data have raw bodies");
	ok(!has(SBX_MSG_EXIT, SBX_MSGF_RAW) && !has(SBX_MSG_EXEC, SBX_MSGF_RAW), "exit and exec are JSON");

	is_int(sbx_msg_node_queue("host1", q, sizeof(q), &err), 0, "a node queue name");
	is_str(q, "sbx.node.host1", "is sbx.node.<node id>");
	is_int(sbx_msg_node_queue("", q, sizeof(q), &err), -1, "an empty node id is refused");
	is_int(sbx_msg_node_queue("a-very-long-node-name-that-does-not-fit-in-the-buffer-at-all", q, sizeof(q), &err),
	       -1, "a queue name that does not fit is refused, not cut");
	is_int(sbx_msg_route(SBX_MSG_EXEC, "n1", q, sizeof(q), &err), 0, "exec routes to a node");
	is_str(q, "sbx.node.n1", "to that node's queue");
	is_int(sbx_msg_route(SBX_MSG_PROVISION, NULL, q, sizeof(q), &err), 0, "provision routes to the provisioners");
	is_str(q, SBX_MSG_Q_PROVISION, "to sbx.provision");
	is_str(q, "sbx.provision", "which is named sbx.provision");
	is_int(sbx_msg_route(SBX_MSG_DESTROY, "n1", q, sizeof(q), &err), 0, "destroy may go to a node");
	is_int(sbx_msg_route(SBX_MSG_PROVISION, "n1", q, sizeof(q), &err), -1, "provision to a node is refused");
	is_int(err.http, 500, "as an internal error");
	is_int(sbx_msg_route(SBX_MSG_EXEC, NULL, q, sizeof(q), &err), -1, "exec to the provisioners is refused");
	is_int(sbx_msg_route(SBX_MSG_DONE, "n1", q, sizeof(q), &err), -1, "an event is never routed to a queue");
	is_int(sbx_msg_route(SBX_MSG_UNKNOWN, NULL, q, sizeof(q), &err), -1, "an unknown kind is never routed");

#define PARSE(s, x) sbx_reply_parse(&rep, s, strlen(s), x, &err)
	is_int(PARSE("{\"ok\":true}", NULL), 0, "{ok:true} parses");
	ok(rep.ok && !rep.error && !rep.code, "ok, no error, no code");
	sbx_reply_free(&rep);
	is_int(PARSE("{\"ok\":false,\"error\":\"full\",\"code\":\"no_capacity\"}", NULL), 0, "a failure parses");
	ok(!rep.ok && !strcmp(rep.error, "full") && !strcmp(rep.code, "no_capacity"), "with its error and code");
	sbx_reply_free(&rep);
	is_int(PARSE("{\"ok\":true,\"node_id\":\"n1\"}", extra), 0, "a named extra field parses");
	is_str(sbx_reply_str(&rep, "node_id"), "n1", "and is read back");
	ok(sbx_reply_str(&rep, "container_id") == NULL, "an absent extra is NULL");
	sbx_reply_free(&rep);
	is_int(PARSE("{\"ok\":true,\"node_id\":\"n1\"}", NULL), -1, "an extra field not named is refused");
	is_str(err.code, "bad_reply", "as bad_reply");
	is_int(err.http, 502, "502");
	ok(rep.json == NULL, "a refused reply holds nothing");
	is_int(PARSE("{\"ok\":true,\"node_id\":5}", extra), -1, "an extra that is not a string is refused");
	is_int(PARSE("{\"ok\":1}", NULL), -1, "ok that is not a boolean is refused");
	is_int(PARSE("{\"error\":\"x\"}", NULL), -1, "a reply without ok is refused");
	is_int(PARSE("{\"ok\":false,\"error\":null}", NULL), -1, "error that is not a string is refused");
	is_int(PARSE("[true]", NULL), -1, "a reply that is not an object is refused");
	is_int(PARSE("{\"ok\":true,\"ok\":false}", NULL), -1, "duplicate keys are refused");
	is_int(PARSE("{\"ok\":tru", NULL), -1, "broken JSON is refused");
	sbx_reply_free(&rep);

	{
		json_t *j = sbx_reply_fail("no_capacity", "full");
		is_int(sbx_reply_unpack(&rep, j, NULL, &err), 0, "a built failure reads back");
		ok(!rep.ok && !strcmp(rep.error, "full") && !strcmp(rep.code, "no_capacity"), "with its error and code");
		sbx_reply_free(&rep);
		json_decref(j);
		j = sbx_reply_fail(NULL, "x");
		ok(json_object_get(j, "code") == NULL, "a failure without a code has no code key");
		json_decref(j);
		j = sbx_reply_ok();
		is_int(sbx_reply_unpack(&rep, j, NULL, &err), 0, "a built ok reads back");
		ok(rep.ok, "as ok");
		sbx_reply_free(&rep);
		json_decref(j);
	}
	return done_testing();
}
