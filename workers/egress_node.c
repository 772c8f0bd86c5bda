/* The node agent's egress state (egress_node.h): each running sandbox's
 * policy in force, put in force again from the records after a restart,
 * and the hostnames of restricted ones kept current (re-resolved on a
 * socket of their own when their TTL runs out). The DNS forwarder on the
 * gateway is egress_fwd.c. */
#include "config.h"
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "cleanup.h"
#include "clock.h"
#include "dns.h"
#include "egress.h"
#include "egress_node_int.h"
#include "json.h"
#include "log.h"
#include "reply.h"

static struct eg_sb *find(struct egress_node *e, const char *id)
{
	for (struct eg_sb *s = e->sbs; s; s = s->next)
		if (!strcmp(s->id, id))
			return s;
	return NULL;
}

struct eg_sb *egress_node_find_ip(struct egress_node *e, uint32_t ip)
{
	for (struct eg_sb *s = e->sbs; s; s = s->next)
		if (s->ip == ip && !s->pending)
			return s;
	return NULL;
}

static struct eg_sb *get(struct egress_node *e, const char *id)
{
	struct eg_sb *s = find(e, id);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	e->tick_at = 0;
	snprintf(s->id, sizeof(s->id), "%s", id);
	s->next = e->sbs;
	e->sbs = s;
	return s;
}

/* A switch still under way answered with a failure (the policy in force
 * before stays, or another replaces it). */
static void switch_cancel(struct egress_node *e, struct eg_sb *s, const char *why)
{
	if (!s->sw)
		return;
	if (e->reply)
		e->reply(e->reply_ctx, s->sw->reply_to, s->sw->corr, sbx_reply_fail("egress_failed", why));
	free(s->sw);
	s->sw = NULL;
	free(s->rf); /* its answers were for that policy */
	s->rf = NULL;
}

void egress_node_forget(struct egress_node *e, const char *id)
{
	for (struct eg_sb **pp = &e->sbs; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->id, id)) {
			struct eg_sb *s = *pp;
			*pp = s->next;
			switch_cancel(e, s, "the sandbox is being destroyed");
			free(s->rf);
			free(s);
			return;
		}
}


/* When the first of s's names runs out. */
static long long next_due(const struct eg_sb *s, long long now)
{
	long long due = 0;

	for (size_t i = 0; i < s->p.n; i++) {
		if (!s->p.allow[i].host[0])
			continue;
		long long d = now + (long long)s->res[i].ttl * 1000;
		if (!due || d < due)
			due = d;
	}
	return due;
}

