/* The warm pool (issue 10): a node starts a few sandboxes ahead, per
 * template, with the default specs (settings warm_pool_*), so a create that
 * asks for exactly that is handed one that already runs and answers at once.
 *
 * - A member is a whole sandbox of its own placement id (sb->pool, state
 *   SB_POOL); no record points at it and no organisation pays for it. It
 *   counts against the node's capacity when the pool refills, but never
 *   holds up a create: a create starts without counting members, and
 *   pool_trim gives back the room afterwards.
 * - A member is handed to one create and stops being a member: the record
 *   points at its placement from then on. It is never given back: a
 *   destroy destroys it, so nothing of one tenant is seen by the next.
 * - Refills start one member at a time and never while any start is in
 *   flight (a create's start first); a failed one backs off.
 * - Members are listed in the warm_pool table (sql/007_placement.sql) for
 *   operators and leftover checks; a member that is stale (its template
 *   was updated, the settings changed), dead, or beyond the pool's size is
 *   destroyed.
 * - A reload replaces the node agent (SIGHUP: daemon.c restarts its
 *   children with the new config). Its waiting members are handed over,
 *   not thrown away: the agent marks each (HANDOVER in its directory) and
 *   exits SBX_EXIT_HANDED_OVER, and its successor takes over the marked
 *   ones that are still listed, pointed at by no record, alive and made
 *   as this node makes them now (pool_adopt; stale ones go as usual).
 *   The marks are written only once the agent takes no more messages, so
 *   a member handed to a create is never marked, and a mark is consumed
 *   when read. Booting the pool again at every reload cost a sandbox
 *   start per member (~1.2 s of CPU each, doc/testing.md).
 * - After any other end of an agent (a crash, kill -9) its members are
 *   leftovers with no record and no mark: the orphan pass removes them. A
 *   drain (SIGTERM) destroys them, and a successor the master starts in a
 *   drain destroys what was handed to it.
 * - A member is frozen once idle like any sandbox (idle.c: its sentry costs
 *   no CPU while it waits) and thawed at its hand-over. */
#include "config.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "daemon.h"
#include "id.h"
#include "json.h"
#include "log.h"
#include "idle.h"
#include "node_int.h"

#define POOL_SCAN_MS 250      /* how often the pool looks for what to refill */
#define HANDOVER "pool-handover" /* in a member's directory: left for the next agent */
#define POOL_BACKOFF_MS 10000 /* after a member failed to start */

static long long next_scan;
static bool reset_done;

static int cfg_i(struct node *n, const char *name)
{
	return (int)sbx_cfg_int(n->cfg, name);
}

/* Does this template have a pool (warm_pool_templates; empty: every one)? */
static bool template_pooled(struct node *n, const char *tmpl)
{
	const char *list = sbx_cfg_str(n->cfg, "warm_pool_templates");
	size_t l = strlen(tmpl);

	if (!list[0])
		return true;
	for (const char *p = list; *p;) {
		size_t k;
		while (*p == ',' || *p == ' ')
			p++;
		k = strcspn(p, ", ");
		if (k == l && !strncmp(p, tmpl, l))
			return true;
		p += k;
	}
	return false;
}

/* The template's version now: where its `current` link points ("" none). */
static void template_version(struct node *n, const char *tmpl, char *out, size_t outsz)
{
	char path[700];
	ssize_t l;

	snprintf(path, sizeof(path), "%s/templates/%s/current", n->sc.state_dir, tmpl);
	l = readlink(path, out, outsz - 1);
	out[l > 0 ? l : 0] = 0;
}

/* A member still what a create of its template would get from a cold start. */
static bool member_fresh(struct node *n, const struct sb *s)
{
	char v[128];

	if (cfg_i(n, "warm_pool_size") <= 0 || !template_pooled(n, s->template) || s->cpu != cfg_i(n, "warm_pool_cpu") ||
	    s->memory_mb != cfg_i(n, "warm_pool_memory_mb") || s->disk_gb != cfg_i(n, "warm_pool_disk_gb"))
		return false;
	template_version(n, s->template, v, sizeof(v));
	return v[0] && !strcmp(v, s->tmpl_version);
}

