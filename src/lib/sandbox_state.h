/* A sandbox's state: the one owner of `sandboxes.status` (and of every
 * other change to a sandbox record after its insert: the destroy intent,
 * last_activity_at, oom_kills). The statuses are sql/001_init.sql's
 * enum `sandbox_status`; which status may follow which is one table in
 * sandbox_state.c, and every write below is checked against it before it
 * runs: a change the table does not allow is refused (500
 * "bad_transition") and never written. Each write is one statement guarded
 * by the current status, so concurrent writers (API, provisioner, reaper,
 * node agent, on any machine) cannot undo each other.
 *
 * "Destroying" is not a status: a destroy is first written down as an
 * intent (destroy_requested_at and destroy_reason on the record, kept while
 * it is live); the destroy that follows is a change to `destroyed`. */
#ifndef SBX_SANDBOX_STATE_H
#define SBX_SANDBOX_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include "db.h"
#include "err.h"

enum sbx_sb_status {
	SBX_SB_STARTING,
	SBX_SB_READY,
	SBX_SB_PAUSING,
	SBX_SB_PAUSED,
	SBX_SB_RESUMING,
	SBX_SB_FAILED,
	SBX_SB_DESTROYED,
	SBX_SB_NSTATUS
};

#define SBX_SB_BIT(s) (1u << (s))
/* Records with no sandbox on a node: a destroy needs no node, it is done at once. */
#define SBX_SB_UNPLACED (SBX_SB_BIT(SBX_SB_STARTING) | SBX_SB_BIT(SBX_SB_FAILED))

const char *sbx_sb_status_name(enum sbx_sb_status s); /* "" when out of range */
/* The status named `name`, or -1. */
int sbx_sb_status_parse(const char *name);
/* May a record in `from` be changed to `to`? */
bool sbx_sb_transition_ok(enum sbx_sb_status from, enum sbx_sb_status to);
/* A status a wait ends at: ready, paused, failed, destroyed. */
bool sbx_sb_settled(int s);
/* A status whose sandbox exists on its node: ready, pausing, paused, resuming. */
bool sbx_sb_on_node(int s);
/* The guard of a change to `to` from any status in from_mask: refused
 * (500 bad_transition) unless the table allows every one; else the set as a
 * Postgres array literal ("{starting,failed}") for "status = ANY($n)". */
int sbx_sb_guard(unsigned from_mask, enum sbx_sb_status to, char *out, size_t outsz, sbx_err *err);

/* ---- writes. `org` (NULL: any) scopes a write to the caller's organisation.
 * Those returning a count return 1 when the record changed, 0 when its
 * status (or a destroy asked meanwhile) did not let it, -1 on error. */

/* starting -> ready with its placement (placement_id NULL: the one the
 * record has; a warm create names the pool member it was handed);
 * last_activity_at starts now. A record whose destroy was asked stays
 * starting (0). The provisioner's, once the node has started it. */
int sbx_sandbox_ready(sbx_db *db, const char *id, const char *node_id, const char *container_id,
		      const char *placement_id, sbx_err *err);
/* starting -> failed: its create did not finish (the reason is shown). */
int sbx_sandbox_fail_start(sbx_db *db, const char *id, const char *org, const char *reason, sbx_err *err);
/* starting, ready, pausing, paused, resuming -> failed: it died or was lost. */
int sbx_sandbox_fail(sbx_db *db, const char *id, const char *reason, sbx_err *err);
/* The create's lease: the process that writes a record 'starting' holds a
 * session advisory lock on its id, taken in the same transaction as the
 * insert (so the record is never seen without it) and let go when the
 * create has ended either way. A process that dies lets go with its
 * database session, so the reaper can tell an abandoned create from a slow
 * one at once. *held is false (and the create goes on without one) in the
 * rare case of another id with the same hash holding it: that record then
 * only ends by the grace. */
int sbx_sandbox_lease(sbx_db *db, const char *id, bool *held, sbx_err *err);
void sbx_sandbox_lease_end(sbx_db *db, const char *id);
/* A waiter for id's status changes: its LISTEN on sbx_sandbox_status is
 * only notified while it holds this (sql/019; a shared advisory lock of its
 * session, which a lost session lets go). Take it after the LISTEN and
 * before reading the status; end it when done waiting. */
int sbx_sandbox_wait_begin(sbx_db *db, const char *id, sbx_err *err);
void sbx_sandbox_wait_end(sbx_db *db, const char *id);
/* Every record in starting created more than grace_s ago, or whose lease
 * no live process holds -> failed; *rows (the caller's) lists their ids. */
