/* A bounded queue of messages to publish, emptied by a thread of its own
 * over a connection of its own (outbox.h). The caller's thread only copies
 * a message in and signals; everything that can wait for the broker
 * (connecting, logging in, a write the broker does not read) happens here.
 *
 * The thread holds no lock while it talks to the broker: the head stays in
 * the queue until it is out, so a message that failed is sent again, in
 * order, once the connection is back (a broker that took it and then lost
 * the connection may see it twice; the node's answers already tolerate a
 * duplicate, as with a redelivered request). */
#include "config.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "clock.h"
#include "log.h"
#include "outbox.h"

#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 2000
#define HOLD_LOOK_MS 20
/* Messages sent are kept for reuse, up to this many: output comes as a
 * stream of 256 KiB messages, and a malloc and free of each made the
 * node's memory churn (under ASan the freed ones pile up in its
 * quarantine: relay-exec.t's bound on the agent's memory failed) */
#define SPARE_MAX 8

struct item {
	struct item *next;
	long long at; /* when it was put (ms) */
	size_t size;  /* what it counts against max_bytes */
	size_t cap;   /* what was allocated */
	char *rk, *type, *corr, *reply_to, *req_id, *expiration;
	int persistent;
	size_t len;
	char *body;
};

struct sbx_outbox {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item *head, *tail;
	struct item *spare; /* sent, kept for reuse (SPARE_MAX) */
	int nspare;
	long n, lost;
	size_t bytes, max_bytes;
	bool stop;
	long long drain_until;
	int fd; /* the thread's broker socket, -1 when none: close shuts it down */
	char *url, *hold_file;
	char boot_id[40];
};

static char *put_str(char **at, const char *s)
{
	char *r = *at;
	size_t l = strlen(s) + 1;

	memcpy(r, s, l);
	*at += l;
	return r;
}

static void pop(sbx_outbox *ob)
{
	struct item *it = ob->head;

	ob->head = it->next;
	if (!ob->head)
		ob->tail = NULL;
	ob->n--;
	ob->bytes -= it->size;
	if (ob->stop) {
		free(it);
		return;
	}
	if (ob->nspare == SPARE_MAX) {
		/* full: the smallest spare makes room for a larger one */
		struct item **small = &ob->spare, *gone;
		for (struct item **pp = &ob->spare; *pp; pp = &(*pp)->next)
			if ((*pp)->cap < (*small)->cap)
				small = pp;
		gone = (*small)->cap < it->cap ? *small : it;
		if (gone != it)
			*small = gone->next;
		free(gone);
		if (gone == it)
			return;
		ob->nspare--;
	}
	it->next = ob->spare;
	ob->spare = it;
	ob->nspare++;
}

/* A spare item of at least need bytes, or NULL. Under the lock. */
static struct item *spare_take(sbx_outbox *ob, size_t need)
{
	for (struct item **pp = &ob->spare; *pp; pp = &(*pp)->next)
		if ((*pp)->cap >= need) {
			struct item *it = *pp;
			*pp = it->next;
			ob->nspare--;
			return it;
		}
	return NULL;
}

/* While the broker cannot be reached: what no one waits for any more. */
static void drop_old(sbx_outbox *ob, long long now)
{
	long dropped = 0;

	while (ob->head && now - ob->head->at > SBX_OUTBOX_MAX_AGE_MS) {
		pop(ob);
		dropped++;
	}
	if (dropped) {
		ob->lost += dropped;
		log_warnx("outbox: %ld message(s) older than %d s dropped (the broker cannot be reached)", dropped,
			  SBX_OUTBOX_MAX_AGE_MS / 1000);
	}
}

static void wait_ms(sbx_outbox *ob, int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&ob->cv, &ob->mu, &ts);
}

