#include "config.h"
#include <stdio.h>
#include <string.h>
#include "cleanup.h"
#include "sandbox_state.h"

#define B(s) SBX_SB_BIT(SBX_SB_##s)
#define LIVE (B(STARTING) | B(READY) | B(PAUSING) | B(PAUSED) | B(RESUMING))

/* The statuses, and which may follow each: the one table. A pause goes
 * ready -> pausing -> paused, or back to ready when it could not be done; a
 * resume paused -> resuming -> ready, or back to paused. */
static const struct {
	const char *name;
	unsigned next;
	bool settled, on_node;
} statuses[SBX_SB_NSTATUS] = {
	[SBX_SB_STARTING] = { "starting", B(READY) | B(FAILED) | B(DESTROYED), false, false },
	[SBX_SB_READY] = { "ready", B(PAUSING) | B(FAILED) | B(DESTROYED), true, true },
	[SBX_SB_PAUSING] = { "pausing", B(PAUSED) | B(READY) | B(FAILED) | B(DESTROYED), false, true },
	[SBX_SB_PAUSED] = { "paused", B(RESUMING) | B(FAILED) | B(DESTROYED), true, true },
	[SBX_SB_RESUMING] = { "resuming", B(READY) | B(PAUSED) | B(FAILED) | B(DESTROYED), false, true },
	[SBX_SB_FAILED] = { "failed", B(DESTROYED), true, false },
	[SBX_SB_DESTROYED] = { "destroyed", 0, true, false },
};

const char *sbx_sb_status_name(enum sbx_sb_status s)
{
	return (unsigned)s < SBX_SB_NSTATUS ? statuses[s].name : "";
}

int sbx_sb_status_parse(const char *name)
{
	for (int s = 0; name && s < SBX_SB_NSTATUS; s++)
		if (!strcmp(name, statuses[s].name))
			return s;
	return -1;
}

bool sbx_sb_transition_ok(enum sbx_sb_status from, enum sbx_sb_status to)
{
	return (unsigned)from < SBX_SB_NSTATUS && (unsigned)to < SBX_SB_NSTATUS &&
	       (statuses[from].next & SBX_SB_BIT(to));
}

bool sbx_sb_settled(int s)
{
	return s >= 0 && s < SBX_SB_NSTATUS && statuses[s].settled;
}

bool sbx_sb_on_node(int s)
{
	return s >= 0 && s < SBX_SB_NSTATUS && statuses[s].on_node;
}

int sbx_sb_guard(unsigned from_mask, enum sbx_sb_status to, char *out, size_t outsz, sbx_err *err)
{
	size_t len = 0;

	if (!from_mask || from_mask >= SBX_SB_BIT(SBX_SB_NSTATUS) || outsz < 3)
		return sbx_err_set(err, 500, "bad_transition", "sandbox: no status to change to %s",
				   sbx_sb_status_name(to));
	out[len++] = '{';
	for (int s = 0; s < SBX_SB_NSTATUS; s++) {
		int n;

		if (!(from_mask & SBX_SB_BIT(s)))
			continue;
		if (!sbx_sb_transition_ok((enum sbx_sb_status)s, to))
			return sbx_err_set(err, 500, "bad_transition", "sandbox: %s -> %s is not an allowed change",
					   statuses[s].name, sbx_sb_status_name(to));
		n = snprintf(out + len, outsz - len, "%s%s", len > 1 ? "," : "", statuses[s].name);
		if (n < 0 || (size_t)n >= outsz - len)
			return sbx_err_set(err, 500, "internal", "sandbox: status guard buffer too small");
		len += (size_t)n;
	}
	if (len + 2 > outsz)
		return sbx_err_set(err, 500, "internal", "sandbox: status guard buffer too small");
	out[len++] = '}';
	out[len] = 0;
	return 0;
}

/* Runs a guarded change whose last parameter is the guard; 1 when the
 * record changed (the statement RETURNs its id), 0 when not. */
