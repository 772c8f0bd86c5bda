/* Postgres through libpq: one connection per process, reconnected on demand.
 * Every statement is parameterised; callers never splice values into SQL. */
#ifndef SBX_DB_H
#define SBX_DB_H

#include <stdarg.h>
#include <libpq-fe.h>
#include <stdbool.h>
#include "err.h"

/* A statement prepared on the current connection (see sbx_db_exec). */
struct sbx_db_stmt {
	char *sql;
	unsigned hash;
	char name[12];
};

#define SBX_DB_MAX_PREPARED 128

typedef struct sbx_db {
	PGconn *conn;
	char *conninfo;
	/* statements prepared on conn, forgotten whenever conn is replaced */
	struct sbx_db_stmt stmts[SBX_DB_MAX_PREPARED];
	int nstmts;
	unsigned next_stmt;
	/* counts the sessions opened: a change says "a new session" to anyone
	 * who keeps per-session state of their own (the API's warm-up, its
	 * LISTEN for the key cache) */
	unsigned sessions;
	/* notifications on channels other than the one being waited for */
	void (*on_notify)(void *arg, const char *channel, const char *payload);
	void *on_notify_arg;
} sbx_db;

static inline void sbx_pqclearp(PGresult **r) { if (*r) PQclear(*r); }
#define cleanup_pgres __attribute__((cleanup(sbx_pqclearp)))

/* Connecting lazily is allowed: open only records the conninfo and tries. */
int sbx_db_open(sbx_db *db, const char *conninfo, sbx_err *err);
void sbx_db_close(sbx_db *db);
/* Closes the connection now (its session state, e.g. advisory locks, goes
 * with it); the next statement reconnects. */
void sbx_db_drop(sbx_db *db);
/* Runs sql with n text parameters (NULL = SQL NULL). Each distinct sql text
 * is prepared once per connection and executed by name afterwards (parsing
 * and planning cost more than running the small statements we send), so sql
 * must be one statement. When the connection was
 * lost outside a transaction it reconnects and retries once. On error: 503
 * "db_unavailable" when the server cannot be reached, else 500 with the
 * SQLSTATE in err->code as "db:XXXXX". *res is set only on success. */
int sbx_db_exec(sbx_db *db, PGresult **res, sbx_err *err, const char *sql, int n,
		const char *const *params);
/* Prepares sql on this connection without running it (what sbx_db_exec
 * does the first time it meets a text): 0, or -1 when the server refused it
 * or the table of prepared statements is full. */
int sbx_db_prepare(sbx_db *db, const char *sql, int n, sbx_err *err);
/* Runs sql1 and then sql2 in one round trip (pipeline mode; one after the
 * other inside a transaction). Both run even when the caller will not
 * want sql2's answer, so sql2 must be harmless to run: a read. Both
 * results are set on success; on error neither is. */
int sbx_db_exec2(sbx_db *db, const char *sql1, int n1, const char *const *p1, PGresult **res1, const char *sql2,
		 int n2, const char *const *p2, PGresult **res2, sbx_err *err);
#define SBX_DB_MAX_PARAMS 32

/* Variadic form: sbx_db_query(db, &res, err, "... $1 $2", 2, a, b). */
int sbx_db_query(sbx_db *db, PGresult **res, sbx_err *err, const char *sql, int n, ...);
/* The N (at most SBX_DB_MAX_PARAMS) text parameters of a variadic call into
 * PARAMS; the caller brackets it with va_start/va_end. */
int sbx_db_vparams(const char **params, int n, va_list ap, sbx_err *err);
int sbx_db_ping(sbx_db *db, sbx_err *err);
int sbx_db_begin(sbx_db *db, sbx_err *err);
int sbx_db_commit(sbx_db *db, sbx_err *err);
/* COMMIT without waiting for the WAL to reach the disk (synchronous_commit
 * off for this transaction only), for a write a later synchronous commit
 * makes durable anyway: the WAL is one stream, flushed in order. */
int sbx_db_commit_lazy(sbx_db *db, sbx_err *err);
void sbx_db_rollback(sbx_db *db);
/* LISTEN on a channel (a fixed identifier, never input). */
int sbx_db_listen(sbx_db *db, const char *channel, sbx_err *err);
/* UNLISTEN one channel, and drop what arrived on it meanwhile. */
void sbx_db_unlisten(sbx_db *db, const char *channel);
/* Waits up to timeout_ms for a notification on channel: 1 (payload copied),
 * 0 timeout, -1 error. Notifications on other channels go to on_notify. */
int sbx_db_wait_notify(sbx_db *db, const char *channel, int timeout_ms, char *payload, size_t psz,
		       sbx_err *err);
/* Reads what the server sent without waiting and hands every notification
 * to on_notify: 0, or -1 when the connection is gone. */
int sbx_db_poll_notifies(sbx_db *db);
/* Connects when not connected: 0 or -1 (503). */
int sbx_db_ensure(sbx_db *db, sbx_err *err);
/* True when err came from a unique-constraint violation. */
int sbx_db_is_unique_violation(const sbx_err *err);

#endif
