/* The execs rows and last_activity_at updates, off the node agent's loop
 * (execlog.h). One statement in flight at a time on a non-blocking libpq
 * connection of our own, in the order they were queued; the queue is
 * bounded (a Postgres that is down for long loses the oldest rows, counted
 * in the log, rather than the node's memory). */
#include "config.h"
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libpq-fe.h>
#include "clock.h"
#include "execlog.h"
#include "log.h"

#define QUEUE_MAX 100000
#define RETRY_MS 2000
#define PUMP_MS 10 /* how soon to look again while an answer is due */

static const char insert_sql[] =
	"INSERT INTO execs (id, sandbox_id, org_id, cmd, exit_code, signal, timed_out, duration_ms, "
	"stdout_bytes, stderr_bytes, started_at, request_id, background, error) "
	"SELECT $1, s.id, s.org_id, $3, $4::int, $5::int, $6::boolean, $7::bigint, $8::bigint, "
	"$9::bigint, to_timestamp($10::double precision / 1000), nullif($11, ''), $12::boolean, $13 "
	"FROM sandboxes s WHERE s.id = $2";
static const char touch_sql[] = "UPDATE sandboxes SET last_activity_at = now() WHERE id = $1";

struct xrow {
	struct xrow *next;
	const char *sql; /* insert_sql or touch_sql */
	int n;		 /* its parameters */
	int sid;	 /* the one that names the sandbox (for the log) */
	char *v[EXECLOG_NPARAMS];
};

struct execlog {
	char *conninfo;
	PGconn *c;
	struct xrow *head, *tail;
	long n, dropped;
	bool busy; /* head's INSERT was sent, its answer not read yet */
	long long retry_at;
};

struct execlog *execlog_new(const char *conninfo)
{
	struct execlog *l = calloc(1, sizeof(*l));

	if (!l || !(l->conninfo = strdup(conninfo))) {
		free(l);
		return NULL;
	}
	return l;
}

static void row_free(struct xrow *x)
{
	for (int i = 0; i < EXECLOG_NPARAMS; i++)
		free(x->v[i]);
	free(x);
}

static void pop(struct execlog *l)
{
	struct xrow *x = l->head;

	l->head = x->next;
	if (!l->head)
		l->tail = NULL;
	l->n--;
	row_free(x);
}

static void add_row(struct execlog *l, const char *sql, int n, int sid, const char *const *params)
{
	struct xrow *x;

	if (l->n >= QUEUE_MAX && !(l->busy && l->n == 1)) {
		/* the oldest not in flight goes */
		struct xrow *old = l->busy ? l->head->next : l->head;
		if (l->busy) {
			l->head->next = old->next;
			if (l->tail == old)
				l->tail = l->head;
			l->n--;
			row_free(old);
		} else {
			pop(l);
		}
		if (l->dropped++ % 1000 == 0)
			log_warnx("exec records: the queue is full (Postgres unreachable?); %ld dropped", l->dropped);
	}
	x = calloc(1, sizeof(*x));
	if (!x)
		return;
	x->sql = sql;
	x->n = n;
	x->sid = sid;
	for (int i = 0; i < n; i++)
		if (params[i] && !(x->v[i] = strdup(params[i]))) {
			row_free(x);
			return;
		}
	if (l->tail)
		l->tail->next = x;
	else
		l->head = x;
	l->tail = x;
	l->n++;
}

void execlog_add(struct execlog *l, const char *const params[EXECLOG_NPARAMS])
{
	add_row(l, insert_sql, EXECLOG_NPARAMS, 1, params);
}

void execlog_touch(struct execlog *l, const char *sandbox_id)
{
	const char *const v[1] = { sandbox_id };

	add_row(l, touch_sql, 1, 0, v);
}

static void drop_conn(struct execlog *l, const char *why)
{
	log_warnx("exec records: %s: %s", why, l->c ? PQerrorMessage(l->c) : "no connection");
	PQfinish(l->c);
	l->c = NULL;
	l->busy = false; /* the head is sent again on the next connection */
	l->retry_at = sbx_now_ms() + RETRY_MS;
}

/* Connecting blocks (bounded by connect_timeout in the conninfo): at the
 * first row and after a loss only, never per row. */
static bool conn_ok(struct execlog *l)
{
	if (l->c && PQstatus(l->c) == CONNECTION_OK)
		return true;
	if (sbx_now_ms() < l->retry_at)
		return false;
	PQfinish(l->c);
	l->c = PQconnectdb(l->conninfo);
	if (!l->c || PQstatus(l->c) != CONNECTION_OK || PQsetnonblocking(l->c, 1) != 0) {
		drop_conn(l, "connecting");
		return false;
	}
	return true;
}

long execlog_pump(struct execlog *l)
{
	if (!l || (!l->head && !l->busy))
		return -1;
	if (!conn_ok(l))
		return RETRY_MS;
	if (l->busy) {
		if (!PQconsumeInput(l->c)) {
			drop_conn(l, "reading an answer");
			return RETRY_MS;
		}
		while (l->busy && !PQisBusy(l->c)) {
			PGresult *res = PQgetResult(l->c);
			if (!res) {
				l->busy = false;
				pop(l);
				break;
			}
			if (PQresultStatus(res) != PGRES_COMMAND_OK)
				log_warnx("%s: sandbox %s: %s", l->head->sql == touch_sql ? "last_activity_at" : "exec records",
					  l->head->v[l->head->sid] ? l->head->v[l->head->sid] : "?", PQresultErrorMessage(res));
			PQclear(res);
		}
	}
	if (!l->busy && l->head) {
		if (!PQsendQueryParams(l->c, l->head->sql, l->head->n, NULL, (const char *const *)l->head->v, NULL, NULL,
				       0)) {
			drop_conn(l, "sending");
			return RETRY_MS;
		}
		l->busy = true;
	}
	if (l->busy && PQflush(l->c) < 0) {
		drop_conn(l, "sending");
		return RETRY_MS;
	}
	return l->busy || l->head ? PUMP_MS : -1;
}

void execlog_free(struct execlog *l)
{
	long long end = sbx_now_ms() + 2000;

	if (!l)
		return;
	while ((l->head || l->busy) && sbx_now_ms() < end && execlog_pump(l) >= 0) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	if (l->n)
		log_warnx("exec records: %ld not written at exit", l->n);
	while (l->head)
		pop(l);
	PQfinish(l->c);
	free(l->conninfo);
	free(l);
}
