/* Internal messages: every AMQP message type the processes exchange is one
 * kind in one table (its name on the wire, where it may go, what its body
 * is), and the queues they are routed to are named here and only here.
 * doc/internal-protocol.md describes each kind's body. */
#ifndef SBX_MSG_H
#define SBX_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include "err.h"

enum sbx_msg_kind {
	SBX_MSG_UNKNOWN = 0,
	/* control: requests to a provisioner (sbx.provision) or a node agent */
	SBX_MSG_PING,
	SBX_MSG_PROVISION,
	SBX_MSG_DESTROY,
	SBX_MSG_START,
	SBX_MSG_VOLUME_CREATE,
	SBX_MSG_VOLUME_DELETE,
	SBX_MSG_PAUSE,
	SBX_MSG_RESUME,
	SBX_MSG_EGRESS, /* API -> node agent: a running sandbox's new egress policy */
	SBX_MSG_STATS,  /* API -> node agent: a sandbox's resource use */
	SBX_MSG_SNAPSHOT, /* API -> the sandbox's node: take a snapshot (answered when taken on) */
	/* control: a provisioner's replies ({ok, error?, code?, ...}) */
	SBX_MSG_PONG,
	SBX_MSG_PROVISIONED,
	SBX_MSG_DESTROYED,
	/* runtime: the first request of an op (API -> node agent) */
	SBX_MSG_EXEC,
	SBX_MSG_FILE_WRITE,
	SBX_MSG_FILE_READ,
	SBX_MSG_FILE_LIST,
	SBX_MSG_FILE_DELETE,
	SBX_MSG_FILE_MKDIR,
	SBX_MSG_PROC_LIST,
	SBX_MSG_PROC_ATTACH,
	SBX_MSG_PROC_STDIN,
	SBX_MSG_PROC_SIGNAL,
	SBX_MSG_PROC_RESIZE,
	/* runtime: follow-ups to a running op */
	SBX_MSG_CREDIT,
	SBX_MSG_STDIN,
	SBX_MSG_SIGNAL,
	SBX_MSG_FILE_DATA, /* also an event: the bytes of a file.read */
	SBX_MSG_FILE_END,
	SBX_MSG_FILE_ABORT,
	/* runtime: an op's events (node agent -> API) */
	SBX_MSG_STARTED,
	SBX_MSG_STDOUT,
	SBX_MSG_STDERR,
	SBX_MSG_STDIN_CREDIT,
	SBX_MSG_FILE_CREDIT,
	SBX_MSG_FILE_STAT,
	SBX_MSG_EXIT,
	SBX_MSG_ERROR,
	SBX_MSG_DONE,
	/* the fanout of node events (sbx.events) */
	SBX_MSG_NODE_STARTED,
	/* control: provisioner (Nomad driver) -> the allocation's node agent:
	 * take over a sandbox Nomad started (its sbx-init channel) */
	SBX_MSG_ADOPT,
	/* control: provisioner (Nomad driver) -> the volume's node agent: mount
	 * the volume on the host for the sandbox's task to bind (nomad_vol.h) */
	SBX_MSG_VOLUME_MOUNT,
	SBX_MSG_NKINDS
};

/* What a kind is (flags of sbx_msg_flags; a kind may have several). */
#define SBX_MSGF_PROVISIONER 0x01u /* a request a provisioner takes (sbx.provision) */
#define SBX_MSGF_NODE 0x02u        /* a request a node agent takes (sbx.node.<id>) */
#define SBX_MSGF_OP_START 0x04u    /* the first request of a runtime op */
#define SBX_MSGF_OP_FOLLOWUP 0x08u /* a follow-up of a running op (no reply_to) */
#define SBX_MSGF_EVENT 0x10u       /* an op's event, to the op's reply_to */
#define SBX_MSGF_REPLY 0x20u       /* a control reply */
#define SBX_MSGF_RAW 0x40u         /* the body is raw bytes, not JSON */
#define SBX_MSGF_NODE_EVENT 0x80u  /* a node event, to every API child (sbx.events) */

/* The kind named `type` on the wire; SBX_MSG_UNKNOWN for NULL or any other. */
enum sbx_msg_kind sbx_msg_kind(const char *type);
/* The wire name of a kind ("" for SBX_MSG_UNKNOWN or out of range). */
const char *sbx_msg_name(enum sbx_msg_kind k);
unsigned sbx_msg_flags(enum sbx_msg_kind k);

/* The provisioners' queue (sbx-api's pings go there too: an answer proves
 * a provisioner consumes it). */
#define SBX_MSG_Q_PROVISION "sbx.provision"
/* A node agent's own queue: "sbx.node.<node_id>". -1 (500) when it does
 * not fit or the node id is empty. */
int sbx_msg_node_queue(const char *node_id, char *out, size_t outsz, sbx_err *err);
/* The routing key of a request of kind k: the node's queue when node_id is
 * given (the kind must be one a node agent takes), else the provisioners'
 * (the kind must be one a provisioner takes). -1 (500) otherwise. */
int sbx_msg_route(enum sbx_msg_kind k, const char *node_id, char *out, size_t outsz, sbx_err *err);

#endif
