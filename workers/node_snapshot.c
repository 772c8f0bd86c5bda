/* The node agent's side of snapshots (API.md "Snapshots"): the request is
 * taken on at once and done by a short-lived process (sandbox_snapshot,
 * snapshot.c) while the sandbox goes on serving; the process's end moves
 * the record from creating to ready or failed. A snapshot whose process
 * never ended (the agent was killed) is failed from here: at the agent's
 * start every creating snapshot of this node is (its process died with the
 * agent), later those that no process works on. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include "cleanup.h"
#include "cron.h"
#include "freezer.h"
#include "host.h"
#include "log.h"
#include "node_int.h"
#include "reply.h"

/* longer than any snapshot's copy and push take (snapshot.c's timeouts) */
#define STUCK_S 1800

void node_snapshot_init(struct node *n)
{
	const char *s = sbx_cfg_str(n->cfg, "snapshot_helper"), *reg = sbx_cfg_str(n->cfg, "registry_url");
	char self[512];
	ssize_t l;

	/* the registry as HOST:PORT (the helper insists on loopback) */
	if (!strncmp(reg, "http://", 7))
		reg += 7;
	snprintf(n->registry, sizeof(n->registry), "%s", reg);
	n->registry[strcspn(n->registry, "/")] = 0;
	if (s[0]) {
		snprintf(n->snap_helper, sizeof(n->snap_helper), "%s", s);
		return;
	}
	/* beside sbx-worker: the build tree, or an install's libexec */
	l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (l > 0) {
		char *slash;
		self[l] = 0;
		if ((slash = strrchr(self, '/'))) {
			*slash = 0;
			snprintf(n->snap_helper, sizeof(n->snap_helper), "%s/sbx-snapshot", self);
			if (access(n->snap_helper, X_OK) == 0)
				return;
			snprintf(n->snap_helper, sizeof(n->snap_helper), "%s/../libexec/sbx/sbx-snapshot", self);
			if (access(n->snap_helper, X_OK) == 0)
				return;
		}
	}
	snprintf(n->snap_helper, sizeof(n->snap_helper), "/usr/libexec/sbx/sbx-snapshot");
}

int node_snapshot_run(struct node *n, const char *id, const char *snap_id, char *out, size_t outsz, sbx_err *err)
{
	struct sandbox_snapshot_req rq = { .snapshot_id = snap_id, .registry = n->registry, .helper = n->snap_helper };
	char digest[80];
	long long bytes = 0;

	if (sandbox_snapshot(&n->sc, id, &rq, digest, sizeof(digest), &bytes, err) < 0)
		return -1;
	snprintf(out, outsz, " %s %lld", digest, bytes);
	return 0;
}

void on_snapshot(struct node *n, const sbx_mq_msg *m, json_t *body)
{
	const char *id = NULL, *sid = NULL, *snap = NULL;
	json_error_t jerr;
	struct sb *s;
	char why[300];

	if (json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s, s:s, s:s}", "sandbox_id", &sid, "placement_id", &id,
			   "snapshot_id", &snap) < 0 ||
	    !sbx_id_valid(id) || !sbx_id_valid(sid) || !sbx_id_valid(snap)) {
		log_warnx("rejecting a malformed snapshot request");
		node_reply_msg(n, m, sbx_reply_fail(NULL, "malformed request"));
		return;
	}
	if (!(s = node_changeable(n, m, id, sid)))
		return;
	if (s->st != SB_READY) {
		node_reply_msg(n, m, sbx_reply_fail("bad_state", "the sandbox is not ready on the node"));
		return;
	}
	if (node_disk_admit(n, why, sizeof(why)) < 0) {
		/* its copy is written on this disk first */
		log_warnx("sandbox %s: snapshot %s refused: %s", sid, snap, why);
		node_reply_msg(n, m, sbx_reply_fail("no_capacity", why));
		return;
	}
	/* its sync runs inside, which a frozen sentry never answers */
	if (idle_frozen(n, id) && idle_thaw(n, id) < 0) {
		node_reply_msg(n, m, sbx_reply_fail(NULL, "the sandbox could not be thawed for its snapshot"));
		return;
	}
	if (node_op_spawn_snapshot(n, id, snap) < 0) {
		node_reply_msg(n, m, sbx_reply_fail(NULL, "node agent could not start a worker process"));
		return;
	}
	log_info("sandbox %s: snapshot %s begun (placement %s)", sid, snap, id);
	node_reply_msg(n, m, sbx_reply_ok());
}

