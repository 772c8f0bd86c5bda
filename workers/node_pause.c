/* The node agent's side of pause and resume (DESIGN.md "Failure"): the
 * request is taken on at once and done by a short-lived process
 * (sandbox_pause / sandbox_resume, pause.c); its end moves the record
 * (pausing -> paused or back to ready, resuming -> ready or back to
 * paused). A pause or resume whose process never ended (the agent was
 * killed) is settled from what the node's disk says: a complete checkpoint
 * is a paused sandbox, unless the container restored from it runs beside
 * it (a resume stopped after its restore): that one has run since, so it
 * is the ready sandbox and the checkpoint goes; a running container with
 * no checkpoint is a ready one (its channel reopened); neither is a failed
 * one. */
#include "config.h"
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include "cleanup.h"
#include "log.h"
#include "idle.h"
#include "node_int.h"
#include "reply.h"
#include "sandbox_state.h"

/* longer than any pause or resume takes (checkpoint 120 s, resume 60 s) */
#define STUCK_S 180

static const char *st_name(enum sb_state st)
{
	switch (st) {
	case SB_STARTING: return "starting";
	case SB_READY: return "ready";
	case SB_PAUSING: return "pausing";
	case SB_PAUSED: return "paused";
	case SB_RESUMING: return "resuming";
	case SB_DESTROYING: return "being destroyed";
	default: return "unknown";
	}
}

void on_pause(struct node *n, const sbx_mq_msg *m, enum sbx_msg_kind kind, json_t *body)
{
	const char *id = NULL, *sid = NULL; /* the placement (what is acted on), its record */
	json_error_t jerr;
	struct sb *s;
	bool pause = kind == SBX_MSG_PAUSE;
	char why[160];

	if (json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s, s:s}", "sandbox_id", &sid, "placement_id", &id) < 0 ||
	    !sbx_id_valid(id) || !sbx_id_valid(sid)) {
		log_warnx("rejecting a malformed %s request", sbx_msg_name(kind));
		node_reply_msg(n, m, sbx_reply_fail(NULL, "malformed request"));
		return;
	}
	if (!(s = node_changeable(n, m, id, sid)))
		return;
	if (s->st == (pause ? SB_PAUSED : SB_READY)) {
		node_reply_msg(n, m, sbx_reply_ok()); /* done already: a repeated request */
		return;
	}
	if (s->st != (pause ? SB_READY : SB_PAUSED)) {
		snprintf(why, sizeof(why), "the sandbox is %s on the node", st_name(s->st));
		node_reply_msg(n, m, sbx_reply_fail("bad_state", why));
		return;
	}
	/* a frozen sentry takes no signal and cannot be checkpointed: thawed first */
	if (pause && idle_frozen(n, id) && idle_thaw(n, id) < 0) {
		node_reply_msg(n, m, sbx_reply_fail(NULL, "the sandbox could not be thawed for its pause"));
		return;
	}
	s->st = pause ? SB_PAUSING : SB_RESUMING;
	if (pause) /* relay: its ops end now; a paused sandbox runs nothing */
		relay_sandbox_gone(n->relay, id, "not_ready", "the sandbox is being paused");
	if (node_op_spawn(n, pause ? OP_PAUSE : OP_RESUME, id, NULL, 0) < 0) {
		s->st = pause ? SB_READY : SB_PAUSED;
		node_reply_msg(n, m, sbx_reply_fail(NULL, "node agent could not start a worker process"));
		return;
	}
	log_info("sandbox %s: %s (placement %s)", sid, pause ? "pausing" : "resuming", id);
	node_reply_msg(n, m, sbx_reply_ok());
}

/* The record to paused from pausing (a pause) or resuming (a resume undone). */
static void record_paused(struct node *n, const char *id)
{
	sbx_err err = SBX_ERR_INIT;
	int r = sbx_sandbox_paused(&n->db, id, "memory", &err);

	if (r == 0)
		r = sbx_sandbox_resume_undo(&n->db, id, &err);
	if (r < 0)
		log_warnx("sandbox %s: recording paused: %s", id, err.msg);
}

