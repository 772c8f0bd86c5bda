/* One tenant's share of the API children.
 *
 * Every request holds a child until it ends, and a long-running one (an
 * exec, an output follow, a file transfer, a long poll) holds it for
 * minutes; so without a per-organisation bound one tenant's slow clients or
 * streams can take every child and lock everyone else out (issue 8).
 *
 * The children are stateless and may run on several machines; they share
 * state only through Postgres. So a "slot" is a session-level advisory lock
 * on the child's own Postgres connection: a request takes one of the N
 * locks of its organisation (N = the limit), holds it while it runs and
 * gives it back at the end. A child that dies closes its connection, which
 * releases the lock: nothing leaks, nothing needs a reaper. Trying the
 * slots is one statement, starting at a random slot so that concurrent
 * requests do not all queue on slot 0.
 *
 * Lock keys use the two-int4 form of the advisory lock functions, which no
 * other sbx lock uses (migrate and create use the one-bigint form):
 *   key1 = the organisation id's first 32 bits
 *   key2 = its next 16 bits << 16 | kind << 15 | slot     (slot < 32768)
 * Ids are random, so two organisations share slots only when 48 random
 * bits agree; even then each keeps its limit, they just share it.
 *
 * Execs per sandbox (sandbox_max_execs, or the organisation's own) are
 * slots of the same kind, keyed by the sandbox id XOR the organisation id
 * (so a key of another organisation naming the sandbox takes other locks
 * and learns nothing from a 429) with the kind bit set like a stream's:
 *   key1 = (sandbox ^ org)'s first 32 bits
 *   key2 = its next 16 bits << 16 | 1 << 15 | slot
 * Only exec and code count: they are what holds a sandbox's command open.
 *
 * The body guard: nginx cuts a client that sends nothing for
 * client_body_timeout, but a client that trickles (a byte every few
 * seconds) never trips it and keeps its child for as long as its
 * Content-Length lasts. So the child times how long it waits for the body
 * and cuts it off (408) when, after api_body_grace seconds of waiting, it
 * has come slower than api_body_min_rate on average. Only time spent waiting
 * for the client counts: a handler that pauses reading (the node has not
 * granted credit) does not make the client look slow. */
#include "config.h"
#include <errno.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "api.h"
#include "cleanup.h"
#include "log.h"
#include "page.h"

#define KIND_REQUEST 0u
#define KIND_STREAM 1u
#define RETRY_REQUEST_S 1
#define RETRY_STREAM_S 5

bool api_route_is_long(const struct api_req *r)
{
	switch (r->m.route) {
	case SBX_R_EXEC:
	case SBX_R_CODE:
		/* a JSON exec holds its child as long as a streamed one */
		return true;
	case SBX_R_SANDBOX_WAIT:
	case SBX_R_PROCESS_STDIN:
		return true;
	case SBX_R_FILE:
		return r->m.method == SBX_M_GET || r->m.method == SBX_M_PUT;
	case SBX_R_PROCESS_OUTPUT: {
		char v[8];
		sbx_err e = SBX_ERR_INIT;
		return sbx_query_get(r->m.query, "follow", v, sizeof(v), &e) == 1 && strcmp(v, "0") &&
		       strcmp(v, "false");
	}
	default:
		return false;
	}
}

