#include "config.h"
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "db.h"
#include "hash.h"
#include "log.h"

static void quiet_notice(void *arg, const char *message)
{
	(void)arg;
	log_debug("postgres: %s", message);
}

/* The session's prepared statements went with it. */
static void forget_prepared(sbx_db *db)
{
	for (int i = 0; i < db->nstmts; i++)
		free(db->stmts[i].sql);
	db->nstmts = 0;
}

static int db_connect(sbx_db *db, sbx_err *err)
{
	if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
		return 0;
	forget_prepared(db);
	if (db->conn) {
		PQreset(db->conn);
		if (PQstatus(db->conn) == CONNECTION_OK) {
			log_info("reconnected to postgres");
			db->sessions++;
			return 0;
		}
		PQfinish(db->conn);
		db->conn = NULL;
	}
	db->conn = PQconnectdb(db->conninfo);
	if (!db->conn)
		return sbx_err_set(err, 503, "db_unavailable", "postgres: out of memory");
	if (PQstatus(db->conn) != CONNECTION_OK) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%s", PQerrorMessage(db->conn));
		msg[strcspn(msg, "\n")] = 0;
		PQfinish(db->conn);
		db->conn = NULL;
		return sbx_err_set(err, 503, "db_unavailable", "postgres unreachable: %s", msg);
	}
	PQsetNoticeProcessor(db->conn, quiet_notice, NULL);
	db->sessions++;
	return 0;
}

int sbx_db_open(sbx_db *db, const char *conninfo, sbx_err *err)
{
	memset(db, 0, sizeof(*db));
	db->conninfo = strdup(conninfo);
	if (!db->conninfo)
		return sbx_err_sys(err, "nomem", "strdup");
	return db_connect(db, err);
}

void sbx_db_close(sbx_db *db)
{
	sbx_db_drop(db);
	free(db->conninfo);
	db->conninfo = NULL;
}

void sbx_db_drop(sbx_db *db)
{
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
	forget_prepared(db);
}

int sbx_db_ensure(sbx_db *db, sbx_err *err)
{
	return db_connect(db, err);
}

/* The name of sql prepared on this connection, preparing it first when it
 * is new; NULL when it cannot be (the table is full, or the server refused:
 * the caller then runs it unprepared and reports that error). */
static const char *prepared_name(sbx_db *db, const char *sql, int n)
{
	unsigned h = sbx_hash_str(sql);
	struct sbx_db_stmt *st;
	PGresult *r;
	int ok;

	for (int i = 0; i < db->nstmts; i++)
		if (db->stmts[i].hash == h && strcmp(db->stmts[i].sql, sql) == 0)
			return db->stmts[i].name;
	if (db->nstmts == SBX_DB_MAX_PREPARED)
		return NULL;
	/* inside a failed transaction a prepare fails too: the statement
	 * itself will say why */
	if (PQtransactionStatus(db->conn) == PQTRANS_INERROR)
		return NULL;
	st = &db->stmts[db->nstmts];
	snprintf(st->name, sizeof(st->name), "sbx%u", db->next_stmt++);
	r = PQprepare(db->conn, st->name, sql, n, NULL);
	ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
	if (r)
		PQclear(r);
	if (!ok || !(st->sql = strdup(sql)))
		return NULL;
	st->hash = h;
	db->nstmts++;
	return st->name;
}

int sbx_db_prepare(sbx_db *db, const char *sql, int n, sbx_err *err)
{
	if (db_connect(db, err) < 0)
		return -1;
	if (!prepared_name(db, sql, n))
		return sbx_err_set(err, 500, "db", "cannot prepare: %s", PQerrorMessage(db->conn));
	return 0;
}

/* After a schema change, a prepared statement whose result columns changed
 * fails once ("cached plan must not change result type"): forget it, so it
 * is prepared again. */
static bool forget_stale(sbx_db *db, const char *sql, PGresult *r)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	if (!state || strcmp(state, "0A000") != 0)
		return false;
	for (int i = 0; i < db->nstmts; i++)
		if (strcmp(db->stmts[i].sql, sql) == 0) {
			char q[32];
			PGresult *d;
			snprintf(q, sizeof(q), "DEALLOCATE %s", db->stmts[i].name);
			if (PQtransactionStatus(db->conn) == PQTRANS_IDLE && (d = PQexec(db->conn, q)))
				PQclear(d);
			free(db->stmts[i].sql);
			db->stmts[i] = db->stmts[--db->nstmts];
			return true;
		}
	return false;
}

static void set_error(sbx_db *db, PGresult *r, sbx_err *err)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	char msg[256];

	snprintf(msg, sizeof(msg), "%s", r ? PQresultErrorMessage(r) : PQerrorMessage(db->conn));
	msg[strcspn(msg, "\n")] = 0;
	sbx_err_set(err, 500, "db", "database error: %s", msg);
	snprintf(err->code, sizeof(err->code), "db:%s", state ? state : "?????");
}