static void record(struct node *n, const char *snap, bool ok, const char *digest, const char *bytes, const char *why)
{
	sbx_err err = SBX_ERR_INIT;
	int r;

	if (ok)
		r = sbx_db_query(&n->db, NULL, &err,
				 "UPDATE snapshots SET status = 'ready', image_digest = $2, size_bytes = $3::bigint, "
				 "updated_at = now() WHERE id = $1 AND status = 'creating'",
				 3, snap, digest, bytes);
	else
		r = sbx_db_query(&n->db, NULL, &err,
				 "UPDATE snapshots SET status = 'failed', failure_reason = $2, updated_at = now() "
				 "WHERE id = $1 AND status = 'creating'",
				 2, snap, why);
	if (r < 0)
		log_warnx("snapshot %s: recording %s: %s", snap, ok ? "ready" : "failed", err.msg);
}

/* After an automatic snapshot of sandbox_id is ready: its automatic
 * snapshots beyond snapshot_auto_keep (the oldest) go, image first. */
static void prune_automatic(struct node *n, const char *snap)
{
	cleanup_pgres PGresult *r = NULL;
	sbx_err err = SBX_ERR_INIT;
	char keep[16];

	snprintf(keep, sizeof(keep), "%lld", sbx_cfg_int(n->cfg, "snapshot_auto_keep"));
	if (sbx_db_query(&n->db, &r, &err,
			 "SELECT p.id, coalesce(p.image_repo || '@' || p.image_digest, '') FROM snapshots p "
			 "WHERE p.automatic AND p.status <> 'creating' AND p.sandbox_id = "
			 "  (SELECT sandbox_id FROM snapshots WHERE id = $1 AND automatic) "
			 "ORDER BY p.created_at DESC, p.id DESC OFFSET $2::int",
			 2, snap, keep) < 0) {
		log_warnx("snapshot %s: pruning: %s", snap, err.msg);
		return;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0), *image = PQgetvalue(r, i, 1);
		cleanup_host_out struct host_out ho = { 0 };
		const char *argv[] = { n->snap_helper, "delete", "--registry", n->registry, "--image", image, NULL };
		struct host_run_opts ro = HOST_RUN_OPTS("snapshot");

		ro.timeout_ms = 20000;
		if (image[0] && host_run_ok("sbx-snapshot delete", argv, &ro, &ho, &err) < 0) {
			log_warnx("snapshot %s: pruning: %s (kept; the next one tries again)", id, err.msg);
			continue;
		}
		if (sbx_db_query(&n->db, NULL, &err, "DELETE FROM snapshots WHERE id = $1", 1, id) < 0)
			log_warnx("snapshot %s: pruning: %s", id, err.msg);
		else
			log_info("snapshot %s: pruned (automatic, past snapshot_auto_keep)", id);
	}
}

void snapshot_done(struct node *n, struct op *o, bool ok, const char *msg)
{
	struct sb *s = sb_find(n, o->id);
	const char *snap = o->reason; /* an OP_SNAPSHOT's reason is its snapshot id */
	char digest[80] = "", bytes[24] = "";

	if (ok && sscanf(o->buf, "OK %79s %23s", digest, bytes) != 2) {
		ok = false;
		msg = "the snapshot process gave no digest";
	}
	if (ok)
		log_info("snapshot %s: ready (%s, layer of %s bytes)", snap, digest, bytes);
	else {
		/* a process that died mid-way may have left the sandbox frozen
		 * and its copy behind */
		char work[600];
		const char *argv[] = { "rm", "-rf", "--one-file-system", work, NULL };
		cleanup_host_out struct host_out ho = { 0 };
		sbx_err err = SBX_ERR_INIT;

		log_warnx("snapshot %s: failed: %s", snap, msg);
		if (s && s->nomad) /* Docker may hold its container paused (adopt.c) */
			sandbox_adopted_unfreeze(&n->sc, o->id, "after a failed snapshot");
		else if (s && !s->idle.frozen && sandbox_freeze_state(o->id) > SANDBOX_THAWED &&
			 sandbox_thaw(o->id, &err) < 0)
			log_warnx("sandbox %s: thaw after a failed snapshot: %s", o->id, err.msg);
		sandbox_snapshot_workdir(&n->sc, snap, work, sizeof(work));
		if (host_run_ok("rm", argv, NULL, &ho, &err) < 0)
			log_warnx("snapshot %s: removing its files: %s", snap, err.msg);
	}
	record(n, snap, ok, digest, bytes, msg);
	if (ok)
		prune_automatic(n, snap);
	if (s && s->destroy_after_start)
		destroy_local(n, s->id, NULL, "destroyed while it was snapshotted");
}

/* Sandboxes of this node with snapshotMode automatic: the first due time
 * is computed from the schedule; a due one is snapshotted (unless something
 * else is in flight on it: the next pass tries again) and its next time
 * set. */
