/* A sandbox's resource use over time (GET /sandboxes/{id}/stats): the node
 * agent samples every ready sandbox of its own every stats_sample_interval (stats.h:
 * its cgroups, disk and interfaces) and writes the samples to Postgres
 * (table sandbox_stats, sql/017_stats.sql): batched, one INSERT per pass
 * at most, sent on a non-blocking connection of its own and answered on a
 * later turn, so the loop never waits for Postgres. The API reads them
 * back (src/api/h_stats.c), so a restart of the agent loses no history;
 * the reaper deletes them past stats_retention_hours.
 *
 * Here only the last few minutes stay in memory (what Postgres may not
 * have yet); a stats request answers them and a sample taken as it
 * arrives, so the answer ends with what the sandbox uses now.
 *
 * Samples keep the cumulative counters (CPU time, bytes), not rates: any
 * two of them give the mean rate between them, so thinning a window out
 * to the API's number of points loses no CPU second and no byte. The API
 * turns them into the public shape (src/lib/stats_view.c).
 *
 * The samples of a series are the placement's on this node (a pause keeps
 * them); the rows are the record's, so they go on across a resume. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <libpq-fe.h>
#include "cleanup.h"
#include "clock.h"
#include "hash.h"
#include "json.h"
#include "log.h"
#include "node_int.h"
#include "reply.h"
#include "stats.h"

#define FINE_N 20 /* the last 5 minutes at 15 s samples: more than a write takes */
/* a live sample this close to the last kept one replaces it: a rate over
 * a few ms says nothing */
#define MIN_GAP_MS 1000
/* rows waiting for Postgres at most (one that is down for long loses the
 * oldest, counted in the log, rather than the node's memory) */
#define QUEUE_MAX 50000
#define RETRY_MS 2000

static const char insert_sql[] =
	"INSERT INTO sandbox_stats (sandbox_id, t, cpu_usec, mem_bytes, disk_bytes, pids, net_rx, net_tx) "
	"SELECT r.sid, to_timestamp(r.t / 1000.0), nullif(r.cpu, -1), nullif(r.mem, -1), nullif(r.disk, -1), "
	"  nullif(r.pids, -1), nullif(r.rx, -1), nullif(r.tx, -1) "
	"FROM jsonb_to_recordset($1::jsonb) AS r(sid text, t bigint, cpu bigint, mem bigint, disk bigint, "
	"  pids bigint, rx bigint, tx bigint) "
	"ON CONFLICT DO NOTHING";

struct stats_pt {
	long long t; /* wall ms */
	long long cpu_usec, mem, disk, pids, rx, tx;
};

struct stats_ring {
	struct stats_pt *v;
	int cap, n, head; /* head: the next slot written */
};

struct stats_series {
	struct stats_series *next;
	char id[SBX_ID_LEN + 1];  /* the placement */
	char sid[SBX_ID_LEN + 1]; /* the record it serves: the rows' key */
	long long next_at;        /* mono ms of the next sample */
	bool seen;
	bool frozen_read;         /* the last sample was read while it was frozen */
	struct stats_ring fine;
	struct stats_pt fine_v[FINE_N];
};

/* The rows on their way to Postgres: queued (one JSON array, the next
 * INSERT's parameter) and the batch in flight (kept until answered, sent
 * again on a new connection when the old one is lost). */
static struct {
	PGconn *c;
	json_t *queued, *sent;
	bool busy;
	long long retry_at;
	long dropped;
} W;

static long long wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void ring_push(struct stats_ring *r, const struct stats_pt *p)
{
	r->v[r->head] = *p;
	r->head = (r->head + 1) % r->cap;
	if (r->n < r->cap)
		r->n++;
}

/* The i-th oldest. */
static const struct stats_pt *ring_at(const struct stats_ring *r, int i)
{
	return &r->v[(r->head - r->n + i + r->cap) % r->cap];
}

static struct stats_series *series_find(struct node *n, const char *id)
{
	for (struct stats_series *se = n->stats; se; se = se->next)
		if (!strcmp(se->id, id))
			return se;
	return NULL;
}

static int sample(struct node *n, const char *id, struct stats_pt *p, struct sandbox_usage *u, sbx_err *err)
{
	if (sandbox_usage_read(&n->sc, id, u, err) < 0)
		return -1;
	*p = (struct stats_pt){ .t = wall_ms(), .cpu_usec = u->cpu_usec, .mem = u->mem_bytes, .disk = u->disk_used,
				.pids = u->pids, .rx = u->net_rx, .tx = u->net_tx };
	return 0;
}