int sbx_db_exec(sbx_db *db, PGresult **res, sbx_err *err, const char *sql, int n,
		const char *const *params)
{
	for (int attempt = 0;; attempt++) {
		PGTransactionStatusType before;
		PGresult *r;
		ExecStatusType st;
		const char *name;

		if (db_connect(db, err) < 0)
			return -1;
		before = PQtransactionStatus(db->conn);
		name = prepared_name(db, sql, n);
		if (name)
			r = PQexecPrepared(db->conn, name, n, params, NULL, NULL, 0);
		else
			r = PQexecParams(db->conn, sql, n, NULL, params, NULL, NULL, 0);
		st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
		if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
			if (res)
				*res = r;
			else
				PQclear(r);
			return 0;
		}
		if (PQstatus(db->conn) == CONNECTION_BAD) {
			if (r)
				PQclear(r);
			/* a lost transaction cannot be replayed: the caller must start over */
			if (attempt == 0 && before == PQTRANS_IDLE) {
				log_warnx("postgres connection lost; reconnecting");
				continue;
			}
			return sbx_err_set(err, 503, "db_unavailable", "postgres connection lost");
		}
		if (name && forget_stale(db, sql, r) && attempt == 0 && before == PQTRANS_IDLE) {
			PQclear(r);
			continue;
		}
		set_error(db, r, err);
		if (r)
			PQclear(r);
		return -1;
	}
}

/* Two statements in one round trip: libpq's pipeline mode. */
int sbx_db_exec2(sbx_db *db, const char *sql1, int n1, const char *const *p1, PGresult **res1, const char *sql2,
		 int n2, const char *const *p2, PGresult **res2, sbx_err *err)
{
	const char *name1, *name2;
	PGresult *got[2] = { NULL, NULL }, *r;
	int q = 0, rc = 0;
	bool sent;

	*res1 = *res2 = NULL;
	if (db_connect(db, err) < 0)
		return -1;
	/* in a transaction, or unprepared: one after the other (same answers) */
	if (PQtransactionStatus(db->conn) != PQTRANS_IDLE || !(name1 = prepared_name(db, sql1, n1)) ||
	    !(name2 = prepared_name(db, sql2, n2)) || !PQenterPipelineMode(db->conn))
		goto one_by_one;
	sent = PQsendQueryPrepared(db->conn, name1, n1, p1, NULL, NULL, 0) &&
	       PQsendQueryPrepared(db->conn, name2, n2, p2, NULL, NULL, 0) && PQpipelineSync(db->conn);
	/* results come as: R1, NULL, R2, NULL, SYNC (or FATAL when the link broke) */
	while (sent) {
		r = PQgetResult(db->conn);
		if (!r) {
			if (++q > 2 || PQstatus(db->conn) == CONNECTION_BAD)
				break;
			continue;
		}
		if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
			PQclear(r);
			break;
		}
		if (q < 2 && !got[q])
			got[q] = r;
		else
			PQclear(r);
	}
	PQexitPipelineMode(db->conn);
	if (!sent || PQstatus(db->conn) == CONNECTION_BAD) {
		for (int i = 0; i < 2; i++)
			if (got[i])
				PQclear(got[i]);
		if (PQstatus(db->conn) == CONNECTION_BAD)
			goto one_by_one; /* which reconnects, as a single statement would */
		return sbx_err_set(err, 503, "db_unavailable", "postgres: %s", PQerrorMessage(db->conn));
	}
	for (int i = 0; i < 2; i++) {
		ExecStatusType st = got[i] ? PQresultStatus(got[i]) : PGRES_FATAL_ERROR;
		if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || rc < 0)
			continue;
		if (got[i] && forget_stale(db, i == 0 ? sql1 : sql2, got[i])) {
			/* prepared before a schema change: prepare again, one by one */
			for (int j = 0; j < 2; j++)
				if (got[j])
					PQclear(got[j]);
			goto one_by_one;
		}
		/* the first failure says why (the second is then only "aborted") */
		set_error(db, got[i], err);
		rc = -1;
	}
	if (rc < 0) {
		for (int i = 0; i < 2; i++)
			if (got[i])
				PQclear(got[i]);
		return -1;
	}
	*res1 = got[0];
	*res2 = got[1];
	return 0;
one_by_one:
	if (sbx_db_exec(db, res1, err, sql1, n1, p1) < 0)
		return -1;
	if (sbx_db_exec(db, res2, err, sql2, n2, p2) < 0) {
		PQclear(*res1);
		*res1 = NULL;
		return -1;
	}
	return 0;
}

int sbx_db_vparams(const char **params, int n, va_list ap, sbx_err *err)
{
	if (n < 0 || n > SBX_DB_MAX_PARAMS)
		return sbx_err_set(err, 500, "internal", "too many query parameters");
	for (int i = 0; i < n; i++)
		params[i] = va_arg(ap, const char *);
	return 0;
}