static void schedule_automatic(struct node *n)
{
	cleanup_pgres PGresult *r = NULL;
	sbx_err err = SBX_ERR_INIT;
	time_t now = time(NULL);

	if (sbx_db_query(&n->db, &r, &err,
			 "SELECT id, placement_id, snapshot_frequency, template, next_snapshot_at IS NOT NULL, "
			 "  coalesce(next_snapshot_at <= now(), false) "
			 "FROM sandboxes WHERE node_id = $1 AND status = 'ready' AND snapshot_mode = 'automatic' "
			 "AND snapshot_frequency IS NOT NULL AND (next_snapshot_at IS NULL OR next_snapshot_at <= now())",
			 1, n->node_id) < 0) {
		log_warnx("automatic snapshots: %s", err.msg);
		return;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		const char *sid = PQgetvalue(r, i, 0), *place = PQgetvalue(r, i, 1), *freq = PQgetvalue(r, i, 2);
		bool due = PQgetvalue(r, i, 5)[0] == 't';
		struct sb *s = sb_find(n, place);
		char next[24], snap[SBX_ID_LEN + 1], repo[64], name[48];
		struct tm tm;
		sbx_cron cron;
		time_t t;

		if (sbx_cron_parse(freq, &cron, &err) < 0 || (t = sbx_cron_next(&cron, now)) < 0) {
			log_warnx("sandbox %s: snapshot_frequency '%s': %s", sid, freq, err.msg);
			continue;
		}
		snprintf(next, sizeof(next), "%lld", (long long)t);
		if (due) {
			char why[300];
			if (node_disk_admit(n, why, sizeof(why)) < 0)
				continue; /* due still: taken once there is room */
			if (!s || s->pool || s->st != SB_READY || strcmp(s->sandbox_id, sid) || node_op_find(n, place))
				continue; /* busy (or not ours yet): due still, the next pass tries */
			if (idle_frozen(n, place) && idle_thaw(n, place) < 0)
				continue;
			sbx_id_new(snap);
			snprintf(repo, sizeof(repo), "sbx/snapshots/%s", snap);
			gmtime_r(&now, &tm);
			strftime(name, sizeof(name), "auto-%Y%m%d-%H%M", &tm);
			if (sbx_db_query(&n->db, NULL, &err,
					 "INSERT INTO snapshots (id, org_id, sandbox_id, name, source_template, node_id, "
					 "image_repo, automatic) SELECT $1, org_id, id, $3, template, $4, $5, true "
					 "FROM sandboxes WHERE id = $2",
					 5, snap, sid, name, n->node_id, repo) < 0) {
				log_warnx("sandbox %s: automatic snapshot: %s", sid, err.msg);
				continue;
			}
			if (node_op_spawn_snapshot(n, place, snap) < 0) {
				record(n, snap, false, NULL, NULL, "node agent could not start a worker process");
				continue;
			}
			log_info("sandbox %s: automatic snapshot %s begun", sid, snap);
		}
		if (sbx_db_query(&n->db, NULL, &err,
				 "UPDATE sandboxes SET next_snapshot_at = to_timestamp($2::bigint) WHERE id = $1", 2, sid,
				 next) < 0)
			log_warnx("sandbox %s: next automatic snapshot: %s", sid, err.msg);
	}
}

void settle_snapshots(struct node *n, bool at_start)
{
	cleanup_pgres PGresult *r = NULL;
	sbx_err err = SBX_ERR_INIT;
	char stuck[16];

	if (at_start) {
		/* no snapshot process outlives the agent (PDEATHSIG): what they
		 * left is nobody's */
		char work[600];
		const char *argv[] = { "rm", "-rf", "--one-file-system", work, NULL };
		cleanup_host_out struct host_out ho = { 0 };
		sandbox_snapshot_workdir(&n->sc, NULL, work, sizeof(work));
		if (host_run_ok("rm", argv, NULL, &ho, &err) < 0)
			log_warnx("snapshot leftovers: %s", err.msg);
	}
	snprintf(stuck, sizeof(stuck), "%d", at_start ? 0 : STUCK_S);
	if (sbx_db_query(&n->db, &r, &err,
			 "SELECT id FROM snapshots WHERE node_id = $1 AND status = 'creating' "
			 "AND created_at < now() - make_interval(secs => $2::int)",
			 2, n->node_id, stuck) < 0) {
		log_warnx("snapshot pass: %s", err.msg);
		return;
	}
	if (!at_start)
		schedule_automatic(n);
	for (int i = 0; i < PQntuples(r); i++) {
		const char *snap = PQgetvalue(r, i, 0);
		bool working = false;
		for (struct op *o = n->ops; o; o = o->next)
			working |= o->kind == OP_SNAPSHOT && !strcmp(o->reason, snap);
		if (working)
			continue;
		record(n, snap, false, NULL, NULL,
		       at_start ? "interrupted by a node agent restart" : "its snapshot process was lost");
	}
}