static void queue_row(const char *sid, const struct stats_pt *p)
{
	json_t *row;

	if (!W.queued && !(W.queued = json_array()))
		return;
	if (json_array_size(W.queued) >= QUEUE_MAX) {
		json_array_remove(W.queued, 0);
		if (W.dropped++ % 1000 == 0)
			log_warnx("stats samples: the queue is full (Postgres unreachable?); %ld dropped", W.dropped);
	}
	row = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "sid", sid, "t", (json_int_t)p->t, "cpu",
			(json_int_t)p->cpu_usec, "mem", (json_int_t)p->mem, "disk", (json_int_t)p->disk, "pids",
			(json_int_t)p->pids, "rx", (json_int_t)p->rx, "tx", (json_int_t)p->tx);
	if (row)
		json_array_append_new(W.queued, row);
}

static void series_add(struct stats_series *se, const struct stats_pt *p)
{
	ring_push(&se->fine, p);
	queue_row(se->sid, p);
}

static void writer_drop(const char *why)
{
	log_warnx("stats samples: %s: %s", why, W.c ? PQerrorMessage(W.c) : "no connection");
	PQfinish(W.c);
	W.c = NULL;
	W.busy = false; /* the batch sent is sent again on the next connection */
	W.retry_at = sbx_now_ms() + RETRY_MS;
}

/* Sends the queued rows (one INSERT) when none is in flight and reads the
 * answer of the one that is, never waiting. Connecting blocks (bounded by
 * connect_timeout in db_url): at the first batch and after a loss only. */
static void writer_pump(struct node *n)
{
	if (!W.busy && !W.sent && (!W.queued || !json_array_size(W.queued)))
		return;
	if (!W.c || PQstatus(W.c) != CONNECTION_OK) {
		if (sbx_now_ms() < W.retry_at)
			return;
		PQfinish(W.c);
		W.c = PQconnectdb(sbx_cfg_str(n->cfg, "db_url"));
		if (!W.c || PQstatus(W.c) != CONNECTION_OK || PQsetnonblocking(W.c, 1) != 0) {
			writer_drop("connecting");
			return;
		}
	}
	if (W.busy) {
		if (!PQconsumeInput(W.c)) {
			writer_drop("reading an answer");
			return;
		}
		while (W.busy && !PQisBusy(W.c)) {
			PGresult *res = PQgetResult(W.c);
			if (!res) {
				W.busy = false;
				json_decref(W.sent);
				W.sent = NULL;
				break;
			}
			if (PQresultStatus(res) != PGRES_COMMAND_OK)
				log_warnx("stats samples: %s", PQresultErrorMessage(res));
			PQclear(res);
		}
	}
	if (!W.busy && (W.sent || (W.queued && json_array_size(W.queued)))) {
		cleanup_free char *text = NULL;
		const char *params[1];

		if (!W.sent) {
			W.sent = W.queued;
			W.queued = NULL;
		}
		if (!(text = json_dumps(W.sent, JSON_COMPACT)))
			return;
		params[0] = text;
		if (!PQsendQueryParams(W.c, insert_sql, 1, NULL, params, NULL, NULL, 0)) {
			writer_drop("sending");
			return;
		}
		W.busy = true;
	}
	if (W.busy && PQflush(W.c) < 0)
		writer_drop("sending");
}

/* Before a sample p (read as u): the birth of its cgroup, when that is
 * newer than the series' last sample (a new series; a resume made the
 * cgroup again). Its CPU and byte counters were 0 then, so the reading
 * has a rate, the mean since that start, however soon it is asked for. */
static void series_rebase(struct stats_series *se, const struct stats_pt *p, const struct sandbox_usage *u)
{
	struct stats_pt b = *p;

	if (u->born_ms <= 0 || u->born_ms >= p->t ||
	    (se->fine.n && u->born_ms <= ring_at(&se->fine, se->fine.n - 1)->t))
		return;
	b.t = u->born_ms;
	b.cpu_usec = u->cpu_usec >= 0 ? 0 : -1;
	b.rx = u->net_rx >= 0 ? 0 : -1;
	b.tx = u->net_tx >= 0 ? 0 : -1;
	series_add(se, &b);
}

static struct stats_series *series_new(struct node *n, const char *id, const char *sid)
{
	struct stats_series *se = calloc(1, sizeof(*se));