/* The record to ready from pausing (a pause undone) or resuming (a resume). */
static void record_ready(struct node *n, const char *id)
{
	sbx_err err = SBX_ERR_INIT;
	int r = sbx_sandbox_resumed(&n->db, id, &err);

	if (r == 0)
		r = sbx_sandbox_pause_undo(&n->db, id, &err);
	if (r < 0)
		log_warnx("sandbox %s: recording ready: %s", id, err.msg);
}

/* After a pause or resume (done or not): what the disk says. */
static void settle_one(struct node *n, struct sb *s, const char *why, bool may_spawn)
{
	char alive_why[200];
	sbx_err err = SBX_ERR_INIT;
	bool paused = sandbox_paused(&n->sc, s->id);
	/* A running container is the sandbox (sandbox_resume_finish: its
	 * channel reopened, a checkpoint beside it removed) when there is no
	 * checkpoint (a pause stopped between closing the channel and the
	 * checkpoint leaves the channel closed), and beside one when a resume
	 * restored but did not finish (a checkpoint stops its container): it
	 * has run since. After a pause (!may_spawn) the checkpoint is. */
	bool running = (!paused || may_spawn) && sandbox_alive(&n->sc, s->id, alive_why, sizeof(alive_why)) == 1;

	if (running && sandbox_resume_finish(&n->sc, s->id, &err) < 0) {
		log_warnx("sandbox %s: %s", s->id, err.msg);
		/* beside a checkpoint, a container whose channel cannot be
		 * reopened is removed by the (idempotent) pause */
		if (paused) {
			running = false;
			if (node_op_spawn(n, OP_PAUSE, s->id, NULL, 0) == 0) {
				s->st = SB_PAUSING;
				return;
			}
		}
	}
	if (running) {
		s->st = SB_READY;
		record_ready(n, s->sandbox_id);
	} else if (paused) {
		s->st = SB_PAUSED;
		record_paused(n, s->sandbox_id);
	} else {
		char reason[300];
		snprintf(reason, sizeof(reason), "%s, and the sandbox is neither running nor checkpointed", why);
		log_warnx("sandbox %s: %s", s->id, reason);
		mark_failed(n, s->sandbox_id, reason);
		destroy_local(n, s->id, NULL, reason);
		return;
	}
	log_info("sandbox %s: %s (%s)", s->id, s->st == SB_PAUSED ? "paused" : "ready", why);
	if (s->destroy_after_start)
		destroy_local(n, s->id, NULL, "destroyed while it paused or resumed");
}

void pause_done(struct node *n, struct op *o, bool ok, const char *msg)
{
	struct sb *s = sb_find(n, o->id);
	char why[400];

	if (!s)
		return;
	if (ok)
		snprintf(why, sizeof(why), "%s done", o->kind == OP_PAUSE ? "pause" : "resume");
	else {
		snprintf(why, sizeof(why), "%s failed: %s", o->kind == OP_PAUSE ? "pause" : "resume", msg);
		log_warnx("sandbox %s: %s", o->id, why);
	}
	/* a pause that ended with the container still there is not retried */
	settle_one(n, s, why, o->kind != OP_PAUSE);
}

void settle_pauses(struct node *n, bool at_start)
{
	cleanup_pgres PGresult *r = NULL;
	sbx_err err = SBX_ERR_INIT;
	char stuck[16];

	snprintf(stuck, sizeof(stuck), "%d", at_start ? 0 : STUCK_S);
	if (sbx_db_query(&n->db, &r, &err,
			 "SELECT placement_id FROM sandboxes WHERE node_id = $1 AND status IN ('pausing', 'resuming') "
			 "AND coalesce(transition_at, created_at) < now() - make_interval(secs => $2::int)",
			 2, n->node_id, stuck) < 0) {
		log_warnx("pause pass: %s", err.msg);
		return;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0);
		struct sb *s = sb_find(n, id);

		if (!s || node_op_find(n, id))
			continue; /* at work, or not here (the orphan pass owns that) */
		settle_one(n, s, at_start ? "interrupted by a node agent restart" : "its request was lost", true);
	}
}
