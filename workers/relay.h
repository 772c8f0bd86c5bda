/* The node agent's runtime relay: execs, files and background processes
 * of its sandboxes, between the API (AMQP, doc/internal-protocol.md hop 1)
 * and each sandbox's sbx-init (frames, hop 2). It lives inside the node
 * agent's one epoll loop: every socket is non-blocking, every buffer is
 * bounded, and one slow stream never holds up another (doc/node-relay.md). */
#ifndef SBX_WORKER_RELAY_H
#define SBX_WORKER_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "db.h"
#include "mq.h"
#include "msg.h"
#include "outbox.h"
#include "sandbox.h"

struct relay;

struct relay_hooks {
	void *ctx;
	/* Placement id serving sandbox sandbox_id: 1: ready on this node; 0:
	 * on this node but not ready (its state in why); -1: not on this node
	 * (or the placement serves another record). */
	int (*state)(void *ctx, const char *id, const char *sandbox_id, char *why, size_t whysz);
	/* The sentry of placement id died (seen through the channel): mark it
	 * failed and take it down. The relay has already ended its ops. */
	void (*dead)(void *ctx, const char *id, const char *why);
	/* Something is about to be sent to the sandbox's sbx-init for an op
	 * (idle.c thaws a frozen sandbox here). */
	void (*wake)(void *ctx, const char *id);
	/* sbx-init answered relay_ask_status: nprocs processes run besides it. */
	void (*status)(void *ctx, const char *id, uint32_t nprocs);
};

/* ob and db belong to the node agent. */
struct relay *relay_new(const struct sandbox_node_cfg *sc, int ep, sbx_outbox *ob, sbx_db *db,
			const struct relay_hooks *hooks);
void relay_free(struct relay *r);

/* Is this AMQP message type one of the relay's? */
bool relay_handles(enum sbx_msg_kind kind);
/* Handles one of them (the caller acks it). The body may be raw bytes
 * (file.data), so the relay parses it itself. */
void relay_on_message(struct relay *r, const sbx_mq_msg *m, enum sbx_msg_kind kind);

/* Is this epoll data.ptr one of the relay's channels? */
bool relay_owns(const struct relay *r, const void *ptr);
void relay_on_event(struct relay *r, void *ptr, uint32_t events);

/* The sandbox is going away (destroyed, or its sentry died): its ops end
 * with `error` code (sandbox_dead, not_ready) and its channel closes. */
void relay_sandbox_gone(struct relay *r, const char *id, const char *code, const char *why);

/* sbx-init has this long to answer an op (its first frame for it, or the
 * PONG of the PING that follows it; a file write's data too), else the op
 * ends with `error sandbox_unresponsive`. */
void relay_set_answer_ms(struct relay *r, int ms);
/* Ends the ops whose answer is late; settles channels. Returns the ms until
 * the next op would be late (-1: none waits). Call on every loop turn. */
long long relay_tick(struct relay *r);
/* Liveness of a sandbox's sbx-init, one call per pass: 1 when it answered
 * the previous call's PING (a new one is sent now), 0 when that PING is
 * still unanswered, -1 when there is no channel to ask through. */
int relay_ping(struct relay *r, const char *id);

/* For idle.c. Since when (mono ms) the sandbox's channel has had no op
 * and no question unanswered (0: it never had an op, or has no channel);
 * -1: an op or a question (PING, STATUS) is in flight. */
long long relay_quiet_since(struct relay *r, const char *id);
/* Asks sbx-init how many processes run besides it (SBX_F_STATUS; opens
 * the channel if needed); the answer comes through hooks.status. */
int relay_ask_status(struct relay *r, const char *id);

/* The execs rows go through l (the node agent's, execlog.h) rather than
 * the node's own connection: the loop does not wait for Postgres. */
struct execlog;
void relay_set_execlog(struct relay *r, struct execlog *l);

/* Ops in flight (a draining agent waits for none; they end on their own). */
int relay_ops(const struct relay *r);

#endif