static void drop(struct node *n, struct sb *s, const char *why)
{
	log_info("warm pool: removing placement %s (%s): %s", s->id, s->template, why);
	destroy_local(n, s->id, NULL, why); /* forgets it (pool_forget) */
}

/* The hand-over: placement s becomes sandbox sid's, for good. Whatever the
 * create asked for that the member does not have yet is applied here,
 * before the reply, so nobody reaches it half made:
 *  - who it serves: from now on the relay lets only sid's requests reach
 *    it (relay_state), and a destroy must name sid;
 *  - env, metadata, timeouts, idle and lifetime limits are the record's:
 *    the API gives the env with every exec and the reaper reads the
 *    timeouts, so the record's ready (with this placement) applies them;
 *  - cpu, memory, disk and the process limit derived from memory are the
 *    member's own and equal the request's (pool_take matched them);
 *  - network policy: a member is born deny_all (default drop, no allow
 *    rules), and only a deny_all create is handed one (node_start.c); any
 *    other policy takes the cold path, where the start process puts it in
 *    force before the container runs (never a looser policy for a moment);
 *  - idle: it is busy from now (idle.c), not idle since its own start. */
static int hand_over(struct node *n, struct sb *s, const char *sid)
{
	/* a member waits frozen (idle.c): it runs again before anyone sees it */
	if (idle_thaw(n, s->id) < 0)
		return -1;
	pool_forget(n, s);
	snprintf(s->sandbox_id, sizeof(s->sandbox_id), "%s", sid);
	s->st = SB_READY;
	idle_ready(s, false);
	return 0;
}

int pool_take(struct node *n, const sbx_mq_msg *m, const char *sandbox_id, const char *tmpl, int cpu, int mem,
	      int disk)
{
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct sb *s = &n->sbs[i];
		char why[256] = "";

		if (s->st != SB_POOL || !s->pool || strcmp(s->template, tmpl) || s->cpu != cpu || s->memory_mb != mem ||
		    s->disk_gb != disk)
			continue;
		if (!member_fresh(n, s)) {
			drop(n, s, "stale: its template or the pool's settings changed");
			continue;
		}
		if (sandbox_alive(&n->sc, s->id, why, sizeof(why)) == 0) {
			drop(n, s, why[0] ? why : "its sentry is dead");
			continue;
		}
		if (hand_over(n, s, sandbox_id) < 0) {
			drop(n, s, "the hand-over failed");
			continue;
		}
		log_info("sandbox %s: warm start: handed placement %s (%s, %d MB, %d GB)", sandbox_id, s->id, tmpl, mem,
			 disk);
		node_reply(n, m->reply_to, m->correlation_id,
			   json_pack("{s:b, s:s, s:s}", "ok", 1, "container_id", s->id, "placement_id", s->id));
		return 1;
	}
	return 0;
}

void pool_forget(struct node *n, struct sb *s)
{
	sbx_err err = SBX_ERR_INIT;

	if (!s->pool)
		return;
	s->pool = false;
	if (sbx_db_query(&n->db, NULL, &err, "DELETE FROM warm_pool WHERE placement_id = $1", 1, s->id) < 0)
		log_warnx("warm pool: placement %s: %s (the next agent start removes the row)", s->id, err.msg);
}

/* The rows of this node but for our members': {id,...} of those. */
static char *members_array(struct node *n)
{
	char *a = malloc((size_t)MAX_SANDBOXES * (SBX_ID_LEN + 1) + 3);
	size_t l = 0;

	if (!a)
		return NULL;
	a[l++] = '{';
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (n->sbs[i].st != SB_FREE && n->sbs[i].pool && sbx_id_valid(n->sbs[i].id))
			l += (size_t)sprintf(a + l, "%s%s", l > 1 ? "," : "", n->sbs[i].id);
	a[l++] = '}';
	a[l] = 0;
	return a;
}

