/* The `execs` rows (sql/004_execs.sql), and the sandboxes' last_activity_at
 * updates, written without blocking the node agent's loop: record_exec (or
 * the relay's activity touch) queues a row, the loop sends it on a
 * connection of its own (libpq non-blocking) and collects the answer on a
 * later turn; rows go in the order they were queued.
 * A row is kept until Postgres answered it (a lost connection sends it
 * again); an error answer is logged and the row dropped. */
#ifndef SBX_WORKER_EXECLOG_H
#define SBX_WORKER_EXECLOG_H

#define EXECLOG_NPARAMS 13

struct execlog;

struct execlog *execlog_new(const char *conninfo);
/* Waits (at most ~2 s) for the rows still queued, then closes. */
void execlog_free(struct execlog *l);
/* One row: the INSERT's 13 parameters (NULL: SQL NULL), copied. */
void execlog_add(struct execlog *l, const char *const params[EXECLOG_NPARAMS]);
/* last_activity_at = now() for the sandbox (the record's id). */
void execlog_touch(struct execlog *l, const char *sandbox_id);
/* Sends what is queued and reads answers, never waiting; call every loop
 * turn. Returns the ms within which it wants to be called again (-1: no
 * row waits). */
long execlog_pump(struct execlog *l);

#endif
