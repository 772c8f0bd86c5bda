#include "config.h"
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "db.h"
#include "log.h"

static void quiet_notice(void *arg, const char *message)
{
	(void)arg;
	log_debug("postgres: %s", message);
}

static int db_connect(sbx_db *db, sbx_err *err)
{
	if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
		return 0;
	if (db->conn) {
		PQreset(db->conn);
		if (PQstatus(db->conn) == CONNECTION_OK) {
			log_info("reconnected to postgres");
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
	return 0;
}

int sbx_db_open(sbx_db *db, const char *conninfo, sbx_err *err)
{
	db->conn = NULL;
	db->conninfo = strdup(conninfo);
	if (!db->conninfo)
		return sbx_err_sys(err, "nomem", "strdup");
	return db_connect(db, err);
}

void sbx_db_close(sbx_db *db)
{
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
	free(db->conninfo);
	db->conninfo = NULL;
}

int sbx_db_exec(sbx_db *db, PGresult **res, sbx_err *err, const char *sql, int n,
		const char *const *params)
{
	for (int attempt = 0;; attempt++) {
		PGTransactionStatusType before;
		PGresult *r;
		ExecStatusType st;

		if (db_connect(db, err) < 0)
			return -1;
		before = PQtransactionStatus(db->conn);
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
		{
			const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
			char msg[256];
			snprintf(msg, sizeof(msg), "%s", r ? PQresultErrorMessage(r) : PQerrorMessage(db->conn));
			msg[strcspn(msg, "\n")] = 0;
			sbx_err_set(err, 500, "db", "database error: %s", msg);
			snprintf(err->code, sizeof(err->code), "db:%s", state ? state : "?????");
			if (r)
				PQclear(r);
			return -1;
		}
	}
}

int sbx_db_query(sbx_db *db, PGresult **res, sbx_err *err, const char *sql, int n, ...)
{
	const char *params[32];
	va_list ap;

	if (n < 0 || n > 32)
		return sbx_err_set(err, 500, "internal", "too many query parameters");
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		params[i] = va_arg(ap, const char *);
	va_end(ap);
	return sbx_db_exec(db, res, err, sql, n, params);
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

void sbx_db_unlisten_all(sbx_db *db)
{
	PGnotify *n;

	if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
		return;
	PQclear(PQexec(db->conn, "UNLISTEN *"));
	/* drop what arrived meanwhile: the next request must not see it */
	PQconsumeInput(db->conn);
	while ((n = PQnotifies(db->conn)))
		PQfreemem(n);
}

int sbx_db_wait_notify(sbx_db *db, int timeout_ms, char *payload, size_t psz, sbx_err *err)
{
	PGnotify *n;
	struct pollfd p;

	if (!db->conn)
		return sbx_err_set(err, 503, "db_unavailable", "postgres connection lost");
	n = PQnotifies(db->conn);
	if (!n) {
		p.fd = PQsocket(db->conn);
		p.events = POLLIN;
		if (p.fd < 0)
			return sbx_err_set(err, 503, "db_unavailable", "postgres connection lost");
		if (poll(&p, 1, timeout_ms) <= 0)
			return 0;
		if (!PQconsumeInput(db->conn))
			return sbx_err_set(err, 503, "db_unavailable", "postgres connection lost");
		n = PQnotifies(db->conn);
		if (!n)
			return 0;
	}
	snprintf(payload, psz, "%s", n->extra);
	PQfreemem(n);
	return 1;
}