void pool_reset(struct node *n)
{
	sbx_err err = SBX_ERR_INIT;
	cleanup_free char *keep = members_array(n);

	if (!keep || sbx_db_query(&n->db, NULL, &err,
				  "DELETE FROM warm_pool WHERE node_id = $1 AND placement_id <> ALL($2::bpchar[])", 2,
				  n->node_id, keep) < 0) {
		log_warnx("warm pool: %s (retried)", keep ? err.msg : "out of memory");
		return;
	}
	reset_done = true;
}

void pool_drop_all(struct node *n)
{
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (n->sbs[i].st != SB_FREE && n->sbs[i].pool && !node_op_find(n, n->sbs[i].id))
			destroy_local(n, n->sbs[i].id, NULL, "the node agent stops");
}

int pool_hand_over(struct node *n)
{
	int left = 0;

	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct sb *s = &n->sbs[i];
		struct sandbox_paths p;
		char path[600];
		int fd;

		if (s->st != SB_POOL || !s->pool)
			continue;
		sandbox_paths(&n->sc, s->id, &p);
		snprintf(path, sizeof(path), "%s/" HANDOVER, p.dir);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0) {
			log_warn("warm pool: marking placement %s for the next node agent", s->id);
			continue; /* unmarked, the next agent's orphan pass removes it */
		}
		close(fd);
		left++;
	}
	if (left)
		log_info("warm pool: %d member%s left running for the next node agent", left, left == 1 ? "" : "s");
	return left;
}

/* Placement id as its predecessor made it, as this node makes members now
 * (its template's digest in *version); why not in why. */
static bool made_as_member(struct node *n, const char *id, const char *tmpl, int cpu, int mem, int disk,
			   char *version, size_t vsz, char *why, size_t whysz)
{
	struct sandbox_paths p;
	char path[600];
	json_t *j;
	const char *digest, *up, *t, *now_up = n->net.uplink_netns ? n->net.uplink_netns : "";

	sandbox_paths(&n->sc, id, &p);
	snprintf(path, sizeof(path), "%s/sandbox.json", p.dir);
	j = json_load_file(path, 0, NULL);
	if (!j) {
		snprintf(why, whysz, "no sandbox.json");
		return false;
	}
	t = json_string_value(json_object_get(j, "template"));
	digest = json_string_value(json_object_get(j, "template_digest"));
	up = json_string_value(json_object_get(j, "uplink_netns"));
	/* a member has no env and no image of a snapshot; its network lives
	 * where this agent makes networks (net_uplink_netns) */
	if (!t || strcmp(t, tmpl) || !digest || strncmp(digest, "sha256:", 7))
		snprintf(why, whysz, "its template is not %s's", tmpl);
	else if (!up || strcmp(up, now_up))
		snprintf(why, whysz, "its network is in uplink '%s', this node's is '%s' now", up ? up : "?", now_up);
	else if (json_integer_value(json_object_get(j, "cpu")) != cpu ||
		 json_integer_value(json_object_get(j, "memory_mb")) != mem ||
		 json_integer_value(json_object_get(j, "disk_gb")) != disk)
		snprintf(why, whysz, "its specs are not the ones listed");
	else if (json_object_get(j, "image") || json_array_size(json_object_get(j, "env")))
		snprintf(why, whysz, "it has an image or an environment of its own");
	else
		why[0] = 0;
	if (!why[0])
		snprintf(version, vsz, "%s", digest + 7);
	json_decref(j);
	return !why[0];
}