int sbx_db_query(sbx_db *db, PGresult **res, sbx_err *err, const char *sql, int n, ...)
{
	const char *params[SBX_DB_MAX_PARAMS];
	va_list ap;
	int rc;

	va_start(ap, n);
	rc = sbx_db_vparams(params, n, ap, err);
	va_end(ap);
	return rc < 0 ? -1 : sbx_db_exec(db, res, err, sql, n, params);
}

int sbx_db_ping(sbx_db *db, sbx_err *err)
{
	return sbx_db_exec(db, NULL, err, "SELECT 1", 0, NULL);
}

int sbx_db_begin(sbx_db *db, sbx_err *err)
{
	return sbx_db_exec(db, NULL, err, "BEGIN", 0, NULL);
}

int sbx_db_commit(sbx_db *db, sbx_err *err)
{
	return sbx_db_exec(db, NULL, err, "COMMIT", 0, NULL);
}

int sbx_db_commit_lazy(sbx_db *db, sbx_err *err)
{
	PGresult *r;

	if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
		return sbx_err_set(err, 503, "db_unavailable", "postgres connection lost");
	/* one round trip; an aborted transaction's COMMIT says ROLLBACK */
	r = PQexec(db->conn, "SET LOCAL synchronous_commit TO off; COMMIT");
	if (!r || PQresultStatus(r) != PGRES_COMMAND_OK || strcmp(PQcmdStatus(r), "COMMIT")) {
		if (r && PQresultStatus(r) == PGRES_COMMAND_OK)
			sbx_err_set(err, 500, "db_error", "the transaction was rolled back");
		else
			set_error(db, r, err);
		if (r)
			PQclear(r);
		return -1;
	}
	PQclear(r);
	return 0;
}

void sbx_db_rollback(sbx_db *db)
{
	if (db->conn && PQstatus(db->conn) == CONNECTION_OK &&
	    PQtransactionStatus(db->conn) != PQTRANS_IDLE) {
		PGresult *r = PQexec(db->conn, "ROLLBACK");
		if (r)
			PQclear(r);
	}
}

int sbx_db_is_unique_violation(const sbx_err *err)
{
	return strcmp(err->code, "db:23505") == 0;
}

int sbx_db_listen(sbx_db *db, const char *channel, sbx_err *err)
{
	char sql[128];

	snprintf(sql, sizeof(sql), "LISTEN %s", channel);
	return sbx_db_exec(db, NULL, err, sql, 0, NULL);
}

/* Hands a notification that nobody waits for to on_notify. */
static void dispatch(sbx_db *db, PGnotify *n)
{
	if (db->on_notify)
		db->on_notify(db->on_notify_arg, n->relname, n->extra);
	PQfreemem(n);
}

void sbx_db_unlisten(sbx_db *db, const char *channel)
{
	char sql[128];
	PGnotify *n;

	if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
		return;
	snprintf(sql, sizeof(sql), "UNLISTEN %s", channel);
	PQclear(PQexec(db->conn, sql));
	/* drop what arrived on it meanwhile: the next request must not see it */
	PQconsumeInput(db->conn);
	while ((n = PQnotifies(db->conn))) {
		if (strcmp(n->relname, channel) == 0)
			PQfreemem(n);
		else
			dispatch(db, n);
	}
}

int sbx_db_poll_notifies(sbx_db *db)
{
	PGnotify *n;

	if (!db->conn || PQstatus(db->conn) != CONNECTION_OK || !PQconsumeInput(db->conn))
		return -1;
	while ((n = PQnotifies(db->conn)))
		dispatch(db, n);
	return 0;
}

/* The next pending notification on channel; others are dispatched. */
static PGnotify *next_on(sbx_db *db, const char *channel)
{
	PGnotify *n;

	while ((n = PQnotifies(db->conn))) {
		if (strcmp(n->relname, channel) == 0)
			return n;
		dispatch(db, n);
	}
	return NULL;
}

int sbx_db_wait_notify(sbx_db *db, const char *channel, int timeout_ms, char *payload, size_t psz,
		       sbx_err *err)
{
	PGnotify *n;
	struct pollfd p;

	if (!db->conn)
		return sbx_err_set(err, 503, "db_unavailable", "postgres connection lost");
	n = next_on(db, channel);
	if (!n) {
		p.fd = PQsocket(db->conn);
		p.events = POLLIN;
		if (p.fd < 0)
			return sbx_err_set(err, 503, "db_unavailable", "postgres connection lost");
		if (poll(&p, 1, timeout_ms) <= 0)
			return 0;
		if (!PQconsumeInput(db->conn))
			return sbx_err_set(err, 503, "db_unavailable", "postgres connection lost");
		n = next_on(db, channel);
		if (!n)
			return 0;
	}
	snprintf(payload, psz, "%s", n->extra);
	PQfreemem(n);
	return 1;
}
