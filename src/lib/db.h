/* Postgres through libpq: one connection per process, reconnected on demand.
 * Every statement is parameterised; callers never splice values into SQL. */
#ifndef SBX_DB_H
#define SBX_DB_H

#include <libpq-fe.h>
#include "err.h"

typedef struct sbx_db {
	PGconn *conn;
	char *conninfo;
} sbx_db;

static inline void sbx_pqclearp(PGresult **r) { if (*r) PQclear(*r); }
#define cleanup_pgres __attribute__((cleanup(sbx_pqclearp)))

/* Connecting lazily is allowed: open only records the conninfo and tries. */
int sbx_db_open(sbx_db *db, const char *conninfo, sbx_err *err);
void sbx_db_close(sbx_db *db);
/* Runs sql with n text parameters (NULL = SQL NULL). When the connection was
 * lost outside a transaction it reconnects and retries once. On error: 503
 * "db_unavailable" when the server cannot be reached, else 500 with the
 * SQLSTATE in err->code as "db:XXXXX". *res is set only on success. */
int sbx_db_exec(sbx_db *db, PGresult **res, sbx_err *err, const char *sql, int n,
		const char *const *params);
/* Variadic form: sbx_db_query(db, &res, err, "... $1 $2", 2, a, b). */
int sbx_db_query(sbx_db *db, PGresult **res, sbx_err *err, const char *sql, int n, ...);
int sbx_db_ping(sbx_db *db, sbx_err *err);
int sbx_db_begin(sbx_db *db, sbx_err *err);
int sbx_db_commit(sbx_db *db, sbx_err *err);
void sbx_db_rollback(sbx_db *db);
/* LISTEN on a channel (a fixed identifier, never input). */
int sbx_db_listen(sbx_db *db, const char *channel, sbx_err *err);
void sbx_db_unlisten_all(sbx_db *db);
/* Waits up to timeout_ms for a notification: 1 (payload copied), 0 timeout, -1 error. */
int sbx_db_wait_notify(sbx_db *db, int timeout_ms, char *payload, size_t psz, sbx_err *err);
/* True when err came from a unique-constraint violation. */
int sbx_db_is_unique_violation(const sbx_err *err);

#endif