void pool_adopt(struct node *n)
{
	cleanup_pgres PGresult *r = NULL;
	sbx_err err = SBX_ERR_INIT;
	int kept = 0;

	if (sbx_db_query(&n->db, &r, &err,
			 "SELECT w.placement_id, w.template, w.cpu, w.memory_mb, w.disk_gb FROM warm_pool w "
			 "WHERE w.node_id = $1 AND NOT EXISTS (SELECT 1 FROM sandboxes s WHERE s.placement_id = w.placement_id)",
			 1, n->node_id) < 0) {
		/* nothing taken over: the orphan pass removes them */
		log_warnx("warm pool: taking over the members left: %s", err.msg);
		return;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0), *tmpl = PQgetvalue(r, i, 1);
		int cpu = atoi(PQgetvalue(r, i, 2)), mem = atoi(PQgetvalue(r, i, 3)), disk = atoi(PQgetvalue(r, i, 4));
		struct sandbox_paths p;
		char path[600], version[128], why[256];
		struct sb *s;

		if (!sbx_id_valid(id) || !template_name_ok(tmpl) || sb_find(n, id))
			continue;
		/* only what a predecessor marked at its replaced stop, once */
		sandbox_paths(&n->sc, id, &p);
		snprintf(path, sizeof(path), "%s/" HANDOVER, p.dir);
		if (unlink(path) < 0)
			continue;
		if (!made_as_member(n, id, tmpl, cpu, mem, disk, version, sizeof(version), why, sizeof(why))) {
			log_info("warm pool: placement %s: not made as this node makes members now (%s); removed", id, why);
			continue;
		}
		if (sandbox_alive(&n->sc, id, why, sizeof(why)) != 1) {
			log_info("warm pool: placement %s: %s; removed", id, why[0] ? why : "not alive");
			continue;
		}
		s = sb_add(n, id, SB_POOL, mem, disk);
		if (!s)
			continue;
		s->pool = true;
		s->cpu = cpu;
		snprintf(s->template, sizeof(s->template), "%s", tmpl);
		snprintf(s->tmpl_version, sizeof(s->tmpl_version), "%s", version);
		idle_ready(s, true);
		kept++;
	}
	if (PQntuples(r))
		log_info("warm pool: %d member%s taken over from the node agent before", kept, kept == 1 ? "" : "s");
	pool_reset(n); /* the other rows go; their placements are the orphan pass's */
}

void pool_started(struct node *n, struct sb *s, bool ok, const char *msg)
{
	sbx_err err = SBX_ERR_INIT;

	if (!ok) {
		log_warnx("warm pool: placement %s (%s) did not start: %s", s->id, s->template, msg);
		s->st = SB_FREE;
		n->pool_retry_at = sbx_now_ms() + POOL_BACKOFF_MS;
		return;
	}
	s->st = SB_POOL;
	idle_ready(s, false);
	if (s->destroy_after_start) {
		drop(n, s, "the node needs its room");
		return;
	}
	/* started while this agent stops: it goes like the others did (the
	 * next agent may build its network elsewhere, net_uplink_netns, and
	 * could not take this one's down) */
	if (sbx_child_stop) {
		drop(n, s, "the node agent stops");
		return;
	}
	{
		char cpu[16], mem[16], disk[16];
		snprintf(cpu, sizeof(cpu), "%d", s->cpu);
		snprintf(mem, sizeof(mem), "%d", s->memory_mb);
		snprintf(disk, sizeof(disk), "%d", s->disk_gb);
		if (sbx_db_query(&n->db, NULL, &err,
				 "INSERT INTO warm_pool (placement_id, node_id, template, cpu, memory_mb, disk_gb) "
				 "VALUES ($1, $2, $3, $4::int, $5::int, $6::int)",
				 6, s->id, n->node_id, s->template, cpu, mem, disk) < 0) {
			/* unlisted, it would look like a leftover: not kept */
			log_warnx("warm pool: listing placement %s: %s", s->id, err.msg);
			n->pool_retry_at = sbx_now_ms() + POOL_BACKOFF_MS;
			drop(n, s, "it could not be listed");
			return;
		}
	}
	log_info("warm pool: placement %s ready (%s)", s->id, s->template);
}

/* More sandboxes or memory promised than the node may hold (those being
 * destroyed, and members that will be once started, not counted). */
static bool over_capacity(struct node *n)
{
	long long mem = 0;
	int count = 0;

	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct sb *s = &n->sbs[i];
		if (s->st == SB_FREE || s->st == SB_DESTROYING || (s->pool && s->destroy_after_start))
			continue;
		count++;
		mem += s->memory_mb;
	}
	return count > cfg_i(n, "node_max_sandboxes") || mem > node_mem_cap(n);
}