static int change(sbx_db *db, unsigned from, enum sbx_sb_status to, sbx_err *err, const char *sql, int n,
		  const char *const *params)
{
	cleanup_pgres PGresult *res = NULL;
	const char *p[8];
	char guard[80];

	if (n >= (int)SBX_ARRAY_LEN(p) || sbx_sb_guard(from, to, guard, sizeof(guard), err) < 0)
		return -1;
	memcpy(p, params, (size_t)n * sizeof(*p));
	p[n] = guard;
	if (sbx_db_exec(db, &res, err, sql, n + 1, p) < 0)
		return -1;
	return PQntuples(res) > 0;
}

int sbx_sandbox_ready(sbx_db *db, const char *id, const char *node_id, const char *container_id,
		      const char *placement_id, sbx_err *err)
{
	const char *p[] = { id, node_id, container_id, placement_id };

	return change(db, B(STARTING), SBX_SB_READY, err,
		      "UPDATE sandboxes SET status = 'ready', node_id = $2, container_id = $3, "
		      "placement_id = coalesce($4, placement_id), last_activity_at = now() "
		      "WHERE id = $1 AND status = ANY($5::sandbox_status[]) AND destroy_requested_at IS NULL "
		      "RETURNING id",
		      4, p);
}

int sbx_sandbox_fail_start(sbx_db *db, const char *id, const char *org, const char *reason, sbx_err *err)
{
	const char *p[] = { id, org, reason };

	return change(db, B(STARTING), SBX_SB_FAILED, err,
		      "UPDATE sandboxes SET status = 'failed', failure_reason = $3 "
		      "WHERE id = $1 AND ($2::text IS NULL OR org_id = $2) AND status = ANY($4::sandbox_status[]) "
		      "RETURNING id",
		      3, p);
}

int sbx_sandbox_fail(sbx_db *db, const char *id, const char *reason, sbx_err *err)
{
	const char *p[] = { id, reason };

	return change(db, LIVE, SBX_SB_FAILED, err,
		      "UPDATE sandboxes SET status = 'failed', failure_reason = $2 "
		      "WHERE id = $1 AND status = ANY($3::sandbox_status[]) RETURNING id",
		      2, p);
}

/* The lease's lock space: two int4 keys, (LEASE_CLASS, hashtext(id)), apart
 * from the one-key locks of the per-organisation create decision; a
 * waiter's, (WAIT_CLASS, hashtext(id)), is the one sql/019's trigger tries. */
#define LEASE_CLASS "21314"
#define WAIT_CLASS "21315"

int sbx_sandbox_lease(sbx_db *db, const char *id, bool *held, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	*held = false;
	if (sbx_db_query(db, &res, err, "SELECT pg_try_advisory_lock(" LEASE_CLASS ", hashtext($1))", 1, id) < 0)
		return -1;
	*held = !strcmp(PQgetvalue(res, 0, 0), "t");
	return 0;
}

void sbx_sandbox_lease_end(sbx_db *db, const char *id)
{
	sbx_err err = SBX_ERR_INIT;

	/* a lost session has let go already */
	(void)sbx_db_query(db, NULL, &err, "SELECT pg_advisory_unlock(" LEASE_CLASS ", hashtext($1))", 1, id);
}

int sbx_sandbox_wait_begin(sbx_db *db, const char *id, sbx_err *err)
{
	/* waits while a status change of id is being committed (the trigger
	 * holds the key until then): the caller's next read sees it */
	return sbx_db_query(db, NULL, err, "SELECT pg_advisory_lock_shared(" WAIT_CLASS ", hashtext($1))", 1, id);
}

void sbx_sandbox_wait_end(sbx_db *db, const char *id)
{
	sbx_err err = SBX_ERR_INIT;

	(void)sbx_db_query(db, NULL, &err, "SELECT pg_advisory_unlock_shared(" WAIT_CLASS ", hashtext($1))", 1, id);
}

