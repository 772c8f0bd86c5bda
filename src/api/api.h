/* sbx-api internals: one FastCGI child serves one request at a time with
 * its own Postgres and RabbitMQ connections. Handlers get a parsed, routed
 * request and answer through the helpers in http.c. */
#ifndef SBX_API_H
#define SBX_API_H

#include <fcgiapp.h>
#include <jansson.h>
#include <stdbool.h>
#include "auth.h"
#include "db.h"
#include "err.h"
#include "id.h"
#include "mq.h"
#include "page.h"
#include "router.h"
#include "settings.h"

struct api_ctx {
	const sbx_config *cfg;
	sbx_db db;
	sbx_mq *mq; /* may be NULL until RabbitMQ is reachable */
	sbx_auth auth;
};

struct api_org {
	char org_id[SBX_ID_LEN + 1];
	char key_id[SBX_ID_LEN + 1];
	bool is_admin;
	long long max_sandboxes;
	long long max_memory_mb;
	long long max_requests; /* concurrency overrides; 0: the setting */
	long long max_streams;
	long long key_rate; /* requests per second per key; -1: the setting, 0: none */
	long long key_burst; /* -1: the setting */
	long long max_sandbox_execs; /* 0: the setting */
};

/* The per-organisation slots a request holds (limits.c); -1: none. */
struct api_slots {
	int request;
	int stream;
	int exec; /* the sandbox's exec slot */
	unsigned key1;  /* the organisation's part of the lock keys */
	unsigned key2;
	unsigned xkey1; /* the sandbox's (exec slots) */
	unsigned xkey2;
	bool deferred;  /* taken with the handler's first read (api_limits_read) */
};

struct api_req {
	struct api_ctx *ctx;
	FCGX_Request *fcgx;
	const char *method;
	const char *uri;
	char request_id[72];
	struct sbx_route_match m;
	struct api_org org; /* filled once authenticated */
	struct api_slots slots;
	int retry_after; /* seconds, for a 429 (1 when unset) */
	bool answered;
	bool unflushed; /* a stream frame waits in FCGX's buffer for the next one */
	int status; /* for the access log line */
};

typedef void (*api_handler)(struct api_req *r);

/* http.c */
const char *api_param(struct api_req *r, const char *name);
/* Prepares and plans the commonest requests' statements on the child's new
 * Postgres session before it takes one (warm.c); failures are logged. */
void api_db_warm(struct api_ctx *ctx);
void api_send_json(struct api_req *r, int status, json_t *body /* stolen */);
void api_send_data(struct api_req *r, int status, const char *message, json_t *data /* stolen */);
/* The same envelope around data, JSON text as Postgres gave it (len bytes),
 * passed through unparsed. */
void api_send_data_raw(struct api_req *r, int status, const char *message, const char *data, size_t len);
/* A page ({data, totalCount, currentPage, totalPages, limit}) whose items
 * are column 1 of res as JSON text, column 0 the total, passed through. */
void api_send_page_raw(struct api_req *r, const char *message, const sbx_page *pg, PGresult *res);
void api_send_error(struct api_req *r, const sbx_err *err);
/* An error that still carries data (e.g. the id of a record left 'failed'). */
void api_send_error_data(struct api_req *r, const sbx_err *err, json_t *data /* stolen */);
void api_send_text(struct api_req *r, int status, const char *ctype, const char *text);
/* Reads the whole body when it is at most `limit` bytes (413 otherwise). */
int api_read_body(struct api_req *r, size_t limit, char **out, size_t *len, sbx_err *err);
/* Parses the body as a JSON object within the configured limits. */
int api_json_body(struct api_req *r, json_t **out, sbx_err *err);
int api_authenticate(struct api_req *r, sbx_err *err);
void api_handle(struct api_ctx *ctx, FCGX_Request *fcgx);
/* Builds a JSON value from a one-row, one-column jsonb/json result. */
json_t *api_json_from_row(PGresult *res, int row, int col);
/* 0 when RES has exactly one row; otherwise a 404 "WHAT not found". */
int api_one_row(PGresult *res, const char *what, sbx_err *err);
/* A listing: the page the query asks for (?page=&limit=), with LIM and OFF
 * its SQL values; then the answer's data from a (count, jsonb array) row,
 * each item passed through FIX (when not NULL). */
int api_page(struct api_req *r, sbx_page *pg, char lim[16], char off[24], sbx_err *err);
json_t *api_page_data(struct api_req *r, const sbx_page *pg, PGresult *res,
		      void (*fix)(const sbx_config *cfg, json_t *item));
