#include "config.h"
#include <stdio.h>
#include <string.h>
#include "cleanup.h"
#include "msg.h"

#define P SBX_MSGF_PROVISIONER
#define N SBX_MSGF_NODE
#define OP SBX_MSGF_OP_START
#define FU SBX_MSGF_OP_FOLLOWUP
#define EV SBX_MSGF_EVENT
#define RE SBX_MSGF_REPLY
#define RAW SBX_MSGF_RAW

static const struct {
	const char *name;
	unsigned flags;
} kinds[SBX_MSG_NKINDS] = {
	[SBX_MSG_UNKNOWN] = { "", 0 },
	[SBX_MSG_PING] = { "ping", P | N },
	[SBX_MSG_PROVISION] = { "provision", P },
	[SBX_MSG_DESTROY] = { "destroy", P | N }, /* API -> provisioner -> node */
	[SBX_MSG_START] = { "start", N },
	[SBX_MSG_VOLUME_CREATE] = { "volume.create", N }, /* API -> the volume's node */
	[SBX_MSG_VOLUME_DELETE] = { "volume.delete", N },
	[SBX_MSG_PAUSE] = { "pause", N },   /* API -> the sandbox's node; answered when taken on */
	[SBX_MSG_RESUME] = { "resume", N },
	[SBX_MSG_EGRESS] = { "egress", N },
	[SBX_MSG_STATS] = { "stats", N }, /* answered at once from the node's samples */
	[SBX_MSG_SNAPSHOT] = { "snapshot", N },
	[SBX_MSG_PONG] = { "pong", RE },
	[SBX_MSG_PROVISIONED] = { "provisioned", RE },
	[SBX_MSG_DESTROYED] = { "destroyed", RE },
	[SBX_MSG_EXEC] = { "exec", N | OP },
	[SBX_MSG_FILE_WRITE] = { "file.write", N | OP },
	[SBX_MSG_FILE_READ] = { "file.read", N | OP },
	[SBX_MSG_FILE_LIST] = { "file.list", N | OP },
	[SBX_MSG_FILE_DELETE] = { "file.delete", N | OP },
	[SBX_MSG_FILE_MKDIR] = { "file.mkdir", N | OP },
	[SBX_MSG_PROC_LIST] = { "proc.list", N | OP },
	[SBX_MSG_PROC_ATTACH] = { "proc.attach", N | OP },
	[SBX_MSG_PROC_STDIN] = { "proc.stdin", N | OP },
	[SBX_MSG_PROC_SIGNAL] = { "proc.signal", N | OP },
	[SBX_MSG_PROC_RESIZE] = { "proc.resize", N | OP },
	[SBX_MSG_CREDIT] = { "credit", N | FU },
	[SBX_MSG_STDIN] = { "stdin", N | FU },
	[SBX_MSG_SIGNAL] = { "signal", N | FU },
	[SBX_MSG_FILE_DATA] = { "file.data", N | FU | EV | RAW },
	[SBX_MSG_FILE_END] = { "file.end", N | FU },
	/* the API gives an upload up: the op ends, sbx-init drops its temp file */
	[SBX_MSG_FILE_ABORT] = { "file.abort", N | FU },
	[SBX_MSG_STARTED] = { "started", EV },
	[SBX_MSG_STDOUT] = { "stdout", EV | RAW },
	[SBX_MSG_STDERR] = { "stderr", EV | RAW },
	[SBX_MSG_STDIN_CREDIT] = { "stdin.credit", EV },
	[SBX_MSG_FILE_CREDIT] = { "file.credit", EV },
	[SBX_MSG_FILE_STAT] = { "file.stat", EV },
	[SBX_MSG_EXIT] = { "exit", EV },
	[SBX_MSG_ERROR] = { "error", EV },
	[SBX_MSG_DONE] = { "done", EV },
	[SBX_MSG_NODE_STARTED] = { "node.started", SBX_MSGF_NODE_EVENT },
	[SBX_MSG_ADOPT] = { "adopt", N }, /* answered once sbx-init answered the node */
	[SBX_MSG_VOLUME_MOUNT] = { "volume.mount", N }, /* answered with the host path once mounted */
};

enum sbx_msg_kind sbx_msg_kind(const char *type)
{
	if (!type || !type[0])
		return SBX_MSG_UNKNOWN;
	for (int k = 1; k < SBX_MSG_NKINDS; k++)
		if (!strcmp(type, kinds[k].name))
			return (enum sbx_msg_kind)k;
	return SBX_MSG_UNKNOWN;
}

const char *sbx_msg_name(enum sbx_msg_kind k)
{
	return (int)k > 0 && k < SBX_MSG_NKINDS ? kinds[k].name : "";
}

unsigned sbx_msg_flags(enum sbx_msg_kind k)
{
	return (int)k > 0 && k < SBX_MSG_NKINDS ? kinds[k].flags : 0;
}

int sbx_msg_node_queue(const char *node_id, char *out, size_t outsz, sbx_err *err)
{
	int n;

	if (!node_id || !node_id[0])
		return sbx_err_set(err, 500, "internal", "no node id to route to");
	n = snprintf(out, outsz, "sbx.node.%s", node_id);
	if (n < 0 || (size_t)n >= outsz)
		return sbx_err_set(err, 500, "internal", "node id too long for a queue name");
	return 0;
}

int sbx_msg_route(enum sbx_msg_kind k, const char *node_id, char *out, size_t outsz, sbx_err *err)
{
	unsigned f = sbx_msg_flags(k);

	if (node_id) {
		if (!(f & SBX_MSGF_NODE))
			return sbx_err_set(err, 500, "internal", "a node agent takes no '%s' message", sbx_msg_name(k));
		return sbx_msg_node_queue(node_id, out, outsz, err);
	}
	if (!(f & SBX_MSGF_PROVISIONER))
		return sbx_err_set(err, 500, "internal", "a provisioner takes no '%s' message", sbx_msg_name(k));
	if (snprintf(out, outsz, "%s", SBX_MSG_Q_PROVISION) >= (int)outsz)
		return sbx_err_set(err, 500, "internal", "queue name buffer too small");
	return 0;
}