int sbx_sandbox_fail_stuck(sbx_db *db, long long grace_s, PGresult **rows, sbx_err *err)
{
	char grace[32], guard[80];

	*rows = NULL;
	snprintf(grace, sizeof(grace), "%lld", grace_s);
	if (sbx_sb_guard(B(STARTING), SBX_SB_FAILED, guard, sizeof(guard), err) < 0)
		return -1;
	/* The try-lock is a transaction lock: it is let go when this statement
	 * ends, and taking it means no create holds the lease any more. */
	return sbx_db_query(db, rows, err,
			    "UPDATE sandboxes SET status = 'failed', failure_reason = CASE "
			    "  WHEN created_at < now() - make_interval(secs => $1::int) "
			    "  THEN 'the create did not finish (stuck in starting)' "
			    "  ELSE 'the create was abandoned: the process serving it ended' END "
			    "WHERE status = ANY($2::sandbox_status[]) "
			    "AND (created_at < now() - make_interval(secs => $1::int) "
			    "  OR pg_try_advisory_xact_lock(" LEASE_CLASS ", hashtext(id))) RETURNING id",
			    2, grace, guard);
}

int sbx_sandbox_destroy_intent(sbx_db *db, const char *id, const char *org, const char *reason, int *was,
			       sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;
	char guard[80];

	*was = -1;
	if (sbx_sb_guard(SBX_SB_UNPLACED, SBX_SB_DESTROYED, guard, sizeof(guard), err) < 0)
		return -1;
	if (sbx_db_query(db, &res, err,
			 "WITH old AS (SELECT id, status FROM sandboxes WHERE id = $1 AND ($2::text IS NULL OR org_id = $2) "
			 "  FOR UPDATE) "
			 "UPDATE sandboxes s SET destroy_requested_at = coalesce(s.destroy_requested_at, now()), "
			 "  destroy_reason = coalesce(s.destroy_reason, $3), "
			 "  status = CASE WHEN old.status = ANY($4::sandbox_status[]) THEN 'destroyed' ELSE s.status END, "
			 "  destroyed_at = CASE WHEN old.status = ANY($4::sandbox_status[]) THEN now() ELSE s.destroyed_at END "
			 "FROM old WHERE s.id = old.id RETURNING old.status",
			 4, id, org, reason, guard) < 0)
		return -1;
	if (PQntuples(res) != 1)
		return 0;
	*was = sbx_sb_status_parse(PQgetvalue(res, 0, 0));
	return 1;
}

int sbx_sandbox_expire(sbx_db *db, long long paused_limit_s, PGresult **rows, sbx_err *err)
{
	char lim[32];

	*rows = NULL;
	snprintf(lim, sizeof(lim), "%lld", paused_limit_s);
	/* a paused sandbox is idle by design: only the paused limit ends it */
	return sbx_db_query(db, rows, err,
			    "UPDATE sandboxes SET destroy_requested_at = now(), destroy_reason = CASE "
			    "  WHEN status = 'paused' THEN 'paused_too_long' "
			    "  WHEN expires_at <= now() THEN 'max_lifetime' ELSE 'idle_ttl' END "
			    "WHERE destroy_requested_at IS NULL AND ("
			    "  (status = 'ready' AND (expires_at <= now() "
			    "    OR last_activity_at + make_interval(secs => idle_timeout_s) <= now())) "
			    "  OR (status = 'paused' AND paused_at + make_interval(secs => $1::int) <= now())) "
			    "RETURNING id, destroy_reason",
			    1, lim);
}

/* One guarded change of status with the extra assignments in `set` (which
 * may use $3, arg; the no-op test names $3 for the statements that do not,
 * so every one has the same parameters). */
static int move(sbx_db *db, const char *id, const char *org, unsigned from, enum sbx_sb_status to,
		const char *set, const char *arg, sbx_err *err)
{
	char sql[640];
	const char *p[] = { id, org, arg };

	snprintf(sql, sizeof(sql),
		 "UPDATE sandboxes SET status = '%s'%s%s WHERE id = $1 AND ($2::text IS NULL OR org_id = $2) "
		 "AND ($3::text IS NULL OR true) AND status = ANY($4::sandbox_status[]) RETURNING id",
		 sbx_sb_status_name(to), set ? ", " : "", set ? set : "");
	return change(db, from, to, err, sql, 3, p);
}