int sbx_sandbox_fail_stuck(sbx_db *db, long long grace_s, PGresult **rows, sbx_err *err);

/* A destroy asked for (reason: a destroy_reason, e.g. "user"): the intent
 * is written (once; the first reason stays) and a record in
 * SBX_SB_UNPLACED becomes destroyed at once. 1 and *was = the status before,
 * or 0 when there is no such record (of that organisation). */
int sbx_sandbox_destroy_intent(sbx_db *db, const char *id, const char *org, const char *reason, int *was,
			       sbx_err *err);
/* The reaper's intents: every ready record past its lifetime (max_lifetime)
 * or idle timeout (idle_ttl), and every paused one paused longer than
 * paused_limit_s (paused_too_long), with no destroy asked yet. *rows: id,
 * reason. */
int sbx_sandbox_expire(sbx_db *db, long long paused_limit_s, PGresult **rows, sbx_err *err);

/* Pause and resume (the API writes the *_begin, the node agent the rest;
 * transition_at says when a pausing/resuming began, so an interrupted one
 * is found). ready -> pausing (org-scoped). */
int sbx_sandbox_pause_begin(sbx_db *db, const char *id, const char *org, sbx_err *err);
/* pausing -> paused; paused_at = now(), pause_kind = kind. */
int sbx_sandbox_paused(sbx_db *db, const char *id, const char *kind, sbx_err *err);
/* pausing -> ready: the pause could not be done, the sandbox runs on. */
int sbx_sandbox_pause_undo(sbx_db *db, const char *id, sbx_err *err);
/* paused -> resuming (org-scoped). */
int sbx_sandbox_resume_begin(sbx_db *db, const char *id, const char *org, sbx_err *err);
/* resuming -> ready; paused_at cleared, last_activity_at = now(). */
int sbx_sandbox_resumed(sbx_db *db, const char *id, sbx_err *err);
/* resuming -> paused: the resume could not be done, the checkpoint stays. */
int sbx_sandbox_resume_undo(sbx_db *db, const char *id, sbx_err *err);
/* Any status but destroyed -> destroyed (its sandbox is gone); the reason
 * (NULL: "user") is kept only when none was recorded. */
int sbx_sandbox_destroyed(sbx_db *db, const char *id, const char *reason, sbx_err *err);

/* How often the OOM killer struck inside it so far (shown as oom_kills). */
int sbx_sandbox_oom_kills(sbx_db *db, const char *id, long kills, sbx_err *err);
/* A oneShot sandbox's main process (a foreground command) ended: its
 * destroy is asked (one_shot_stopped; the reaper does it). 1 when asked
 * now, 0 when not one-shot or asked before. */
int sbx_sandbox_one_shot_stopped(sbx_db *db, const char *id, sbx_err *err);
/* Keep-alive: idle_timeout_s = idle_s and last_activity_at = now() for a
 * live record of org with no destroy asked (1), else 0. */
int sbx_sandbox_keepalive(sbx_db *db, const char *id, const char *org, const char *idle_s, sbx_err *err);
/* last_activity_at = now() (something ran in it). */
int sbx_sandbox_touch(sbx_db *db, const char *id, sbx_err *err);
/* sbx_sandbox_use's statement ($1 sandbox, $2 organisation or NULL): the
 * API warms it on a new session (src/api/warm.c) */
#define SBX_SQL_SANDBOX_USE                                                                                   \
	"WITH s AS (SELECT id, status, coalesce(node_id, '') AS node_id, env, "                                   \
	"coalesce(failure_reason, '') AS failure_reason, placement_id, one_shot FROM sandboxes "                  \
	"  WHERE id = $1 AND ($2::text IS NULL OR org_id = $2)), "                                                \
	"t AS (UPDATE sandboxes x SET last_activity_at = now() FROM s "                                           \
	"  WHERE x.id = s.id AND s.status = 'ready' AND x.last_activity_at < now() - interval '1 second') "       \
	"SELECT status, node_id, env::text, failure_reason, placement_id, one_shot FROM s"
/* Looks a record up to run something in it, and counts that as activity
 * when it is ready (at most once a second). *res (the caller's) has 0 rows
 * or one: status, node_id ('' when none), env (json text), failure_reason
 * ('' when none), placement_id (what names it on its node), one_shot. */
int sbx_sandbox_use(sbx_db *db, const char *id, const char *org, PGresult **res, sbx_err *err);

#endif