/* What the owner sees: {"host": ["addr", ...], ...}; malloc'd. */
static char *resolved_json(const struct eg_sb *s)
{
	cleanup_json json_t *o = json_object();

	for (size_t i = 0; o && i < s->p.n; i++) {
		json_t *arr;
		char a[16];
		if (!s->p.allow[i].host[0])
			continue;
		arr = json_array();
		for (size_t k = 0; k < s->res[i].n; k++) {
			struct in_addr in = { htonl(s->res[i].a[k]) };
			inet_ntop(AF_INET, &in, a, sizeof(a));
			json_array_append_new(arr, json_string(a));
		}
		json_object_set_new(o, s->p.allow[i].host, arr);
	}
	return o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

/* ...written to the record. A row locked meanwhile (a switch in flight
 * holds it while it waits for us) is skipped, never waited for: the
 * write is retried at the next tick (dirty). */
static void record_resolved(struct egress_node *e, struct eg_sb *s)
{
	cleanup_free char *str = resolved_json(s);
	cleanup_pgres PGresult *r = NULL;
	sbx_err err = SBX_ERR_INIT;

	s->dirty = true;
	if (!str)
		return;
	if (sbx_db_query(e->db, &r, &err,
			 "UPDATE sandboxes SET egress_resolved = $2::jsonb WHERE id = "
			 "(SELECT id FROM sandboxes WHERE placement_id = $1 FOR UPDATE SKIP LOCKED) RETURNING id",
			 2, s->id, str) < 0) {
		log_warnx("sandbox %s: recording resolved hostnames: %s", s->id, err.msg);
		return;
	}
	if (PQntuples(r) == 1)
		s->dirty = false;
}

/* s's address, which stays what it is for the sandbox's life: from ip
 * when the caller knows it, else (once) from the node's map, which lists
 * every sandbox's (~1.5 ms for a few, more with many). */
void egress_node_ip_source(struct egress_node *e, int (*fn)(void *ctx, const char *id, char ip[16]), void *ctx)
{
	e->ip_file = fn;
	e->ip_ctx = ctx;
}

/* A sandbox's address from where the node keeps it, else its map: buf, or
 * NULL when it has none. */
static const char *ip_of(struct egress_node *e, const char *id, char buf[16])
{
	sbx_err err = SBX_ERR_INIT;

	struct in_addr in;

	if (e->ip_file && e->ip_file(e->ip_ctx, id, buf) == 0 && inet_pton(AF_INET, buf, &in) == 1)
		return buf;
	return net_sandbox_ip(e->c, id, buf, &err) == 0 ? buf : NULL;
}

static void learn_ip(struct egress_node *e, struct eg_sb *s, const char *ip)
{
	char buf[16];
	struct in_addr in;

	if (!ip && !s->ip)
		ip = ip_of(e, s->id, buf);
	if (ip && inet_pton(AF_INET, ip, &in) == 1)
		s->ip = ntohl(in.s_addr);
}

/* s's address as egress_apply_resolved takes it: NULL when not known (it
 * looks in the map then). */
static const char *ip_text(const struct eg_sb *s, char buf[16])
{
	struct in_addr in;

	if (!s || !s->ip)
		return NULL;
	in.s_addr = htonl(s->ip);
	return inet_ntop(AF_INET, &in, buf, 16);
}

/* p (its hostnames resolved to res) is what s has in force now: a switch
 * still under way is answered (why), a re-resolution of the policy before
 * dropped (its answers are stale); the caller sets when it is next due. */
static void in_force(struct egress_node *e, struct eg_sb *s, const struct sbx_egress *p,
		     const struct dns_addrs *res, const char *ip, const char *why)
{
	switch_cancel(e, s, why);
	s->pending = false;
	s->p = *p;
	memcpy(s->res, res, sizeof(s->res));
	free(s->rf);
	s->rf = NULL;
	learn_ip(e, s, ip);
}

int egress_node_set(struct egress_node *e, const char *id, const struct sbx_egress *p, char **resolved,
		    sbx_err *err)
{
	static struct dns_addrs res[SBX_EGRESS_MAX_ALLOW];
	struct eg_sb *s;
	char ip[16];
	const char *at = ip_text(find(e, id), ip);

	e->tick_at = 0; /* its work may come sooner now */
	/* one look for a sandbox not known yet, for the rules and for
	 * learn_ip below (when it fails, the apply says why) */
	if (!at)
		at = ip_of(e, id, ip);
	memset(res, 0, sizeof(res));
	if (egress_resolve(e->c, p, res, err) < 0) {
		log_warnx("sandbox %s: %s (its hostnames allow nothing until they resolve)", id, err->msg);
		sbx_err_clear(err);
	}
	if (egress_apply_resolved(e->c, id, at, p, res, err) < 0)
		return -1;
	s = get(e, id);
	if (!s) {
		if (resolved)
			*resolved = strdup("{}");
		return 0; /* in force; only its refresh is lost */
	}
	in_force(e, s, p, res, at, "another egress policy was put in force meanwhile");
	s->due_ms = egress_has_hosts(p) ? next_due(s, sbx_now_ms()) : 0;
	if (resolved)
		*resolved = resolved_json(s);
	else if (egress_has_hosts(p))
		record_resolved(e, s);
	return 0;
}

void egress_node_pending(struct egress_node *e, const char *id, const struct sbx_egress *p)
{
	struct eg_sb *s = get(e, id);

	e->tick_at = 0; /* its work may come sooner now */
	if (!s)
		return;
	s->pending = true;
	s->p = *p;
	s->due_ms = 0;
}

bool egress_node_resolves(struct egress_node *e, const char *id)
{
	struct eg_sb *s = find(e, id);

	return s && s->pending && egress_has_hosts(&s->p);
}

void egress_node_started(struct egress_node *e, const char *id, const char *ip, const char *resolved)
{
	struct eg_sb *s = find(e, id);
	sbx_err err = SBX_ERR_INIT;

	e->tick_at = 0; /* its work may come sooner now */
	if (!s || !s->pending)
		return;
	learn_ip(e, s, ip);
	if (egress_has_hosts(&s->p) && resolved && egress_resolved_load(resolved, &s->p, s->res) == 0) {
		/* what the start process resolved (and put in force), TTLs too */
		s->pending = false;
		s->due_ms = next_due(s, sbx_now_ms());
		record_resolved(e, s);
		return;
	}
	if (egress_has_hosts(&s->p)) {
		/* asked again: this learns the TTLs */
		struct sbx_egress p = s->p;
		if (egress_node_set(e, id, &p, NULL, &err) < 0)
			log_warnx("sandbox %s: %s", id, err.msg);
		return;
	}
	s->pending = false;
}

static bool same_policy(const struct sbx_egress *a, const struct sbx_egress *b)
{
	if (a->mode != b->mode || a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->allow[i].net != b->allow[i].net || a->allow[i].len != b->allow[i].len ||
		    a->allow[i].port != b->allow[i].port || strcmp(a->allow[i].host, b->allow[i].host))
			return false;
	return true;
}

/* The records are the truth: a sandbox this agent does not track yet (a
 * restart) gets its record's policy, and so does one whose policy in force
 * differs from its record's. That happens when a switch reached the node
 * but the API gave up waiting (503 egress_unconfirmed, record unchanged):
 * a looser policy than the one shown stays at most one pass. Rows a switch
 * holds right now (FOR UPDATE in h_egress.c) are skipped: their record is
 * about to change. */
/* ---- after a restart: the records' policies in force again ---- */

#define SYNC_BATCH 64

struct sync_item {
	char id[SBX_ID_LEN + 1];
	char ip[16];
	struct sbx_egress p;
	struct dns_addrs res[SBX_EGRESS_MAX_ALLOW];
};

/* The record's egress_resolved ({"host": ["A.B.C.D", ...]}) as res[i] for
 * p's hostname entries: what was in force, until they are asked again. */
static void res_from_record(const struct sbx_egress *p, const char *text, struct dns_addrs *res)
{
	cleanup_json json_t *o = json_loads(text, 0, NULL);

	memset(res, 0, SBX_EGRESS_MAX_ALLOW * sizeof(*res));
	for (size_t i = 0; i < p->n; i++) {
		json_t *arr = p->allow[i].host[0] ? json_object_get(o, p->allow[i].host) : NULL;
		size_t k;
		json_t *v;
		res[i].ttl = DNS_TTL_MIN;
		json_array_foreach(arr, k, v) {
			struct in_addr in;
			if (res[i].n < DNS_MAX_ADDRS && json_is_string(v) && inet_pton(AF_INET, json_string_value(v), &in) == 1)
				res[i].a[res[i].n++] = ntohl(in.s_addr);
		}
	}
}

/* item k of n in force: tracked, its hostnames (if any) asked again soon,
 * spread over a few seconds */
static void sync_track(struct egress_node *e, const struct sync_item *it, size_t k, long long now)
{
	struct eg_sb *s = get(e, it->id);

	e->tick_at = 0; /* its work may come sooner now */
	if (!s)
		return;
	in_force(e, s, &it->p, it->res, it->ip[0] ? it->ip : NULL,
		 "the record's egress policy was put in force meanwhile");
	s->due_ms = egress_has_hosts(&it->p) ? now + (long long)(k % 50) * 100 : 0;
}

/* One transaction for the batch; if it fails, each on its own (one bad
 * sandbox must not keep the others' policies out of force). */
static void sync_flush(struct egress_node *e, struct sync_item *it, size_t n)
{
	long long t0 = sbx_now_ms();
	sbx_err err = SBX_ERR_INIT;
	char *all = NULL;
	size_t len = 0;
	bool batch = true;

	for (size_t k = 0; k < n && batch; k++) {
		cleanup_free char *rs = it[k].ip[0] ? egress_ruleset(it[k].id, it[k].ip, &it[k].p, it[k].res, &err) : NULL;
		size_t l = rs ? strlen(rs) : 0;
		char *grown = rs ? realloc(all, len + l + 1) : NULL;
		if (!grown) {
			batch = false;
			break;
		}
		all = grown;
		memcpy(all + len, rs, l + 1);
		len += l;
	}
	if (batch && n > 0 && net_nft_apply(e->c, all, &err) == 0) {
		for (size_t k = 0; k < n; k++)
			sync_track(e, &it[k], k, t0);
		log_info("egress of %zu sandboxes put in force from their records (one transaction, %lld ms)", n,
			 sbx_now_ms() - t0);
	} else {
		if (n > 1)
			log_warnx("egress of %zu sandboxes from their records: %s; each on its own", n,
				  err.msg[0] ? err.msg : "no address for one");
		for (size_t k = 0; k < n; k++) {
			sbx_err e1 = SBX_ERR_INIT;
			if (egress_apply_resolved(e->c, it[k].id, it[k].ip[0] ? it[k].ip : NULL, &it[k].p, it[k].res,
						  &e1) < 0)
				log_warnx("sandbox %s: %s", it[k].id, e1.msg);
			else
				sync_track(e, &it[k], k, t0);
		}
	}
	free(all);
}

/* Does row i (placement_id, egress_mode, egress_allow::text first) name a
 * policy other than the one in force? p: the record's, parsed. */
static bool record_differs(struct egress_node *e, PGresult *r, int i, struct sbx_egress *p)
{
	struct eg_sb *s = find(e, PQgetvalue(r, i, 0));
	cleanup_json json_t *allow = NULL;
	sbx_err err = SBX_ERR_INIT;

	if (s && s->pending)
		return false;
	allow = json_loads(PQgetvalue(r, i, 2), 0, NULL);
	return sbx_egress_parse(PQgetvalue(r, i, 1), allow, p, &err) == 0 && !(s && same_policy(&s->p, p));
}

void egress_node_sync(struct egress_node *e, const char *node_id)
{
	cleanup_pgres PGresult *all = NULL, *r = NULL;
	cleanup_free char *ids = NULL;
	sbx_err err = SBX_ERR_INIT;
	struct sync_item *it = NULL;
	static struct sbx_egress p;
	size_t n = 0, len = 0;

	/* Which records differ from what is in force, read without a lock:
	 * locking every row (below) each pass wrote each of them (a row lock is
	 * a write), a thousand every reaper_interval, with nothing to do */
	if (sbx_db_query(e->db, &all, &err,
			 "SELECT placement_id, egress_mode, egress_allow::text FROM sandboxes "
			 "WHERE node_id = $1 AND status = 'ready'",
			 1, node_id) < 0)
		return;
	for (int i = 0; i < PQntuples(all); i++) {
		const char *id = PQgetvalue(all, i, 0);
		char *grown;
		if (!sbx_id_valid(id) || !record_differs(e, all, i, &p))
			continue;
		if (!(grown = realloc(ids, len + SBX_ID_LEN + 3))) {
			log_warnx("egress from the records: out of memory");
			return;
		}
		ids = grown;
		len += (size_t)sprintf(ids + len, "%s%s", len ? "," : "{", id);
	}
	if (!len)
		return;
	strcpy(ids + len, "}");
	/* those again, skipping rows a switch holds right now */
	if (sbx_db_query(e->db, &r, &err,
			 "SELECT placement_id, egress_mode, egress_allow::text, nomad_alloc_id IS NOT NULL, "
			 "coalesce(egress_resolved, '{}')::text "
			 "FROM sandboxes WHERE node_id = $1 AND status = 'ready' AND placement_id = ANY($2::bpchar[]) "
			 "FOR SHARE SKIP LOCKED",
			 2, node_id, ids) < 0)
		return;
	for (int i = 0; i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0);
		struct eg_sb *s = find(e, id);
		char ip[16];
		const char *at;
		if (!record_differs(e, r, i, &p))
			continue;
		at = ip_text(s, ip);
		if (!at)
			at = ip_of(e, id, ip);
		/* a sandbox Nomad runs has a network of ours only when sbx-cni
		 * had us wire it (doc/nomad.md); without, it has loopback only */
		if (!s && !at && PQgetvalue(r, i, 3)[0] == 't')
			continue;
		if (s)
			log_warnx("sandbox %s: egress %s in force, its record says %s: the record's goes in force", id,
				  sbx_egress_mode_name(s->p.mode), sbx_egress_mode_name(p.mode));
		if (!it && !(it = calloc(SYNC_BATCH, sizeof(*it)))) {
			log_warnx("egress from the records: out of memory");
			return;
		}
		snprintf(it[n].id, sizeof(it[n].id), "%s", id);
		snprintf(it[n].ip, sizeof(it[n].ip), "%s", at ? at : "");
		it[n].p = p;
		res_from_record(&p, PQgetvalue(r, i, 4), it[n].res);
		if (++n == SYNC_BATCH) {
			sync_flush(e, it, n);
			n = 0;
		}
	}
	sync_flush(e, it, n);
	free(it);
}