static int send_one(sbx_outbox *ob, sbx_mq **mq, const struct item *it, sbx_err *err)
{
	/* "" stands for a property not set (sbx_mq_publish sets any string) */
#define OPT(s) ((s)[0] ? (s) : NULL)
	struct sbx_mq_pub p = { .type = OPT(it->type),
				.correlation_id = OPT(it->corr),
				.reply_to = OPT(it->reply_to),
				.request_id = it->req_id, /* "": none, as publish reads it */
				.expiration_ms = OPT(it->expiration),
				.persistent = it->persistent };
#undef OPT

	int rc;

	if (!*mq) {
		if (sbx_mq_open(mq, ob->url, err) < 0 && !*mq)
			return -1;
		sbx_mq_set_boot_id(*mq, ob->boot_id);
	}
	/* connected first (when it is not), so that close can shut the socket
	 * down under a write the broker does not read; never a reconnect of a
	 * connection that is up (what it has unread would be lost) */
	rc = sbx_mq_fd(*mq) >= 0 ? 0 : sbx_mq_ensure(*mq, err);
	pthread_mutex_lock(&ob->mu);
	ob->fd = rc == 0 ? sbx_mq_fd(*mq) : -1;
	pthread_mutex_unlock(&ob->mu);
	if (rc < 0)
		return -1;
	return sbx_mq_publish(*mq, it->rk, it->body, it->len, &p, err);
}

static void *run(void *arg)
{
	sbx_outbox *ob = arg;
	sbx_mq *mq = NULL;
	int backoff = RETRY_MIN_MS;
	bool down = false;
	sbx_err e0 = SBX_ERR_INIT;

	/* connected before the first message, so that it does not wait for a
	 * login (a broker down now is retried with that message) */
	if (sbx_mq_open(&mq, ob->url, &e0) == 0 || mq)
		sbx_mq_set_boot_id(mq, ob->boot_id);
	pthread_mutex_lock(&ob->mu);
	for (;;) {
		struct item *it;
		sbx_err err = SBX_ERR_INIT;
		int rc;

		while (!ob->head && !ob->stop)
			pthread_cond_wait(&ob->cv, &ob->mu);
		if (!ob->head || (ob->stop && sbx_now_ms() >= ob->drain_until))
			break;
		if (ob->hold_file && access(ob->hold_file, F_OK) == 0) {
			wait_ms(ob, HOLD_LOOK_MS);
			continue;
		}
		it = ob->head;
		pthread_mutex_unlock(&ob->mu);
		rc = send_one(ob, &mq, it, &err);
		pthread_mutex_lock(&ob->mu);
		if (rc == 0) {
			pop(ob);
			if (down)
				log_info("outbox: publishing again");
			down = false;
			backoff = RETRY_MIN_MS;
			continue;
		}
		if (!down)
			log_warnx("outbox: %s; %ld message(s) wait", err.msg, ob->n);
		down = true;
		drop_old(ob, sbx_now_ms());
		{
			long long left = ob->stop ? ob->drain_until - sbx_now_ms() : backoff;
			if (left > 0)
				wait_ms(ob, left < backoff ? (int)left : backoff);
		}
		backoff = backoff * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : backoff * 2;
	}
	if (ob->n) {
		log_warnx("outbox: %ld message(s) not published at exit", ob->n);
		ob->lost += ob->n;
	}
	while (ob->head)
		pop(ob);
	while (ob->spare) {
		struct item *it = ob->spare;
		ob->spare = it->next;
		free(it);
	}
	ob->nspare = 0;
	ob->fd = -1;
	pthread_mutex_unlock(&ob->mu);
	sbx_mq_close(mq);
	return NULL;
}

int sbx_outbox_open(sbx_outbox **out, const char *url, const char *boot_id, size_t max_bytes,
		    const char *hold_file, sbx_err *err)
{
	sbx_outbox *ob = calloc(1, sizeof(*ob));
	sigset_t all, old;
	int rc;

	*out = NULL;
	if (!ob || !(ob->url = strdup(url)) || (hold_file && !(ob->hold_file = strdup(hold_file)))) {
		if (ob)
			free(ob->url);
		free(ob);
		return sbx_err_set(err, 500, "nomem", "outbox: out of memory");
	}
	snprintf(ob->boot_id, sizeof(ob->boot_id), "%s", boot_id ? boot_id : "");
	ob->max_bytes = max_bytes;
	ob->fd = -1;
	pthread_mutex_init(&ob->mu, NULL);
	pthread_cond_init(&ob->cv, NULL);
	/* signals stay the caller's thread's (a signalfd, a handler) */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&ob->th, NULL, run, ob);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		free(ob->url);
		free(ob->hold_file);
		free(ob);
		return sbx_err_set(err, 500, "outbox", "outbox: cannot start its thread: %s", strerror(rc));
	}
	*out = ob;
	return 0;
}

