#include "config.h"
#include "clock.h"
#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include "id.h"
#include "log.h"
#include "mq.h"

#define CH 1
#define DIRECT_REPLY "amq.rabbitmq.reply-to"

struct sbx_mq {
	amqp_connection_state_t conn;
	char *url;
	int up;
	int reply_consuming;
	char consume_queue[128];
	int consume_prefetch;
	char boot_id[40];
	int events_consuming; /* SBX_MQ_EVENTS reaches us (this connection) */
	int events_declared;  /* we declared SBX_MQ_EVENTS (this connection) */
};

static int reply_ok(amqp_rpc_reply_t r, const char *what, sbx_err *err)
{
	switch (r.reply_type) {
	case AMQP_RESPONSE_NORMAL:
		return 0;
	case AMQP_RESPONSE_NONE:
		return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: %s: no reply", what);
	case AMQP_RESPONSE_LIBRARY_EXCEPTION:
		return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: %s: %s", what,
				   amqp_error_string2(r.library_error));
	case AMQP_RESPONSE_SERVER_EXCEPTION:
		if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
			amqp_connection_close_t *m = r.reply.decoded;
			return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: %s: connection closed: %.*s",
					   what, (int)m->reply_text.len, (char *)m->reply_text.bytes);
		}
		if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
			amqp_channel_close_t *m = r.reply.decoded;
			return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: %s: channel closed: %.*s",
					   what, (int)m->reply_text.len, (char *)m->reply_text.bytes);
		}
		return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: %s: server error", what);
	}
	return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: %s failed", what);
}

static void drop(sbx_mq *mq)
{
	if (mq->conn) {
		/* the peer may be gone: do not wait for a close-ok */
		amqp_destroy_connection(mq->conn);
	}
	mq->conn = NULL;
	mq->up = 0;
	mq->reply_consuming = 0;
	mq->events_consuming = 0;
	mq->events_declared = 0;
}

static int connect_now(sbx_mq *mq, sbx_err *err)
{
	struct amqp_connection_info ci;
	char *copy = strdup(mq->url);
	amqp_socket_t *sock;
	struct timeval tv = { 5, 0 };
	int rc;

	if (!copy)
		return sbx_err_sys(err, "nomem", "strdup");
	if (amqp_parse_url(copy, &ci) != AMQP_STATUS_OK) {
		free(copy);
		return sbx_err_set(err, 500, "bad_config", "amqp_url is not a valid amqp:// URL");
	}
	mq->conn = amqp_new_connection();
	sock = mq->conn ? amqp_tcp_socket_new(mq->conn) : NULL;
	if (!sock) {
		free(copy);
		drop(mq);
		return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: cannot create socket");
	}
	rc = amqp_socket_open_noblock(sock, ci.host, ci.port, &tv);
	if (rc != AMQP_STATUS_OK) {
		sbx_err_set(err, 503, "mq_unavailable", "rabbitmq unreachable at %s:%d: %s", ci.host, ci.port,
			    amqp_error_string2(rc));
		free(copy);
		drop(mq);
		return -1;
	}
	{
		/* no broker socket may leak into anything we exec */
		int fd = amqp_get_sockfd(mq->conn);
		if (fd >= 0)
			fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
	}
	if (reply_ok(amqp_login(mq->conn, ci.vhost, 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, ci.user,
				ci.password),
		     "login", err) < 0) {
		free(copy);
		drop(mq);
		return -1;
	}
	free(copy);
	amqp_channel_open(mq->conn, CH);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "channel.open", err) < 0) {
		drop(mq);
		return -1;
	}
	mq->up = 1;
	if (mq->consume_queue[0]) {
		/* resume consuming after a reconnect */
		char q[sizeof(mq->consume_queue)];
		memcpy(q, mq->consume_queue, sizeof(q));
		/* the broker may have lost the queue while we were away */
		if (sbx_mq_declare_queue(mq, q, err) < 0 || sbx_mq_consume(mq, q, mq->consume_prefetch, err) < 0) {
			drop(mq);
			return -1;
		}
	}
	return 0;
}