/* ---- re-resolution: a sandbox's hostnames asked again when their TTL
 * runs out, on the refresh socket; the loop goes on meanwhile (a slow or
 * dead resolver held it up to 2 s a sandbox) ---- */

#define REFRESH_MS 2000 /* as long as a start's resolution waits */
#define RESEND_MS 700   /* UDP may lose a query or its answer */

/* the policy whose names are asked: a switch's, else the one in force */
static const struct sbx_egress *asked(const struct eg_sb *s)
{
	return s->sw ? &s->sw->p : &s->p;
}

static void refresh_send(struct egress_node *e, struct eg_sb *s, long long now)
{
	const struct sbx_egress *p = asked(s);
	uint8_t buf[DNS_MSG_MAX];

	for (size_t i = 0; i < p->n; i++) {
		int ql;
		if (!p->allow[i].host[0] || s->rf->res[i].rcode != -1)
			continue;
		ql = dns_build_query(s->rf->ids[i], p->allow[i].host, buf, sizeof(buf));
		if (ql > 0 && send(e->rs, buf, (size_t)ql, 0) < 0 && errno != EAGAIN)
			log_warn("sandbox %s: asking the resolver for %s", s->id, p->allow[i].host);
	}
	s->rf->resend = now + RESEND_MS;
}