int sbx_outbox_put(sbx_outbox *ob, const char *routing_key, const void *body, size_t len,
		   const struct sbx_mq_pub *p, sbx_err *err)
{
	const char *s[6];
	size_t need = sizeof(struct item) + len + 1;
	struct item *it;
	char *at;

	s[0] = routing_key;
	s[1] = p && p->type ? p->type : "";
	s[2] = p && p->correlation_id ? p->correlation_id : "";
	s[3] = p && p->reply_to ? p->reply_to : "";
	s[4] = p && p->request_id ? p->request_id : sbx_log_request_id();
	s[5] = p && p->expiration_ms ? p->expiration_ms : "";
	for (size_t i = 0; i < 6; i++)
		need += strlen(s[i] ? s[i] : "") + 1;
	pthread_mutex_lock(&ob->mu);
	if (ob->bytes + need > ob->max_bytes) {
		ob->lost++;
		pthread_mutex_unlock(&ob->mu);
		return sbx_err_set(err, 503, "mq_unavailable", "outbox full (%zu bytes wait for the broker)", ob->bytes);
	}
	it = spare_take(ob, need);
	pthread_mutex_unlock(&ob->mu);
	if (!it) {
		if (!(it = malloc(need)))
			return sbx_err_set(err, 500, "nomem", "outbox: out of memory");
		it->cap = need;
	}
	{
		size_t cap = it->cap;
		memset(it, 0, sizeof(*it));
		it->cap = cap;
	}
	at = (char *)(it + 1);
	it->rk = put_str(&at, s[0]);
	/* "" for a property not set (send_one) */
	it->type = put_str(&at, s[1]);
	it->corr = put_str(&at, s[2]);
	it->reply_to = put_str(&at, s[3]);
	it->req_id = put_str(&at, s[4] ? s[4] : "");
	it->expiration = put_str(&at, s[5]);
	it->persistent = p ? p->persistent : 0;
	it->body = at;
	if (len)
		memcpy(it->body, body, len);
	it->body[len] = 0;
	it->len = len;
	it->size = need;
	it->at = sbx_now_ms();
	pthread_mutex_lock(&ob->mu);
	if (ob->tail)
		ob->tail->next = it;
	else
		ob->head = it;
	ob->tail = it;
	ob->n++;
	ob->bytes += need;
	pthread_cond_signal(&ob->cv);
	pthread_mutex_unlock(&ob->mu);
	return 0;
}

void sbx_outbox_close(sbx_outbox *ob, int drain_ms)
{
	if (!ob)
		return;
	pthread_mutex_lock(&ob->mu);
	ob->stop = true;
	ob->drain_until = sbx_now_ms() + (drain_ms > 0 ? drain_ms : 0);
	pthread_cond_signal(&ob->cv);
	pthread_mutex_unlock(&ob->mu);
	{
		/* a write the broker does not read waits for ever: past the
		 * drain, the socket is shut down under it */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += drain_ms / 1000 + 1;
		if (pthread_timedjoin_np(ob->th, NULL, &ts) != 0) {
			pthread_mutex_lock(&ob->mu);
			if (ob->fd >= 0)
				shutdown(ob->fd, SHUT_RDWR);
			pthread_mutex_unlock(&ob->mu);
			pthread_join(ob->th, NULL);
		}
	}
	pthread_mutex_destroy(&ob->mu);
	pthread_cond_destroy(&ob->cv);
	free(ob->url);
	free(ob->hold_file);
	free(ob);
}

void sbx_outbox_stats(sbx_outbox *ob, long *queued, size_t *bytes, long *lost)
{
	pthread_mutex_lock(&ob->mu);
	if (queued)
		*queued = ob->n;
	if (bytes)
		*bytes = ob->bytes;
	if (lost)
		*lost = ob->lost;
	pthread_mutex_unlock(&ob->mu);
}
