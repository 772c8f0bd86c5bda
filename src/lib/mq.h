/* RabbitMQ through librabbitmq: one connection and channel per process,
 * reconnected on demand. Requests carry the request id in an
 * "x-request-id" header so worker log lines name the request. */
#ifndef SBX_MQ_H
#define SBX_MQ_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"

#define SBX_MQ_EXCHANGE "sbx" /* direct exchange for all work; queue names: msg.h */
/* fanout exchange of events every API child hears: a node agent that
 * (re)started says so (doc/internal-protocol.md, "Node events") */
#define SBX_MQ_EVENTS "sbx.events"

typedef struct sbx_mq sbx_mq;

typedef struct sbx_mq_msg {
	char *body; /* NUL-terminated copy of the body */
	size_t len;
	char type[64];
	char correlation_id[72];
	char reply_to[256];
	char request_id[72];
	char boot_id[40]; /* the sender's boot id (AMQP app_id), "" when it has none */
	uint64_t delivery_tag;
	int redelivered;
	int event; /* it came from SBX_MQ_EVENTS, not a queue of ours */
} sbx_mq_msg;

struct sbx_mq_pub {
	const char *type;
	const char *correlation_id;
	const char *reply_to;
	const char *request_id;
	const char *expiration_ms; /* per-message TTL, e.g. "30000" */
	int persistent;
};

int sbx_mq_open(sbx_mq **out, const char *url, sbx_err *err);
void sbx_mq_close(sbx_mq *mq);
/* Makes sure the connection is usable (reconnecting if it was lost). */
int sbx_mq_ensure(sbx_mq *mq, sbx_err *err);
/* Health check: one round trip to the broker. */
int sbx_mq_ping(sbx_mq *mq, sbx_err *err);
/* Declares the sbx exchange and a durable queue bound to it by its own name. */
int sbx_mq_declare_queue(sbx_mq *mq, const char *queue, sbx_err *err);
/* Messages waiting in a queue and its consumers (a passive declare: the
 * queue is not made; a missing one is an error and the connection is
 * dropped, to be made again by the next call). */
int sbx_mq_queue_depth(sbx_mq *mq, const char *queue, long *messages, long *consumers, sbx_err *err);
int sbx_mq_publish(sbx_mq *mq, const char *routing_key, const void *body, size_t len,
		   const struct sbx_mq_pub *p, sbx_err *err);
/* Starts consuming queue (manual acks, prefetch as given). */
int sbx_mq_consume(sbx_mq *mq, const char *queue, int prefetch, sbx_err *err);
/* Waits up to timeout_ms for a delivery: 1 got one, 0 timed out, -1 error. */
int sbx_mq_next(sbx_mq *mq, int timeout_ms, sbx_mq_msg *msg, sbx_err *err);
int sbx_mq_ack(sbx_mq *mq, uint64_t tag, sbx_err *err);
int sbx_mq_reject(sbx_mq *mq, uint64_t tag, int requeue, sbx_err *err);
void sbx_mq_msg_free(sbx_mq_msg *m);
/* Request/reply over direct reply-to with a deadline: 0 and *reply set, or
 * -1 with 504 "rpc_timeout" / 503 "mq_unavailable". */
int sbx_mq_rpc(sbx_mq *mq, const char *routing_key, const char *type, const void *body, size_t len,
	       int timeout_ms, sbx_mq_msg *reply, sbx_err *err);
/* Publishes a request whose answers (any number of them) come back to this
 * connection's direct reply-to with correlation_id = corr; read them with
 * sbx_mq_next() and match correlation_id. */
int sbx_mq_request(sbx_mq *mq, const char *routing_key, const char *type, const void *body, size_t len,
		   const char *corr, sbx_err *err);
/* Every message published on this connection from now on carries boot_id
 * (AMQP app_id): a node agent names its life with it, so an API child can
 * tell an op's events of an agent that has since restarted. */
void sbx_mq_set_boot_id(sbx_mq *mq, const char *boot_id);
/* Publishes one event to SBX_MQ_EVENTS (declared here). */
int sbx_mq_announce(sbx_mq *mq, const char *type, const void *body, size_t len, sbx_err *err);
/* Receives SBX_MQ_EVENTS on this connection too: a private queue (server
 * named, exclusive, auto-delete) consumed without acks on the same channel
 * as the replies; its messages have `event` set. Does nothing when already
 * subscribed; a reconnect needs it again. */
int sbx_mq_events(sbx_mq *mq, sbx_err *err);
/* Bytes librabbitmq has read but not handed out yet (poll() cannot see them). */
int sbx_mq_buffered(sbx_mq *mq);
/* The socket, for poll(): readable while idle means the broker spoke. */
int sbx_mq_fd(sbx_mq *mq);

#endif