static int refresh_begin(struct egress_node *e, struct eg_sb *s, long long now)
{
	const struct sbx_egress *p = asked(s);

	if (e->rs < 0 || !(s->rf = calloc(1, sizeof(*s->rf)))) {
		log_warnx("sandbox %s: its hostnames cannot be asked again (no resolver): the addresses in force stay",
			  s->id);
		s->due_ms = now + DNS_NEG_TTL * 1000;
		return -1;
	}
	if (getrandom(s->rf->ids, sizeof(s->rf->ids), 0) != (ssize_t)sizeof(s->rf->ids))
		for (size_t i = 0; i < SBX_EGRESS_MAX_ALLOW; i++)
			s->rf->ids[i] = (uint16_t)(now * 31 + i * 7919);
	for (size_t i = 0; i < p->n; i++) {
		s->rf->res[i].rcode = -1;
		s->rf->left += p->allow[i].host[0] != 0;
	}
	s->rf->deadline = now + REFRESH_MS;
	refresh_send(e, s, now);
	return 0;
}

/* A switch's names are in (or the time is up; a name with no answer
 * allows nothing, as at a start): its policy in force, and answered. */
static void switch_end(struct egress_node *e, struct eg_sb *s, struct dns_addrs *res, long long now)
{
	struct eg_switch *sw = s->sw;
	sbx_err err = SBX_ERR_INIT;
	char ip[16];
	json_t *body;

	s->sw = NULL;
	for (size_t i = 0; i < sw->p.n; i++)
		if (sw->p.allow[i].host[0] && res[i].rcode == -1) {
			log_warnx("sandbox %s: %s had no answer from the resolver in %d ms: it allows nothing until it "
				  "resolves", s->id, sw->p.allow[i].host, REFRESH_MS);
			res[i].n = 0;
			res[i].ttl = DNS_TTL_MIN;
		}
	if (egress_apply_resolved(e->c, s->id, ip_text(s, ip), &sw->p, res, &err) < 0) {
		log_warnx("sandbox %s: %s (the policy in force before stays)", s->id, err.msg);
		body = sbx_reply_fail(err.http == 400 ? "not_supported" : "egress_failed", err.msg);
	} else {
		cleanup_free char *resolved = NULL;
		s->p = sw->p;
		memcpy(s->res, res, sizeof(s->res));
		s->due_ms = next_due(s, now);
		resolved = resolved_json(s);
		body = json_pack("{s:b, s:s}", "ok", 1, "resolved", resolved ? resolved : "{}");
	}
	if (e->reply)
		e->reply(e->reply_ctx, sw->reply_to, sw->corr, body);
	else
		json_decref(body);
	free(sw);
}

