/* What the node agent checks periodically: each sandbox's sentry is alive
 * and its sbx-init answers (a stopped one is sent SIGCONT, then marked
 * failed), the OOM kills inside, leftovers no record owns, and this node's
 * registration (the templates it can run). Called from node.c's loop. */
#include "config.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "json.h"
#include "log.h"
#include "node_int.h"
#include "nomad_net.h"
#include "sandbox_state.h"
#include "stats.h"

/* ---- liveness and leftovers ---- */

void mark_failed(struct node *n, const char *sandbox_id, const char *why)
{
	sbx_err err = SBX_ERR_INIT;

	if (!sandbox_id[0])
		return; /* a pool member: no record */
	if (sbx_sandbox_fail(&n->db, sandbox_id, why, &err) < 0)
		log_warnx("sandbox %s: could not record failure (%s)", sandbox_id, err.msg);
}

/* The memory cgroup's OOM kill count, shown to the owner as oom_kills. */
void record_oom(struct node *n, struct sb *s)
{
	long oom = sandbox_oom_kills(s->id);
	sbx_err err = SBX_ERR_INIT;

	if (oom <= s->oom_kills || !s->sandbox_id[0])
		return;
	log_warnx("sandbox %s: out of memory: the OOM killer struck (%ld so far)", s->sandbox_id, oom);
	if (sbx_sandbox_oom_kills(&n->db, s->sandbox_id, oom, &err) == 0)
		s->oom_kills = oom;
}

/* SIGCONT to the sandbox's PID 1 (sbx-init) through runsc, in a child:
 * runsc asks the sentry, which may hang itself (the next pass kills it). */