void pool_trim(struct node *n)
{
	/* members give way while the node holds more than it may (one still
	 * starting is dropped when its start ends) */
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct sb *s = &n->sbs[i];

		if (!s->pool || s->destroy_after_start || (s->st != SB_POOL && s->st != SB_STARTING))
			continue;
		if (!over_capacity(n))
			return;
		if (s->st == SB_STARTING)
			s->destroy_after_start = true;
		else
			drop(n, s, "a create needs its room");
	}
}

/* One member of tmpl, if the node has room for it. */
static void start_member(struct node *n, const char *tmpl)
{
	struct sandbox_spec spec;
	static const char *const no_env[] = { NULL };
	char why[300];
	struct sb *s;

	memset(&spec, 0, sizeof(spec));
	spec.template = tmpl;
	spec.cpu = cfg_i(n, "warm_pool_cpu");
	spec.memory_mb = cfg_i(n, "warm_pool_memory_mb");
	spec.disk_gb = cfg_i(n, "warm_pool_disk_gb");
	spec.env = no_env;
	if (node_admit(n, spec.memory_mb, spec.disk_gb, true, why, sizeof(why)) < 0)
		return; /* members use only the room nothing else needs */
	sbx_id_new(spec.id);
	s = sb_add(n, spec.id, SB_STARTING, spec.memory_mb, spec.disk_gb);
	if (!s)
		return;
	s->pool = true;
	s->cpu = spec.cpu;
	snprintf(s->template, sizeof(s->template), "%s", tmpl);
	template_version(n, tmpl, s->tmpl_version, sizeof(s->tmpl_version));
	if (!s->tmpl_version[0] || node_start_op(n, &spec, NULL, true) < 0) {
		s->st = SB_FREE;
		n->pool_retry_at = sbx_now_ms() + POOL_BACKOFF_MS;
		return;
	}
	log_info("warm pool: starting placement %s (%s, %d MB, %d GB)", spec.id, tmpl, spec.memory_mb, spec.disk_gb);
}

void pool_tick(struct node *n)
{
	long long now = sbx_now_ms();
	int size = cfg_i(n, "warm_pool_size");
	char dir[600];
	DIR *d;
	struct dirent *de;

	if (sbx_child_stop || now < next_scan)
		return;
	next_scan = now + POOL_SCAN_MS;
	if (!reset_done) {
		pool_reset(n);
		if (!reset_done)
			return;
	}
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (n->sbs[i].st == SB_POOL && n->sbs[i].pool && !member_fresh(n, &n->sbs[i]))
			drop(n, &n->sbs[i], "stale: its template or the pool's settings changed");
	if (size <= 0 || now < n->pool_retry_at)
		return;
	/* requests first: no refill while any start runs */
	for (struct op *o = n->ops; o; o = o->next)
		if (o->kind == OP_START)
			return;
	snprintf(dir, sizeof(dir), "%s/templates", n->sc.state_dir);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		int have = 0;

		if (de->d_name[0] == '.' || !template_name_ok(de->d_name) || !template_pooled(n, de->d_name))
			continue;
		for (int i = 0; i < MAX_SANDBOXES; i++) {
			struct sb *s = &n->sbs[i];
			if (s->pool && (s->st == SB_POOL || s->st == SB_STARTING) && !strcmp(s->template, de->d_name))
				have++;
		}
		/* a smaller pool size: the extra members go */
		for (int i = 0; have > size && i < MAX_SANDBOXES; i++) {
			struct sb *s = &n->sbs[i];
			if (s->pool && s->st == SB_POOL && !strcmp(s->template, de->d_name)) {
				drop(n, s, "the pool is smaller now");
				have--;
			}
		}
		if (have < size) {
			start_member(n, de->d_name);
			break; /* one start at a time */
		}
	}
	if (d)
		closedir(d);
}