void egress_node_reply_hook(struct egress_node *e,
			    void (*fn)(void *ctx, const char *reply_to, const char *corr, json_t *body), void *ctx)
{
	e->reply = fn;
	e->reply_ctx = ctx;
}

int egress_node_switch(struct egress_node *e, const char *id, const struct sbx_egress *p, const char *reply_to,
		       const char *corr)
{
	struct eg_sb *s = find(e, id);
	struct eg_switch *sw;

	e->tick_at = 0; /* its work may come sooner now */
	if (!s || s->pending || e->rs < 0 || !e->reply || !egress_has_hosts(p) || !(sw = calloc(1, sizeof(*sw))))
		return -1;
	switch_cancel(e, s, "a later egress switch replaced it");
	free(s->rf);
	s->rf = NULL;
	sw->p = *p;
	snprintf(sw->reply_to, sizeof(sw->reply_to), "%s", reply_to);
	snprintf(sw->corr, sizeof(sw->corr), "%s", corr);
	s->sw = sw;
	if (refresh_begin(e, s, sbx_now_ms()) < 0) {
		s->sw = NULL;
		free(sw);
		return -1;
	}
	return 0;
}

/* The answers are in, or the time is up: a name that changed puts the
 * sandbox's rules anew and is written to its record; a name with no
 * answer keeps its addresses and is asked again soon. */