int api_mq(struct api_req *r, sbx_err *err);

/* auth_cache.c: key hash -> organisation, per process, dropped on NOTIFY sbx_auth */
bool api_auth_cache_get(struct api_ctx *ctx, const unsigned char hash[SBX_KEY_HASH_LEN], struct api_org *org);
void api_auth_cache_put(struct api_ctx *ctx, const unsigned char hash[SBX_KEY_HASH_LEN], const struct api_org *org);

/* turns.c: short requests served at once by one sbx-api (api_short_requests) */
/* In the master, before forking: n turns. */
int api_turns_new(int n, sbx_err *err);
void api_turns_free(void);
/* Waits for a turn (0), or -1 when a signal came first. No-op without turns. */
int api_turn_take(void);
/* Gives the turn back when the request would wait on a client or a worker. */
void api_turn_leave(void);

/* limits.c: one tenant's share of the API children */
/* Takes a request slot (and a stream slot for a long-running route) of the
 * caller's organisation; 429 when it has as many in flight as it may. */
int api_limits_acquire(struct api_req *r, sbx_err *err);
/* Requests per second per API key (ratelimit.c): the shared buckets are
 * made in the master before the children fork; a request over its key's
 * rate gets 429 key_rate_limit with Retry-After. */
int api_rate_init(sbx_err *err);
int api_rate_check(struct api_req *r, sbx_err *err);
/* The handler's first statement, when it is a read: on routes where
 * api_limits_acquire deferred the request slot, the slot is taken in the
 * same round trip, just before it (429 instead of the answer when there is
 * none); elsewhere a plain sbx_db_query. */
int api_limits_read(struct api_req *r, PGresult **res, sbx_err *err, const char *sql, int n, ...);
/* Gives the slots back; safe to call when none are held. */
void api_limits_release(struct api_req *r);
/* Whether the route holds a child for long (exec, follow, transfers, wait). */
bool api_route_is_long(const struct api_req *r);
/* Watches how fast the request body arrives (api_body_min_rate). */
void api_body_guard_start(struct api_req *r);
/* The body came too slowly and was cut off: fills err with the 408. */
bool api_body_guard_tripped(sbx_err *err);
/* h_meta.c: the one template lookup. NAME is a template a live node has, or
 * an alias one declares; OUT gets the real template's name. Unknown: 400
 * listing the available names. */
int api_template_lookup(struct api_req *r, const char *name, char *out, size_t outsz, sbx_err *err);
/* h_meta.c: this install's region, as the regions list and a Sandbox show it */
json_t *api_region_json(const sbx_config *cfg);
/* h_sandboxes.c: completes a Sandbox object made by sbx_sandbox_json() in
 * place with what comes from the settings, not the record (the region) */
void api_sandbox_public(const sbx_config *cfg, json_t *s);

/* handlers */
void h_healthz(struct api_req *r);
void h_metrics(struct api_req *r);
void h_templates(struct api_req *r);
void h_regions(struct api_req *r);
void h_sandboxes_list(struct api_req *r);
void h_sandboxes_create(struct api_req *r);
void h_sandbox_get(struct api_req *r);
void h_sandbox_wait(struct api_req *r);
void h_sandbox_delete(struct api_req *r);
void h_sandbox_pause(struct api_req *r);
/* h_snapshots.c */
void h_sandbox_snapshots(struct api_req *r); /* GET, POST /sandboxes/{id}/snapshots */
void h_snapshots_list(struct api_req *r);    /* GET /sandboxes/snapshots */
void h_snapshot_delete(struct api_req *r);   /* DELETE /sandboxes/snapshots/{id} */
void h_sandbox_resume(struct api_req *r);
void h_sandbox_timeout(struct api_req *r);
/* h_egress.c */
void h_sandbox_egress(struct api_req *r);
/* mode + allow of a create or an egress switch: what this server can
 * enforce, or a 400 naming what it cannot */
int api_egress_check(const char *mode, const json_t *allow, sbx_err *err);
/* h_stats.c */
void h_sandbox_stats(struct api_req *r);

void h_exec(struct api_req *r);
void h_code(struct api_req *r);
void h_file(struct api_req *r);
void h_files_batch(struct api_req *r);
void h_processes(struct api_req *r);
void h_process(struct api_req *r);
void h_process_output(struct api_req *r);
void h_process_stdin(struct api_req *r);
void h_process_signal(struct api_req *r);
void h_process_resize(struct api_req *r);
void h_usage(struct api_req *r);

#endif