static pid_t init_cont(struct node *n, const char *id)
{
	struct sandbox_paths p;
	char root[600];
	pid_t pid;

	sandbox_paths(&n->sc, id, &p);
	snprintf(root, sizeof(root), "--root=%s", p.runsc_root);
	pid = fork();
	if (pid < 0) {
		log_warn("fork");
		return 0;
	}
	if (pid == 0) {
		sigset_t none;
		int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execl(n->sc.runsc, n->sc.runsc, root, "kill", id, "CONT", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* A live sentry whose sbx-init does not answer its channel (stopped with
 * SIGSTOP, or hung): one missed PING gets it a SIGCONT, a second one
 * fails the sandbox -- unless the sandbox is busy: a sandbox at its CPU
 * limit (a dozen loops in one core) can leave sbx-init unscheduled for
 * seconds, and failing it then would destroy a working sandbox whose
 * owner is only using it. So while its cgroup's CPU time keeps growing
 * (the sentry runs), a miss gets another SIGCONT and a wait, up to
 * BUSY_GRACE_MS from the first miss; a sentry stopped from the host (no CPU
 * time known: sandbox_cpu_usec), or hung, fails at the second miss as
 * before. Only
 * sandboxes with a channel are asked. */
#define BUSY_GRACE_MS SANDBOX_BUSY_GRACE_MS
#define BUSY_MIN_USEC SANDBOX_BUSY_MIN_USEC

/* A test's fault points (fault_points on), per sandbox, each a file
 * state_dir/faults/NAME.SANDBOX_ID.armed:
 * - ping-deaf: that sandbox's answers to the liveness ping count as missed.
 *   A test that starves sbx-init from inside (`kill -STOP 1` in a loop)
 *   cannot make two misses in a row certain: between the node's SIGCONT and
 *   the loop's next stop, sbx-init may answer (CI, 2026-12-04); with this it
 *   meets the missed-ping paths at will, the sandbox's CPU time still its own.
 * - ping-skip: that sandbox is not pinged (nor sent SIGCONT): a test that
 *   stops sbx-init on purpose keeps it stopped until it says so. A liveness
 *   pass between the stop and the test's next step resumed it, by chance on
 *   a loaded machine (relay-restart.t e, CI 2026-12-04).
 * (fault_armed, sandbox.c, reads them.) */
static void check_init(struct node *n, struct sb *s)
{
	const char *why = "sbx-init stopped answering";
	int h;
	long long cpu, now;

	if (fault_armed(n->sc.fault_points, n->sc.state_dir, "ping-skip", s->sandbox_id))
		return;
	h = relay_ping(n->relay, s->id);
	if (h != 0 && fault_armed(n->sc.fault_points, n->sc.state_dir, "ping-deaf", s->sandbox_id))
		h = 0;

	if (h != 0) {
		if (s->init_missed)
			log_info("sandbox %s: sbx-init answers again", s->sandbox_id);
		s->init_missed = 0;
		return;
	}
	now = sbx_now_ms();
	cpu = sandbox_cpu_usec(&n->sc, s->id);
	if (!s->init_missed++) {
		log_warnx("sandbox %s: sbx-init did not answer a ping in %d ms; sending it SIGCONT (placement %s)",
			  s->sandbox_id, LIVENESS_MS, s->id);
		s->missed_at_ms = now;
	} else if (cpu < 0 || s->missed_cpu_usec < 0 || cpu - s->missed_cpu_usec < BUSY_MIN_USEC ||
		   now - s->missed_at_ms >= BUSY_GRACE_MS) {
		log_warnx("sandbox %s: %s (placement %s)", s->sandbox_id, why, s->id);
		if (s->cont_pid > 0)
			kill(s->cont_pid, SIGKILL); /* reaped by reap_children */
		relay_sandbox_gone(n->relay, s->id, "sandbox_unresponsive", why); /* relay */
		mark_failed(n, s->sandbox_id, why);
		destroy_local(n, s->id, NULL, why);
		return;
	} else if (s->init_missed == 2) {
		log_warnx("sandbox %s: sbx-init has not answered for %lld ms, but the sandbox runs (%lld ms of CPU "
			  "since); waiting up to %d s (placement %s)",
			  s->sandbox_id, now - s->missed_at_ms + LIVENESS_MS, (cpu - s->missed_cpu_usec) / 1000,
			  BUSY_GRACE_MS / 1000, s->id);
	}
	/* a miss that does not fail it: SIGCONT (again), and the CPU time the
	 * next miss compares with */
	s->missed_cpu_usec = cpu;
	if (!s->cont_pid)
		s->cont_pid = init_cont(n, s->id);
}

/* A frozen sandbox is looked at every FROZEN_PASSES passes only: nothing
 * in it runs, so it can neither exhaust its memory nor exit by itself (a
 * kill from outside is what is left to notice, in 20 s rather than 2), and
 * with a thousand idle sandboxes the five /proc and cgroup reads each, every
 * pass, were the node agent's idle CPU. A tenth of them each pass (by
 * slot), not all of them every tenth: a thousand held the loop 124 ms.
 *
 * A pass looks at a thousand running sandboxes in 100-400 ms (bench/density:
 * 17 passes over 100 ms, up to 362), and the loop serves nothing meanwhile:
 * so it goes in slices of at most LIVENESS_SLICE_MS, the loop's events
 * served between them. */
#define FROZEN_PASSES 10

bool check_liveness(struct node *n)
{
	static unsigned passes;
	static unsigned turn;
	long long t0 = sbx_now_ms();

	if (n->live_cursor == 0)
		turn = passes++ % FROZEN_PASSES;
	for (int i = n->live_cursor; i < MAX_SANDBOXES; i++) {
		struct sb *s = &n->sbs[i];
		char why[256] = "", msg[300];

		if (sbx_now_ms() - t0 >= LIVENESS_SLICE_MS) {
			n->live_cursor = i;
			return false;
		}
		if (s->st != SB_READY && s->st != SB_POOL)
			continue;
		if (s->idle.frozen && (unsigned)i % FROZEN_PASSES != turn)
			continue;
		if (sandbox_alive(&n->sc, s->id, why, sizeof(why)) != 0) {
			/* alive: a process inside may still have met the OOM killer */
			record_oom(n, s);
			/* a frozen sbx-init cannot answer; its sentry lives (idle.c);
			 * a ready sandbox's op is a snapshot, which freezes it too */
			if (!s->idle.frozen && !node_op_find(n, s->id))
				check_init(n, s);
			continue;
		}
		if (!why[0])
			snprintf(why, sizeof(why), "the sandbox stopped");
		log_warnx("sandbox %s: sentry is dead: %s (placement %s)", s->sandbox_id[0] ? s->sandbox_id : "(warm pool)",
			  why, s->id);
		/* the words a channel's EOF gives too (chan.c): which of the two
		 * notices first is chance */
		snprintf(msg, sizeof(msg), "the sandbox died: %s", why);
		relay_sandbox_gone(n->relay, s->id, "sandbox_dead", msg); /* relay */
		record_oom(n, s);
		mark_failed(n, s->sandbox_id, why);
		destroy_local(n, s->id, NULL, why);
	}
	n->live_cursor = 0;
	return true;
}

struct rows {
	PGresult *r;
	int col;
};

static int row_cmp(const void *a, const void *b, void *arg)
{
	const struct rows *x = arg;

	return strcmp(PQgetvalue(x->r, *(const int *)a, x->col), PQgetvalue(x->r, *(const int *)b, x->col));
}

/* In idx (n rows of r sorted by column col): the first position whose
 * row's column is not below key (n: none). */
static int row_find(PGresult *r, const int *idx, int n, int col, const char *key)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (strcmp(PQgetvalue(r, idx[mid], col), key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#define ORPHAN_DEEP_PASSES 6

/* Everything on this node that no live record owns goes. In-flight work
 * (a start or destroy process) is left alone; a live record whose sandbox
 * we do not track yet (agent restart) is adopted. */
void reap_orphans(struct node *n, bool at_start)
{
	char **ids = NULL;
	size_t nn = 0;
	sbx_err err = SBX_ERR_INIT;
	cleanup_pgres PGresult *recs = NULL;
	cleanup_free char *arr = NULL, *sarr = NULL;
	cleanup_free int *byp = NULL, *byid = NULL;
	size_t alen = 0, slen = 0;
	int nr = 0;
	static unsigned passes;

	/* The sandbox's directory is made first and removed last, so listing
	 * the state directory (with its mounts, loops and containers) finds
	 * every leftover of this node, and nothing of another instance's; the
	 * mounts and loop devices every ORPHAN_DEEP_PASSES passes, and at start */
	if (sandbox_list(&n->sc, at_start || passes++ % ORPHAN_DEEP_PASSES == 0, &ids, &nn, &err) < 0) {
		log_warnx("orphan pass: %s", err.msg);
		return;
	}
	/* every record in one query (a node with a thousand sandboxes did a
	 * thousand queries per pass): those of these placements, and those the
	 * placements we track serve; the ids are checked, so the array literals
	 * are plain letters and digits */
	arr = malloc(nn * (SBX_ID_LEN + 1) + 3);
	sarr = malloc(nn * (SBX_ID_LEN + 1) + 3);
	if (!arr || !sarr)
		goto out;
	arr[alen++] = '{';
	sarr[slen++] = '{';
	for (size_t i = 0; i < nn; i++) {
		struct sb *s;
		if (!sbx_id_valid(ids[i]))
			continue;
		alen += (size_t)sprintf(arr + alen, "%s%s", alen > 1 ? "," : "", ids[i]);
		if ((s = sb_find(n, ids[i])) && sbx_id_valid(s->sandbox_id))
			slen += (size_t)sprintf(sarr + slen, "%s%s", slen > 1 ? "," : "", s->sandbox_id);
	}
	arr[alen++] = '}';
	arr[alen] = 0;
	sarr[slen++] = '}';
	sarr[slen] = 0;
	if (sbx_db_query(&n->db, &recs, &err,
			 "SELECT id, status, memory_mb, disk_gb, coalesce(node_id, ''), placement_id FROM sandboxes "
			 "WHERE placement_id = ANY($1::bpchar[]) OR id = ANY($2::bpchar[])",
			 2, arr, sarr) < 0) {
		log_warnx("orphan pass: %s", err.msg);
		goto out; /* without the records, remove nothing */
	}
	/* the rows by placement and by id, for row_find (the pass compared
	 * every placement with every row: ~10^6 compares with a thousand) */
	nr = PQntuples(recs);
	byp = malloc(((size_t)nr + 1) * sizeof(*byp));
	byid = malloc(((size_t)nr + 1) * sizeof(*byid));
	if (!byp || !byid)
		goto out;
	for (int k = 0; k < nr; k++)
		byp[k] = byid[k] = k;
	qsort_r(byp, (size_t)nr, sizeof(*byp), row_cmp, &(struct rows){ recs, 5 });
	qsort_r(byid, (size_t)nr, sizeof(*byid), row_cmp, &(struct rows){ recs, 0 });
	for (size_t i = 0; i < nn; i++) {
		const char *id = ids[i];
		const char *st = "none";
		struct sb *s;
		bool keep = false;

		if (!sbx_id_valid(id) || node_op_find(n, id) || node_adopt_waiting(id))
			continue;
		s = sb_find(n, id);
		if (s && s->st != SB_READY)
			continue;
		/* a network Nomad had wired for a create still in flight (its
		 * record has no placement yet): past the create's bound it goes */
		if (!s && nomad_net_pending(&n->sc, id, (sbx_cfg_int(n->cfg, "start_timeout") + 30) * 1000))
			continue;
		/* the record that points at this placement, and the one it serves
		 * (while a start or a warm hand-over is being recorded, that one is
		 * still starting, and a warm one still names a placement of its own) */
		for (int j = row_find(recs, byp, nr, 5, id); j < nr && !keep && !strcmp(PQgetvalue(recs, byp[j], 5), id);
		     j++) {
			int k = byp[j];
			const char *rid = PQgetvalue(recs, k, 0), *rst = PQgetvalue(recs, k, 1);
			st = rst;
			if (sbx_sb_on_node(sbx_sb_status_parse(rst)) && !strcmp(PQgetvalue(recs, k, 4), n->node_id)) {
				/* a paused sandbox has no sentry: never the liveness check's */
				int sst = sbx_sb_status_parse(rst);
				enum sb_state ns = sst == SBX_SB_PAUSED	  ? SB_PAUSED
						   : sst == SBX_SB_PAUSING  ? SB_PAUSING
						   : sst == SBX_SB_RESUMING ? SB_RESUMING
									    : SB_READY;
				keep = true;
				if (!s && (s = sb_add(n, id, ns, atoi(PQgetvalue(recs, k, 2)),
						      atoi(PQgetvalue(recs, k, 3))))) {
					snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", rid);
					log_info("sandbox %s: adopted as placement %s (%s)", rid, id, rst);
					idle_ready(s, true);
					/* a snapshot's copy the old agent's death
					 * cut short may have left it paused */
					if (s->nomad && ns == SB_READY)
						sandbox_adopted_unfreeze(&n->sc, s->id, "after a node agent restart");
				}
			} else if (s && sbx_sb_status_parse(rst) == SBX_SB_STARTING) {
				/* started here, its ready not recorded yet: the
				 * record names the placement already (CI at
				 * f4c6932: a pass in that gap removed a sandbox
				 * the provisioner then recorded ready) */
				keep = true;
			}
		}
		if (!keep && s && s->sandbox_id[0]) {
			int j = row_find(recs, byid, nr, 0, s->sandbox_id);
			keep = j < nr && !strcmp(PQgetvalue(recs, byid[j], 0), s->sandbox_id) &&
			       sbx_sb_status_parse(PQgetvalue(recs, byid[j], 1)) == SBX_SB_STARTING;
		}
		if (keep)
			continue;
		log_info("placement %s: removing leftovers (record: %s)", id, st);
		destroy_local(n, id, NULL, "no live record owns it");
	}
	if (at_start) {
		/* live records of this node with nothing here: lost in a crash */
		cleanup_pgres PGresult *r = NULL;
		if (sbx_db_query(&n->db, &r, &err,
				 "SELECT id, placement_id FROM sandboxes WHERE node_id = $1 "
				 "AND status IN ('ready', 'pausing', 'paused', 'resuming')",
				 1, n->node_id) == 0) {
			for (int i = 0; i < PQntuples(r); i++) {
				const char *id = PQgetvalue(r, i, 0);
				if (!sb_find(n, PQgetvalue(r, i, 1))) {
					log_warnx("sandbox %s: not found on its node", id);
					mark_failed(n, id, "the sandbox was lost: its node no longer has it");
				}
			}
		}
	}
out:
	for (size_t i = 0; i < nn; i++)
		free(ids[i]);
	free(ids);
}

/* ---- what this node offers ---- */

/* Upserts this node's row (heartbeat, templates it has unpacked) and each
 * template's description from its image.json. */
void node_register(struct node *n)
{
	char dir[600];
	DIR *d;
	struct dirent *de;
	cleanup_json json_t *names = json_array();
	cleanup_free char *names_s = NULL;
	sbx_err err = SBX_ERR_INIT;

	snprintf(dir, sizeof(dir), "%s/templates", n->sc.state_dir);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		char path[1200];
		cleanup_json json_t *img = NULL;
		json_error_t jerr;
		const char *dn, *desc, *digest;
		cleanup_free char *aliases = NULL;
		json_t *al;

		if (de->d_name[0] == '.' || !template_name_ok(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s/current/image.json", dir, de->d_name);
		img = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
		if (!img)
			continue;
		dn = sbx_json_str(img, "display_name", de->d_name);
		desc = sbx_json_str(img, "description", "");
		digest = sbx_json_str(img, "digest", NULL);
		/* the other names its definition declares (templates/build) */
		al = json_object_get(img, "aliases");
		aliases = json_is_array(al) ? json_dumps(al, JSON_COMPACT) : NULL;
		if (sbx_db_query(&n->db, NULL, &err,
				 "INSERT INTO templates (name, display_name, description, digest, aliases, parent, version) "
				 "VALUES ($1, $2, $3, $4, ARRAY(SELECT x FROM jsonb_array_elements_text($5::jsonb) x "
				 "WHERE x ~ '^[a-z0-9][a-z0-9._-]{0,63}$'), $6, $7) "
				 "ON CONFLICT (name) DO UPDATE SET display_name = $2, description = $3, digest = $4, "
				 "aliases = EXCLUDED.aliases, parent = $6, version = $7",
				 7, de->d_name, dn, desc, digest, aliases ? aliases : "[]", sbx_json_str(img, "parent", ""),
				 sbx_json_str(img, "version", "")) < 0) {
			log_warnx("registering template %s: %s", de->d_name, err.msg);
			continue;
		}
		json_array_append_new(names, json_string(de->d_name));
	}
	if (d)
		closedir(d);
	names_s = json_dumps(names, JSON_COMPACT);
	if (sbx_db_query(&n->db, NULL, &err,
			 "INSERT INTO nodes (id, templates, heartbeat_at) "
			 "VALUES ($1, ARRAY(SELECT jsonb_array_elements_text($2::jsonb)), now()) "
			 "ON CONFLICT (id) DO UPDATE SET templates = EXCLUDED.templates, heartbeat_at = now()",
			 2, n->node_id, names_s) < 0)
		log_warnx("registering node: %s", err.msg);
}