static void refresh_end(struct egress_node *e, struct eg_sb *s, long long now)
{
	static struct dns_addrs res[SBX_EGRESS_MAX_ALLOW];
	sbx_err err = SBX_ERR_INIT;
	bool changed = false;
	size_t unanswered = 0;

	e->tick_at = 0; /* its work may come sooner now */
	memcpy(res, s->rf->res, sizeof(res));
	free(s->rf);
	s->rf = NULL;
	if (s->sw) {
		switch_end(e, s, res, now);
		return;
	}
	for (size_t i = 0; i < s->p.n; i++) {
		if (!s->p.allow[i].host[0])
			continue;
		if (res[i].rcode == -1) {
			res[i] = s->res[i];
			res[i].ttl = DNS_TTL_MIN;
			unanswered++;
			continue;
		}
		if (res[i].n != s->res[i].n || memcmp(res[i].a, s->res[i].a, res[i].n * sizeof(res[i].a[0])))
			changed = true;
	}
	if (unanswered)
		log_info("sandbox %s: %zu of its hostnames had no answer from the resolver in %d ms: their addresses "
			 "stay, asked again in %d s", s->id, unanswered, REFRESH_MS, DNS_TTL_MIN);
	if (changed) {
		char ip[16];
		if (egress_apply_resolved(e->c, s->id, ip_text(s, ip), &s->p, res, &err) < 0) {
			log_warnx("sandbox %s: hostnames changed, rules not updated: %s", s->id, err.msg);
			s->due_ms = now + DNS_TTL_MIN * 1000;
			return;
		}
		memcpy(s->res, res, sizeof(res));
		record_resolved(e, s);
		log_info("sandbox %s: allowed hostnames re-resolved, rules updated", s->id);
	} else {
		memcpy(s->res, res, sizeof(res));
	}
	s->due_ms = next_due(s, now);
}

static void on_refresh(struct egress_node *e)
{
	uint8_t buf[DNS_MSG_MAX];
	ssize_t r;

	while ((r = recv(e->rs, buf, sizeof(buf), 0)) > 0) {
		uint16_t id;
		if (r < 12)
			continue;
		id = (uint16_t)(buf[0] << 8 | buf[1]);
		for (struct eg_sb *s = e->sbs; s; s = s->next) {
			const struct sbx_egress *p = asked(s);
			bool mine = false;
			for (size_t i = 0; s->rf && i < p->n; i++) {
				struct dns_addrs a;
				if (s->rf->ids[i] != id || s->rf->res[i].rcode != -1 || !p->allow[i].host[0] ||
				    dns_parse_answer(buf, (size_t)r, p->allow[i].host, &a) < 0)
					continue;
				s->rf->res[i] = a;
				s->rf->left--;
				mine = true;
			}
			if (mine) {
				if (s->rf->left == 0)
					refresh_end(e, s, sbx_now_ms());
				break;
			}
		}
	}
}