int sbx_mq_open(sbx_mq **out, const char *url, sbx_err *err)
{
	sbx_mq *mq = calloc(1, sizeof(*mq));

	if (!mq)
		return sbx_err_sys(err, "nomem", "calloc");
	mq->url = strdup(url);
	if (!mq->url) {
		free(mq);
		return sbx_err_sys(err, "nomem", "strdup");
	}
	*out = mq;
	/* a broker that is down now is not fatal: we connect on first use */
	return connect_now(mq, err);
}

void sbx_mq_close(sbx_mq *mq)
{
	if (!mq)
		return;
	if (mq->conn && mq->up) {
		amqp_channel_close(mq->conn, CH, AMQP_REPLY_SUCCESS);
		amqp_connection_close(mq->conn, AMQP_REPLY_SUCCESS);
	}
	drop(mq);
	free(mq->url);
	free(mq);
}

int sbx_mq_fd(sbx_mq *mq)
{
	return mq->conn && mq->up ? amqp_get_sockfd(mq->conn) : -1;
}

int sbx_mq_ensure(sbx_mq *mq, sbx_err *err)
{
	if (mq->up && mq->conn && mq->consume_queue[0])
		return 0; /* a consumer's socket is readable with deliveries: errors show in next() */
	if (mq->up && mq->conn) {
		/* Idle and readable means the broker closed us (or went away);
		 * stale replies of an abandoned RPC also land here: reconnecting
		 * discards them, which is what we want. */
		struct pollfd p = { .fd = amqp_get_sockfd(mq->conn), .events = POLLIN };
		if (p.fd >= 0 && poll(&p, 1, 0) == 0 && amqp_data_in_buffer(mq->conn) == 0 &&
		    amqp_frames_enqueued(mq->conn) == 0)
			return 0;
		log_warnx("rabbitmq connection is not idle; reconnecting");
		drop(mq);
	}
	drop(mq);
	if (connect_now(mq, err) < 0)
		return -1;
	log_info("connected to rabbitmq");
	return 0;
}

int sbx_mq_ping(sbx_mq *mq, sbx_err *err)
{
	if (sbx_mq_ensure(mq, err) < 0)
		return -1;
	amqp_exchange_declare(mq->conn, CH, amqp_cstring_bytes("amq.direct"), amqp_cstring_bytes("direct"), 1,
			      0, 0, 0, amqp_empty_table);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "ping", err) < 0) {
		drop(mq);
		return -1;
	}
	return 0;
}

int sbx_mq_declare_queue(sbx_mq *mq, const char *queue, sbx_err *err)
{
	if (sbx_mq_ensure(mq, err) < 0)
		return -1;
	amqp_exchange_declare(mq->conn, CH, amqp_cstring_bytes(SBX_MQ_EXCHANGE), amqp_cstring_bytes("direct"),
			      0, 1, 0, 0, amqp_empty_table);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "exchange.declare", err) < 0)
		goto fail;
	amqp_queue_declare(mq->conn, CH, amqp_cstring_bytes(queue), 0, 1, 0, 0, amqp_empty_table);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "queue.declare", err) < 0)
		goto fail;
	amqp_queue_bind(mq->conn, CH, amqp_cstring_bytes(queue), amqp_cstring_bytes(SBX_MQ_EXCHANGE),
			amqp_cstring_bytes(queue), amqp_empty_table);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "queue.bind", err) < 0)
		goto fail;
	return 0;
fail:
	drop(mq);
	return -1;
}

int sbx_mq_queue_depth(sbx_mq *mq, const char *queue, long *messages, long *consumers, sbx_err *err)
{
	amqp_queue_declare_ok_t *ok;

	if (sbx_mq_ensure(mq, err) < 0)
		return -1;
	/* passive: only asks; a queue that does not exist closes the channel */
	ok = amqp_queue_declare(mq->conn, CH, amqp_cstring_bytes(queue), 1, 0, 0, 0, amqp_empty_table);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "queue.declare (passive)", err) < 0 || !ok) {
		drop(mq);
		return -1;
	}
	*messages = (long)ok->message_count;
	*consumers = (long)ok->consumer_count;
	return 0;
}

/* A string property, present (flagged) only when given. */
static void opt_prop(amqp_basic_properties_t *props, amqp_flags_t flag, amqp_bytes_t *field, const char *v)
{
	if (!v)
		return;
	props->_flags |= flag;
	*field = amqp_cstring_bytes(v);
}