int sbx_sandbox_pause_begin(sbx_db *db, const char *id, const char *org, sbx_err *err)
{
	return move(db, id, org, B(READY), SBX_SB_PAUSING, "transition_at = now()", NULL, err);
}

int sbx_sandbox_paused(sbx_db *db, const char *id, const char *kind, sbx_err *err)
{
	return move(db, id, NULL, B(PAUSING), SBX_SB_PAUSED, "paused_at = now(), pause_kind = $3", kind, err);
}

int sbx_sandbox_pause_undo(sbx_db *db, const char *id, sbx_err *err)
{
	return move(db, id, NULL, B(PAUSING), SBX_SB_READY, "last_activity_at = now()", NULL, err);
}

int sbx_sandbox_resume_begin(sbx_db *db, const char *id, const char *org, sbx_err *err)
{
	return move(db, id, org, B(PAUSED), SBX_SB_RESUMING, "transition_at = now()", NULL, err);
}

int sbx_sandbox_resumed(sbx_db *db, const char *id, sbx_err *err)
{
	return move(db, id, NULL, B(RESUMING), SBX_SB_READY, "paused_at = NULL, last_activity_at = now()", NULL,
		    err);
}

int sbx_sandbox_resume_undo(sbx_db *db, const char *id, sbx_err *err)
{
	return move(db, id, NULL, B(RESUMING), SBX_SB_PAUSED, NULL, NULL, err);
}

int sbx_sandbox_destroyed(sbx_db *db, const char *id, const char *reason, sbx_err *err)
{
	const char *p[] = { id, reason };

	return change(db, LIVE | B(FAILED), SBX_SB_DESTROYED, err,
		      "UPDATE sandboxes SET status = 'destroyed', destroyed_at = coalesce(destroyed_at, now()), "
		      "destroy_reason = coalesce(destroy_reason, $2, 'user') "
		      "WHERE id = $1 AND status = ANY($3::sandbox_status[]) RETURNING id",
		      2, p);
}

int sbx_sandbox_oom_kills(sbx_db *db, const char *id, long kills, sbx_err *err)
{
	char v[24];

	snprintf(v, sizeof(v), "%ld", kills);
	return sbx_db_query(db, NULL, err, "UPDATE sandboxes SET oom_kills = $2::int WHERE id = $1", 2, id, v);
}

int sbx_sandbox_touch(sbx_db *db, const char *id, sbx_err *err)
{
	return sbx_db_query(db, NULL, err, "UPDATE sandboxes SET last_activity_at = now() WHERE id = $1", 1, id);
}

int sbx_sandbox_use(sbx_db *db, const char *id, const char *org, PGresult **res, sbx_err *err)
{
	*res = NULL;
	/* one statement: look, and count this as activity when it can run */
	return sbx_db_query(db, res, err, SBX_SQL_SANDBOX_USE, 2, id, org);
}

int sbx_sandbox_keepalive(sbx_db *db, const char *id, const char *org, const char *idle_s, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	/* not a change of status: any live record, no destroy asked */
	if (sbx_db_query(db, &res, err,
			 "UPDATE sandboxes SET idle_timeout_s = $3::int, last_activity_at = now() WHERE id = $1 "
			 "AND org_id = $2 AND status IN ('ready', 'pausing', 'paused', 'resuming') "
			 "AND destroy_requested_at IS NULL RETURNING id",
			 3, id, org, idle_s) < 0)
		return -1;
	return PQntuples(res) > 0;
}

int sbx_sandbox_one_shot_stopped(sbx_db *db, const char *id, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;

	if (sbx_db_query(db, &res, err,
			 "UPDATE sandboxes SET destroy_requested_at = now(), destroy_reason = 'one_shot_stopped' "
			 "WHERE id = $1 AND one_shot AND destroy_requested_at IS NULL "
			 "AND status IN ('ready', 'pausing', 'paused', 'resuming') RETURNING id",
			 1, id) < 0)
		return -1;
	return PQntuples(res) > 0;
}