long long egress_node_tick(struct egress_node *e)
{
	long long now = sbx_now_ms(), next = -1;

	/* nothing of the sandboxes is due before tick_at: not walked (a
	 * thousand of them at every wakeup of the loop was 9 % of its CPU) */
	if (e->tick_at > now) {
		long long t = egress_fwd_tick(e, now);
		next = e->tick_at == LLONG_MAX ? -1 : e->tick_at - now;
		return t >= 0 && (next < 0 || t < next) ? t : next;
	}

	for (struct eg_sb *s = e->sbs; s; s = s->next) {
		if (s->pending || (!s->due_ms && !s->rf))
			continue;
		if (s->dirty)
			record_resolved(e, s);
		if (s->dirty && (next < 0 || next > 1000))
			next = 1000;
		if (s->rf && now >= s->rf->deadline)
			refresh_end(e, s, now);
		else if (s->rf && now >= s->rf->resend)
			refresh_send(e, s, now);
		else if (!s->rf && s->due_ms <= now)
			(void)refresh_begin(e, s, now);
		if (s->rf) {
			long long t = s->rf->resend < s->rf->deadline ? s->rf->resend : s->rf->deadline;
			if (next < 0 || t - now < next)
				next = t > now ? t - now : 0;
		} else if (s->due_ms && (next < 0 || s->due_ms - now < next)) {
			next = s->due_ms > now ? s->due_ms - now : 0;
		}
	}
	e->tick_at = next < 0 ? LLONG_MAX : now + next;
	{
		long long t = egress_fwd_tick(e, now);
		if (t >= 0 && (next < 0 || t < next))
			next = t;
	}
	return next;
}

bool egress_node_owns(struct egress_node *e, void *ptr)
{
	return e && (ptr == &e->rs_tag || egress_fwd_owns(e, ptr));
}

void egress_node_on_event(struct egress_node *e, void *ptr)
{
	if (ptr == &e->rs_tag)
		on_refresh(e);
	else
		egress_fwd_on_event(e, ptr);
}

struct egress_node *egress_node_new(const struct net_config *c, int ep, sbx_db *db)
{
	struct egress_node *e = calloc(1, sizeof(*e));
	sbx_err err = SBX_ERR_INIT;

	if (!e)
		return NULL;
	e->c = c;
	e->db = db;
	e->ep = ep;
	e->srv = e->up = e->tsrv = e->rs = -1;
	for (int i = 0; i < TCP_CONNS; i++)
		e->tcp[i].fd = -1;
	/* the refresh socket comes first: restricted sandboxes keep their
	 * names current even when the forwarder cannot listen */
	if (dns_upstream(c->resolver, &e->upstream, &err) < 0 ||
	    (e->rs = dns_socket_in(c->uplink_netns, SOCK_DGRAM, &err)) < 0 ||
	    connect(e->rs, (struct sockaddr *)&e->upstream, sizeof(e->upstream)) < 0) {
		log_warnx("hostnames of restricted sandboxes: no resolver to ask again: %s",
			  err.msg[0] ? err.msg : strerror(errno));
		if (e->rs >= 0)
			close(e->rs);
		e->rs = -1;
		sbx_err_clear(&err);
	} else {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &e->rs_tag };
		epoll_ctl(ep, EPOLL_CTL_ADD, e->rs, &ev);
	}
	egress_fwd_open(e);
	return e;
}

void egress_node_free(struct egress_node *e)
{
	if (!e)
		return;
	egress_fwd_close(e);
	if (e->rs >= 0)
		close(e->rs);
	while (e->sbs) {
		struct eg_sb *s = e->sbs;
		e->sbs = s->next;
		free(s->rf);
		free(s->sw);
		free(s);
	}
	free(e);
}