static int publish(sbx_mq *mq, amqp_bytes_t exchange, const char *routing_key, const void *body, size_t len,
		   const struct sbx_mq_pub *p, sbx_err *err)
{
	amqp_basic_properties_t props;
	amqp_table_entry_t hdr;
	amqp_bytes_t b = { len, (void *)body };
	int rc;

	/* mid-conversation the socket is readable with answers: only reconnect when down */
	if (!mq->up && sbx_mq_ensure(mq, err) < 0)
		return -1;
	memset(&props, 0, sizeof(props));
	props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG;
	props.content_type = amqp_cstring_bytes("application/json");
	props.delivery_mode = p && p->persistent ? 2 : 1;
	if (p) {
		opt_prop(&props, AMQP_BASIC_TYPE_FLAG, &props.type, p->type);
		opt_prop(&props, AMQP_BASIC_CORRELATION_ID_FLAG, &props.correlation_id, p->correlation_id);
		opt_prop(&props, AMQP_BASIC_REPLY_TO_FLAG, &props.reply_to, p->reply_to);
		opt_prop(&props, AMQP_BASIC_EXPIRATION_FLAG, &props.expiration, p->expiration_ms);
	}
	if (mq->boot_id[0])
		opt_prop(&props, AMQP_BASIC_APP_ID_FLAG, &props.app_id, mq->boot_id);
	{
		const char *rid = p && p->request_id ? p->request_id : sbx_log_request_id();
		if (rid && rid[0]) {
			hdr.key = amqp_cstring_bytes("x-request-id");
			hdr.value.kind = AMQP_FIELD_KIND_UTF8;
			hdr.value.value.bytes = amqp_cstring_bytes(rid);
			props._flags |= AMQP_BASIC_HEADERS_FLAG;
			props.headers.num_entries = 1;
			props.headers.entries = &hdr;
		}
	}
	rc = amqp_basic_publish(mq->conn, CH, exchange, amqp_cstring_bytes(routing_key), 0, 0, &props, b);
	if (rc != AMQP_STATUS_OK) {
		drop(mq);
		return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq publish: %s", amqp_error_string2(rc));
	}
	return 0;
}

int sbx_mq_publish(sbx_mq *mq, const char *routing_key, const void *body, size_t len,
		   const struct sbx_mq_pub *p, sbx_err *err)
{
	/* a routing key naming a reply queue goes to the default exchange */
	return publish(mq,
		       strncmp(routing_key, "amq.", 4) == 0 ? amqp_empty_bytes : amqp_cstring_bytes(SBX_MQ_EXCHANGE),
		       routing_key, body, len, p, err);
}

void sbx_mq_set_boot_id(sbx_mq *mq, const char *boot_id)
{
	snprintf(mq->boot_id, sizeof(mq->boot_id), "%s", boot_id ? boot_id : "");
}

static int declare_events(sbx_mq *mq, sbx_err *err)
{
	if (mq->events_declared)
		return 0;
	amqp_exchange_declare(mq->conn, CH, amqp_cstring_bytes(SBX_MQ_EVENTS), amqp_cstring_bytes("fanout"), 0,
			      1, 0, 0, amqp_empty_table);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "exchange.declare events", err) < 0) {
		drop(mq);
		return -1;
	}
	mq->events_declared = 1;
	return 0;
}

int sbx_mq_announce(sbx_mq *mq, const char *type, const void *body, size_t len, sbx_err *err)
{
	struct sbx_mq_pub p = { .type = type };

	if (sbx_mq_ensure(mq, err) < 0 || declare_events(mq, err) < 0)
		return -1;
	return publish(mq, amqp_cstring_bytes(SBX_MQ_EVENTS), "", body, len, &p, err);
}