	if (!se)
		return NULL;
	snprintf(se->id, sizeof(se->id), "%s", id);
	snprintf(se->sid, sizeof(se->sid), "%s", sid);
	se->fine = (struct stats_ring){ .v = se->fine_v, .cap = FINE_N };
	se->next = n->stats;
	n->stats = se;
	return se;
}

/* The series by placement id, for one pass: an open-addressed table, so a
 * pass over a thousand sandboxes is not a thousand walks of the list. */
struct series_index {
	struct stats_series **v;
	size_t cap;
};

static void index_build(struct series_index *ix, struct node *n)
{
	size_t count = 0;

	for (struct stats_series *se = n->stats; se; se = se->next)
		count++;
	ix->cap = 16;
	while (ix->cap < 2 * count)
		ix->cap *= 2;
	ix->v = calloc(ix->cap, sizeof(*ix->v));
	if (!ix->v)
		return; /* index_find falls back to the list */
	for (struct stats_series *se = n->stats; se; se = se->next) {
		size_t i = sbx_hash_str(se->id) & (ix->cap - 1);

		while (ix->v[i])
			i = (i + 1) & (ix->cap - 1);
		ix->v[i] = se;
	}
}

static struct stats_series *index_find(const struct series_index *ix, struct node *n, const char *id)
{
	if (!ix->v)
		return series_find(n, id);
	for (size_t i = sbx_hash_str(id) & (ix->cap - 1); ix->v[i]; i = (i + 1) & (ix->cap - 1))
		if (!strcmp(ix->v[i]->id, id))
			return ix->v[i];
	return NULL;
}

void stats_pass(struct node *n)
{
	long long now = sbx_now_ms(), every;
	struct series_index ix;

	writer_pump(n); /* every turn: the answer of the batch in flight */
	if (now < n->next_stats)
		return;
	n->next_stats = now + 1000;
	every = sbx_cfg_int(n->cfg, "stats_sample_interval") * 1000;
	for (struct stats_series *se = n->stats; se; se = se->next)
		se->seen = false;
	/* series made in this pass are not in it: each placement is met once */
	index_build(&ix, n);
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		struct sb *s = &n->sbs[i];
		struct stats_series *se;
		struct sandbox_usage u;
		struct stats_pt p;
		sbx_err err = SBX_ERR_INIT;

		if (s->st == SB_FREE || s->st == SB_DESTROYING || s->pool || !s->sandbox_id[0])
			continue;
		se = index_find(&ix, n, s->id);
		if (se)
			se->seen = true; /* paused, resuming...: its history stays */
		if (s->st != SB_READY || (se && now < se->next_at))
			continue;
		/* frozen since its last sample was read: nothing in it has run
		 * since, so that sample again, at this time, without reading its
		 * cgroup and network files (a thousand idle sandboxes' reads were
		 * most of the idle node agent's CPU); the first sample after the
		 * freeze is read, and the first after the thaw catches up (the
		 * counters are cumulative) */
		if (se && s->idle.frozen && se->frozen_read && se->fine.n) {
			p = *ring_at(&se->fine, se->fine.n - 1);
			p.t = wall_ms();
			se->next_at = now + every;
			series_add(se, &p);
			continue;
		}
		/* Nomad's: sampled once its cgroup is noted (no Docker call here) */
		if ((s->nomad && !sandbox_adopted_cgroup_noted(&n->sc, s->id)) || sample(n, s->id, &p, &u, &err) < 0)
			continue;
		if (!se && !(se = series_new(n, s->id, s->sandbox_id)))
			continue;
		se->seen = true;
		se->next_at = now + every;
		se->frozen_read = s->idle.frozen;
		series_rebase(se, &p, &u);
		series_add(se, &p);
	}
	free(ix.v);
	for (struct stats_series **pp = &n->stats; *pp;) {
		struct stats_series *se = *pp;
		if (se->seen) {
			pp = &se->next;
			continue;
		}
		*pp = se->next;
		free(se);
	}
	writer_pump(n); /* this pass's rows: one INSERT */
}