static unsigned hex_bits(const char *s, int n)
{
	unsigned v = 0;

	for (int i = 0; i < n; i++) {
		char c = s[i];
		v = v << 4 | (unsigned)(c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0');
	}
	return v;
}

/* An int4 parameter from 32 bits (Postgres' int4 is signed). */
static void int4_param(char *out, size_t n, unsigned v)
{
	snprintf(out, n, "%d", (int)(int32_t)v);
}

static long long exec_limit(const struct api_req *r)
{
	if (r->m.route != SBX_R_EXEC && r->m.route != SBX_R_CODE)
		return 0;
	if (r->org.max_sandbox_execs > 0)
		return r->org.max_sandbox_execs;
	return sbx_cfg_int(r->ctx->cfg, "sandbox_max_execs");
}

static unsigned hex_xor_bits(const char *a, const char *b, int n)
{
	return hex_bits(a, n) ^ hex_bits(b, n);
}

static long long limit_of(const struct api_req *r, bool stream)
{
	long long own = stream ? r->org.max_streams : r->org.max_requests;

	if (own > 0)
		return own;
	return sbx_cfg_int(r->ctx->cfg, stream ? "api_org_max_streams" : "api_org_max_requests");
}

/* The first free slot from a random start, in one statement: the Limit
 * stops the scan at the first lock taken, so no other slot is touched. */
#define TRY_SLOT(n, start, base)                                                                          \
	"(SELECT s FROM (SELECT (g + " start "::int) % " n "::int AS s FROM generate_series(0, " n "::int - 1) g) x " \
	"WHERE pg_try_advisory_lock($1::int, " base "::int + s) LIMIT 1)"

/* The statement that tries the slots, with its parameters. */
struct acquire_q {
	const char *sql;
	int n;
	char v[11][24];
	const char *p[11];
};

static void acquire_build(struct api_req *r, bool is_long, struct acquire_q *q)
{
	long long nreq = limit_of(r, false), nstr = limit_of(r, true), nexec = exec_limit(r);

	r->slots.key1 = hex_bits(r->org.org_id, 8);
	r->slots.key2 = hex_bits(r->org.org_id + 8, 4) << 16;
	int4_param(q->v[0], sizeof(q->v[0]), r->slots.key1);
	snprintf(q->v[1], sizeof(q->v[1]), "%lld", nreq);
	snprintf(q->v[2], sizeof(q->v[2]), "%u", randombytes_uniform((uint32_t)nreq));
	int4_param(q->v[3], sizeof(q->v[3]), r->slots.key2 | KIND_REQUEST << 15);
	q->sql = "SELECT " TRY_SLOT("$2", "$3", "$4");
	q->n = 4;
	if (is_long) {
		snprintf(q->v[4], sizeof(q->v[4]), "%lld", nstr);
		snprintf(q->v[5], sizeof(q->v[5]), "%u", randombytes_uniform((uint32_t)nstr));
		int4_param(q->v[6], sizeof(q->v[6]), r->slots.key2 | KIND_STREAM << 15);
		q->sql = "SELECT " TRY_SLOT("$2", "$3", "$4") ", " TRY_SLOT("$5", "$6", "$7");
		q->n = 7;
	}
	if (is_long && nexec > 0 && sbx_id_valid(r->m.id)) {
		r->slots.xkey1 = hex_xor_bits(r->m.id, r->org.org_id, 8);
		r->slots.xkey2 = hex_xor_bits(r->m.id + 8, r->org.org_id + 8, 4) << 16 | KIND_STREAM << 15;
		snprintf(q->v[7], sizeof(q->v[7]), "%lld", nexec);
		snprintf(q->v[8], sizeof(q->v[8]), "%u", randombytes_uniform((uint32_t)nexec));
		int4_param(q->v[9], sizeof(q->v[9]), r->slots.xkey2);
		int4_param(q->v[10], sizeof(q->v[10]), r->slots.xkey1);
		/* its own key1 ($11): TRY_SLOT locks on $1, so this one is spelled out */
		q->sql = "SELECT " TRY_SLOT("$2", "$3", "$4") ", " TRY_SLOT("$5", "$6", "$7") ", "
			 "(SELECT s FROM (SELECT (g + $9::int) % $8::int AS s FROM generate_series(0, $8::int - 1) g) x "
			 "WHERE pg_try_advisory_lock($11::int, $10::int + s) LIMIT 1)";
		q->n = 11;
	}
	for (int i = 0; i < q->n; i++)
		q->p[i] = q->v[i];
}

/* What the statement answered: the slots taken, or the 429. */
static int acquire_result(struct api_req *r, PGresult *res, bool is_long, sbx_err *err)
{
	if (!PQgetisnull(res, 0, 0))
		r->slots.request = atoi(PQgetvalue(res, 0, 0));
	if (is_long && !PQgetisnull(res, 0, 1))
		r->slots.stream = atoi(PQgetvalue(res, 0, 1));
	if (PQnfields(res) > 2 && !PQgetisnull(res, 0, 2))
		r->slots.exec = atoi(PQgetvalue(res, 0, 2));
	if (r->slots.request < 0) {
		api_limits_release(r);
		r->retry_after = RETRY_REQUEST_S;
		return sbx_err_set(err, 429, "org_request_limit",
				   "Too many concurrent requests for this organisation (at most %lld at a time); "
				   "retry later",
				   limit_of(r, false));
	}
	if (is_long && r->slots.stream < 0) {
		api_limits_release(r);
		r->retry_after = RETRY_STREAM_S;
		return sbx_err_set(err, 429, "org_stream_limit",
				   "Too many concurrent long-running requests (exec, code, output follow, file "
				   "transfers, stdin, wait) for this organisation (at most %lld at a time); retry later",
				   limit_of(r, true));
	}
	if (PQnfields(res) > 2 && r->slots.exec < 0) {
		api_limits_release(r);
		r->retry_after = RETRY_STREAM_S;
		return sbx_err_set(err, 429, "sandbox_exec_limit",
				   "Too many concurrent execs (exec, code) in this sandbox (at most %lld at a time); "
				   "retry later",
				   exec_limit(r));
	}
	return 0;
}

/* Routes whose handler starts with a read (api_limits_read): their slot is
 * taken with it, one round trip instead of two. */
static bool deferrable(const struct api_req *r)
{
	return r->m.method == SBX_M_GET && (r->m.route == SBX_R_SANDBOX || r->m.route == SBX_R_SANDBOXES);
}

int api_limits_acquire(struct api_req *r, sbx_err *err)
{
	cleanup_pgres PGresult *res = NULL;
	bool is_long = api_route_is_long(r);
	struct acquire_q q;

	r->slots.request = r->slots.stream = r->slots.exec = -1;
	r->slots.deferred = false;
	if (!sbx_id_valid(r->org.org_id))
		return 0; /* public routes: nobody to count against */
	if (!is_long && deferrable(r)) {
		r->slots.deferred = true;
		return 0;
	}
	acquire_build(r, is_long, &q);
	if (sbx_db_exec(&r->ctx->db, &res, err, q.sql, q.n, q.p) < 0)
		return sbx_err_ctx(err, "taking a request slot");
	return acquire_result(r, res, is_long, err);
}

int api_limits_read(struct api_req *r, PGresult **res, sbx_err *err, const char *sql, int n, ...)
{
	cleanup_pgres PGresult *ares = NULL;
	const char *params[SBX_DB_MAX_PARAMS];
	struct acquire_q q;
	va_list ap;
	int rc;

	*res = NULL;
	va_start(ap, n);
	rc = sbx_db_vparams(params, n, ap, err);
	va_end(ap);
	if (rc < 0)
		return -1;
	if (!r->slots.deferred)
		return sbx_db_exec(&r->ctx->db, res, err, sql, n, params);
	r->slots.deferred = false;
	acquire_build(r, false, &q);
	if (sbx_db_exec2(&r->ctx->db, q.sql, q.n, q.p, &ares, sql, n, params, res, err) < 0)
		return -1;
	if (acquire_result(r, ares, false, err) < 0) {
		/* over the limit: the read ran, its answer is not given */
		PQclear(*res);
		*res = NULL;
		return -1;
	}
	return 0;
}

void api_limits_release(struct api_req *r)
{
	sbx_db *db = &r->ctx->db;
	sbx_err err = SBX_ERR_INIT;
	char k1[16], a[16], b[16], x1[16], x2[16];
	const char *p[5];
	char sql[192];
	int n = 1, rc;

	if (r->slots.request < 0 && r->slots.stream < 0 && r->slots.exec < 0)
		return;
	if (!db->conn || PQstatus(db->conn) != CONNECTION_OK) {
		/* the locks went with the connection */
		r->slots.request = r->slots.stream = r->slots.exec = -1;
		return;
	}
	/* an unlock inside a failed transaction would fail and keep the slot */
	sbx_db_rollback(db);
	int4_param(k1, sizeof(k1), r->slots.key1);
	int4_param(a, sizeof(a), r->slots.key2 | KIND_REQUEST << 15 | (unsigned)(r->slots.request & 0x7fff));
	int4_param(b, sizeof(b), r->slots.key2 | KIND_STREAM << 15 | (unsigned)(r->slots.stream & 0x7fff));
	int4_param(x1, sizeof(x1), r->slots.xkey1);
	int4_param(x2, sizeof(x2), r->slots.xkey2 | (unsigned)(r->slots.exec & 0x7fff));
	p[0] = k1;
	snprintf(sql, sizeof(sql), "SELECT $1::int IS NULL"); /* $1 always has a type */
	if (r->slots.request >= 0) {
		p[n++] = a;
		strcat(sql, ", pg_advisory_unlock($1::int, $2::int)");
	}
	if (r->slots.stream >= 0) {
		p[n++] = b;
		strcat(sql, n == 2 ? ", pg_advisory_unlock($1::int, $2::int)" : ", pg_advisory_unlock($1::int, $3::int)");
	}
	if (r->slots.exec >= 0) {
		p[n++] = x1;
		p[n++] = x2;
		strcat(sql, n == 3 ? ", pg_advisory_unlock($2::int, $3::int)"
			    : n == 4 ? ", pg_advisory_unlock($3::int, $4::int)"
				     : ", pg_advisory_unlock($4::int, $5::int)");
	}
	rc = sbx_db_exec(db, NULL, &err, sql, n, p);
	if (rc < 0 && db->conn) {
		/* a slot must never stay taken by an idle child: closing the
		 * session releases every lock it holds (the next request
		 * reconnects) */
		log_warnx("cannot give back the organisation's request slot (%s); dropping the Postgres connection",
			  err.msg);
		sbx_db_drop(db);
	}
	r->slots.request = r->slots.stream = r->slots.exec = -1;
}

/* ---- the body guard ---- */

static struct {
	FCGX_Stream *stream;
	void (*fill)(FCGX_Stream *stream);
	long long waited_us, bytes, grace_us, min_rate;
	bool tripped;
} guard;

static long long mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static bool too_slow(void)
{
	return guard.min_rate > 0 && guard.waited_us > guard.grace_us &&
	       (double)guard.bytes < (double)guard.min_rate * (double)guard.waited_us / 1e6;
}

static void trip(FCGX_Stream *s)
{
	guard.tripped = true;
	log_info("request body too slow: %lld bytes in %lld ms of waiting; cut off", guard.bytes,
		 guard.waited_us / 1000);
	/* what FCGX's own SetError does: the reader sees the end of the body */
	if (!s->FCGI_errno)
		s->FCGI_errno = ETIMEDOUT;
	s->isClosed = 1;
}

/* Stands in for libfcgi's fill procedure of the request's stdin stream. */
static void guarded_fill(FCGX_Stream *s)
{
	long long t0;

	if (s != guard.stream || !guard.fill) {
		s->isClosed = 1; /* never ours to serve */
		return;
	}
	/* the client decides how long this takes: not on a short turn */
	api_turn_leave();
	if (guard.min_rate <= 0) {
		guard.fill(s);
		return;
	}
	if (too_slow()) {
		trip(s);
		return;
	}
	t0 = mono_us();
	guard.fill(s);
	guard.waited_us += mono_us() - t0;
	guard.bytes += s->stop - s->rdNext;
	if (!s->isClosed && too_slow())
		trip(s);
}

void api_body_guard_start(struct api_req *r)
{
	FCGX_Stream *in = r->fcgx->in;

	memset(&guard, 0, sizeof(guard));
	if (!in || !in->fillBuffProc)
		return;
	guard.min_rate = sbx_cfg_int(r->ctx->cfg, "api_body_min_rate");
	guard.grace_us = sbx_cfg_int(r->ctx->cfg, "api_body_grace") * 1000000;
	guard.stream = in;
	guard.fill = in->fillBuffProc;
	in->fillBuffProc = guarded_fill;
}

bool api_body_guard_tripped(sbx_err *err)
{
	if (!guard.tripped)
		return false;
	sbx_err_set(err, 408, "body_too_slow",
		    "The request body arrived too slowly (under %lld bytes per second); the request was cut off",
		    guard.min_rate);
	return true;
}