int sbx_mq_events(sbx_mq *mq, sbx_err *err)
{
	amqp_queue_declare_ok_t *q;
	amqp_bytes_t name;

	if (mq->up && mq->events_consuming)
		return 0;
	if (sbx_mq_ensure(mq, err) < 0 || declare_events(mq, err) < 0)
		return -1;
	q = amqp_queue_declare(mq->conn, CH, amqp_empty_bytes, 0, 0, 1, 1, amqp_empty_table);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "queue.declare events", err) < 0 || !q)
		goto fail;
	/* the name lives in the connection's pool until the next release */
	name = amqp_bytes_malloc_dup(q->queue);
	if (!name.bytes) {
		sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: out of memory");
		goto fail;
	}
	amqp_queue_bind(mq->conn, CH, name, amqp_cstring_bytes(SBX_MQ_EVENTS), amqp_empty_bytes, amqp_empty_table);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "queue.bind events", err) < 0) {
		amqp_bytes_free(name);
		goto fail;
	}
	amqp_basic_consume(mq->conn, CH, name, amqp_empty_bytes, 0, 1, 1, amqp_empty_table);
	amqp_bytes_free(name);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "consume events", err) < 0)
		goto fail;
	mq->events_consuming = 1;
	return 0;
fail:
	drop(mq);
	return -1;
}

int sbx_mq_consume(sbx_mq *mq, const char *queue, int prefetch, sbx_err *err)
{
	snprintf(mq->consume_queue, sizeof(mq->consume_queue), "%s", queue);
	mq->consume_prefetch = prefetch;
	if (!mq->up)
		return connect_now(mq, err); /* which starts consuming */
	amqp_basic_qos(mq->conn, CH, 0, (uint16_t)prefetch, 0);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "basic.qos", err) < 0)
		return -1;
	amqp_basic_consume(mq->conn, CH, amqp_cstring_bytes(queue), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
	return reply_ok(amqp_get_rpc_reply(mq->conn), "basic.consume", err);
}

static void copy_bytes(char *dst, size_t dsz, amqp_bytes_t b)
{
	size_t n = b.len < dsz - 1 ? b.len : dsz - 1;
	memcpy(dst, b.bytes, n);
	dst[n] = 0;
}

int sbx_mq_next(sbx_mq *mq, int timeout_ms, sbx_mq_msg *msg, sbx_err *err)
{
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	amqp_envelope_t env;
	amqp_rpc_reply_t r;

	memset(msg, 0, sizeof(*msg));
	if (!mq->up && sbx_mq_ensure(mq, err) < 0)
		return -1;
	amqp_maybe_release_buffers(mq->conn);
	r = amqp_consume_message(mq->conn, &env, timeout_ms < 0 ? NULL : &tv, 0);
	if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT)
		return 0;
	if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
	    r.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
		/* a method other than basic.deliver: read it and decide */
		amqp_frame_t f;
		if (amqp_simple_wait_frame_noblock(mq->conn, &f, &tv) != AMQP_STATUS_OK) {
			drop(mq);
			return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: lost connection");
		}
		if (f.frame_type == AMQP_FRAME_METHOD &&
		    (f.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
		     f.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD)) {
			drop(mq);
			return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq closed the channel");
		}
		return 0; /* basic.return, basic.ack and the like: nothing for us */
	}
	if (r.reply_type != AMQP_RESPONSE_NORMAL) {
		reply_ok(r, "consume", err);
		drop(mq);
		return -1;
	}
	msg->body = malloc(env.message.body.len + 1);
	if (!msg->body) {
		amqp_destroy_envelope(&env);
		return sbx_err_sys(err, "nomem", "malloc");
	}
	memcpy(msg->body, env.message.body.bytes, env.message.body.len);
	msg->body[env.message.body.len] = 0;
	msg->len = env.message.body.len;
	msg->delivery_tag = env.delivery_tag;
	msg->redelivered = env.redelivered;
	msg->event = env.exchange.len == strlen(SBX_MQ_EVENTS) &&
		     !memcmp(env.exchange.bytes, SBX_MQ_EVENTS, env.exchange.len);
	{
		amqp_basic_properties_t *p = &env.message.properties;
		if (p->_flags & AMQP_BASIC_TYPE_FLAG)
			copy_bytes(msg->type, sizeof(msg->type), p->type);
		if (p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG)
			copy_bytes(msg->correlation_id, sizeof(msg->correlation_id), p->correlation_id);
		if (p->_flags & AMQP_BASIC_REPLY_TO_FLAG)
			copy_bytes(msg->reply_to, sizeof(msg->reply_to), p->reply_to);
		if (p->_flags & AMQP_BASIC_APP_ID_FLAG)
			copy_bytes(msg->boot_id, sizeof(msg->boot_id), p->app_id);
		if (p->_flags & AMQP_BASIC_HEADERS_FLAG) {
			for (int i = 0; i < p->headers.num_entries; i++) {
				amqp_table_entry_t *e = &p->headers.entries[i];
				if (e->key.len == 12 && !memcmp(e->key.bytes, "x-request-id", 12) &&
				    (e->value.kind == AMQP_FIELD_KIND_UTF8 || e->value.kind == AMQP_FIELD_KIND_BYTES)) {
					copy_bytes(msg->request_id, sizeof(msg->request_id), e->value.value.bytes);
					if (!sbx_request_id_valid(msg->request_id))
						msg->request_id[0] = 0;
				}
			}
		}
	}
	amqp_destroy_envelope(&env);
	return 1;
}