void stats_free(struct node *n)
{
	long long end = sbx_now_ms() + 2000;

	while (n->stats) {
		struct stats_series *se = n->stats;
		n->stats = se->next;
		free(se);
	}
	/* what is queued, if Postgres answers soon */
	while ((W.busy || W.sent || (W.queued && json_array_size(W.queued))) && sbx_now_ms() < end) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		writer_pump(n);
		nanosleep(&ts, NULL);
	}
	if (W.queued && json_array_size(W.queued))
		log_warnx("stats samples: %zu not written at exit", json_array_size(W.queued));
	json_decref(W.queued);
	json_decref(W.sent);
	PQfinish(W.c);
	memset(&W, 0, sizeof(W));
}

static const char *state_name(enum sb_state st)
{
	switch (st) {
	case SB_STARTING: return "starting";
	case SB_PAUSING: return "pausing";
	case SB_PAUSED: return "paused";
	case SB_RESUMING: return "resuming";
	case SB_DESTROYING: return "being destroyed";
	default: return "not running";
	}
}

static json_t *pt_json(const struct stats_pt *p)
{
	return json_pack("[I, I, I, I, I, I, I]", (json_int_t)p->t, (json_int_t)p->cpu_usec, (json_int_t)p->mem,
			 (json_int_t)p->disk, (json_int_t)p->pids, (json_int_t)p->rx, (json_int_t)p->tx);
}

/* The samples kept here since `since` (wall ms), oldest first, the live
 * one last (the API adds the older ones from Postgres and thins them out). */
static json_t *window(const struct stats_series *se, long long since, const struct stats_pt *live)
{
	json_t *out = json_array();
	int k = 0;
	const struct stats_pt *all[FINE_N + 1];

	for (int i = 0; se && i < se->fine.n; i++) {
		const struct stats_pt *p = ring_at(&se->fine, i);
		if (p->t >= since)
			all[k++] = p;
	}
	if (k > 1 && live->t - all[k - 1]->t < MIN_GAP_MS)
		k--;
	all[k++] = live;
	if (!out)
		return NULL;
	for (int j = 0; j < k; j++) {
		if (json_array_append_new(out, pt_json(all[j])) < 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}

void node_on_stats(struct node *n, const sbx_mq_msg *m, json_t *body)
{
	const char *id = NULL, *sid = NULL; /* the placement, its record */
	json_error_t jerr;
	int hours = 0;
	struct sb *s;
	struct sandbox_usage u;
	struct stats_pt live;
	struct stats_series *se;
	sbx_err err = SBX_ERR_INIT;
	char why[160];
	cleanup_json json_t *st = NULL;
	cleanup_free char *text = NULL;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (json_unpack_ex(body, &jerr, JSON_STRICT, "{s:s, s:s, s:i}", "sandbox_id", &sid, "placement_id", &id,
			   "hours", &hours) < 0 ||
	    !sbx_id_valid(id) || !sbx_id_valid(sid) || hours < 1 || hours > 100000) {
		log_warnx("rejecting a malformed stats request");
		node_reply_msg(n, m, sbx_reply_fail(NULL, "malformed stats request"));
		return;
	}
	if (!(s = node_served(n, m, id, sid)))
		return;
	if (s->st != SB_READY) {
		snprintf(why, sizeof(why), "%s", state_name(s->st));
		node_reply_msg(n, m, sbx_reply_fail("bad_state", why));
		return;
	}
	if (sample(n, id, &live, &u, &err) < 0) {
		log_warnx("sandbox %s: reading its use: %s (placement %s)", sid, err.msg, id);
		node_reply_msg(n, m, sbx_reply_fail(NULL, "the sandbox's use could not be read on its node"));
		return;
	}
	/* asked before the first pass sampled it, or since a resume */
	if ((se = series_find(n, id)) || (se = series_new(n, id, sid)))
		series_rebase(se, &live, &u);
	st = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o*}", "cpu_quota_usec", (json_int_t)u.cpu_quota_usec,
		       "cpu_period_usec", (json_int_t)u.cpu_period_usec, "host_cpus", (json_int_t)(cpus > 0 ? cpus : 1),
		       "mem_limit", (json_int_t)u.mem_limit, "disk_total", (json_int_t)u.disk_total, "pids_max",
		       (json_int_t)u.pids_max, "points",
		       window(se, live.t - (long long)hours * 3600000, &live));
	text = st && json_object_get(st, "points") ? json_dumps(st, JSON_COMPACT) : NULL;
	if (!text) {
		node_reply_msg(n, m, sbx_reply_fail(NULL, "out of memory"));
		return;
	}
	node_reply_msg(n, m, json_pack("{s:b, s:s}", "ok", 1, "stats", text));
}