int sbx_mq_ack(sbx_mq *mq, uint64_t tag, sbx_err *err)
{
	if (!mq->up || amqp_basic_ack(mq->conn, CH, tag, 0) != AMQP_STATUS_OK) {
		drop(mq);
		return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: ack failed");
	}
	return 0;
}

int sbx_mq_reject(sbx_mq *mq, uint64_t tag, int requeue, sbx_err *err)
{
	if (!mq->up || amqp_basic_reject(mq->conn, CH, tag, requeue) != AMQP_STATUS_OK) {
		drop(mq);
		return sbx_err_set(err, 503, "mq_unavailable", "rabbitmq: reject failed");
	}
	return 0;
}

void sbx_mq_msg_free(sbx_mq_msg *m)
{
	free(m->body);
	m->body = NULL;
}

static int reply_consume(sbx_mq *mq, sbx_err *err)
{
	if (mq->reply_consuming)
		return 0;
	amqp_basic_consume(mq->conn, CH, amqp_cstring_bytes(DIRECT_REPLY), amqp_empty_bytes, 0, 1, 0,
			   amqp_empty_table);
	if (reply_ok(amqp_get_rpc_reply(mq->conn), "consume reply-to", err) < 0) {
		drop(mq);
		return -1;
	}
	mq->reply_consuming = 1;
	return 0;
}

int sbx_mq_request(sbx_mq *mq, const char *routing_key, const char *type, const void *body, size_t len,
		   const char *corr, sbx_err *err)
{
	struct sbx_mq_pub p = { .type = type, .correlation_id = corr, .reply_to = DIRECT_REPLY };

	if (sbx_mq_ensure(mq, err) < 0 || reply_consume(mq, err) < 0)
		return -1;
	return sbx_mq_publish(mq, routing_key, body, len, &p, err);
}

int sbx_mq_buffered(sbx_mq *mq)
{
	return mq->conn && mq->up && (amqp_data_in_buffer(mq->conn) || amqp_frames_enqueued(mq->conn));
}

int sbx_mq_rpc(sbx_mq *mq, const char *routing_key, const char *type, const void *body, size_t len,
	       int timeout_ms, sbx_mq_msg *reply, sbx_err *err)
{
	char corr[SBX_ID_LEN + 1], ttl[24];
	long long deadline = sbx_now_ms() + timeout_ms;

	if (sbx_mq_ensure(mq, err) < 0 || reply_consume(mq, err) < 0)
		return -1;
	sbx_id_new(corr);
	snprintf(ttl, sizeof(ttl), "%d", timeout_ms);
	{
		struct sbx_mq_pub p = { .type = type, .correlation_id = corr, .reply_to = DIRECT_REPLY,
					.expiration_ms = ttl };
		if (sbx_mq_publish(mq, routing_key, body, len, &p, err) < 0)
			return -1;
	}
	for (;;) {
		long long left = deadline - sbx_now_ms();
		int r;

		if (left <= 0)
			return sbx_err_set(err, 504, "rpc_timeout", "no worker answered within %d ms", timeout_ms);
		r = sbx_mq_next(mq, (int)left, reply, err);
		if (r < 0)
			return -1;
		if (r == 0)
			continue;
		if (strcmp(reply->correlation_id, corr) == 0)
			return 0;
		/* a late answer to an earlier, abandoned request */
		sbx_mq_msg_free(reply);
	}
}
