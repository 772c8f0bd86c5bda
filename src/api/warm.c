/* A new Postgres session knows nothing: its first statement on a table
 * loads the table's and its indexes' catalog entries, and each statement
 * text is prepared (a round trip) and planned the first time a child meets
 * it. With api_children children taking requests in turn, every child met
 * each of them cold: in the first bench/create-latency run after a reload
 * a create spent 16-19 ms in the API and the messages beside the node's
 * start, 11-12 in the next run (p50 of 40). So a child warms its session
 * before it takes a request: the statements of the commonest requests
 * (sql.h) are prepared, and those that only read are run once with values
 * that match no row (their plan made, their tables' catalog loaded).
 * Nothing is written: the one statement that could (an exec's) matches no
 * row. */
#include "config.h"
#include "api.h"
#include "cleanup.h"
#include "clock.h"
#include "log.h"
#include "sandbox_state.h"
#include "sql.h"

#define NOBODY "000000000000000000000000" /* an id no record has: ids are random */

void api_db_warm(struct api_ctx *ctx)
{
	const char *tmpl = sbx_cfg_str(ctx->cfg, "default_template");
	/* a read runs with values matching nothing; v[0] NULL: prepare only */
	const struct {
		const char *sql;
		int n;
		const char *v[6];
	} stmts[] = {
		/* which sessions are the API's, for operators (pg_stat_activity) */
		{ "SELECT set_config('application_name', $1, false)", 1, { "sbx-api" } },
		/* Each statement planned once for the session, not for each
		 * call: Postgres plans a prepared statement's first five runs
		 * for their values, and with children taking requests in turn
		 * a child seldom runs one five times. The key lookup's join
		 * took 0.33 ms to plan on every cache miss (bind, with
		 * log_min_duration_statement = 0). The API's statements find
		 * rows by id or organisation, where the plan does not depend
		 * on the value. */
		{ "SELECT set_config('plan_cache_mode', $1, false)", 1, { "force_generic_plan" } },
		{ SQL_CREATE_COUNT, 1, { NULL } },
		{ SQL_CREATE_INSERT, 22, { NULL } },
		{ SQL_AUTH_KEY, 1, { "\\x00" } },
		{ SQL_SANDBOX_GET, 3, { NOBODY, NOBODY, "{}" } },
		{ SQL_SANDBOX_JSON, 2, { NOBODY, NOBODY } },
		{ SQL_SANDBOX_LIST, 6, { NOBODY, NULL, "{}", "1", "0", "{}" } },
		{ SQL_TEMPLATE_LOOKUP, 2, { tmpl, tmpl } },
		/* an exec's look (its update of no row writes nothing); the
		 * last: t/integration/api-recovery.t looks for it */
		{ SBX_SQL_SANDBOX_USE, 2, { NOBODY, NOBODY } },
	};
	long long t0 = sbx_now_ms();
	sbx_err err = SBX_ERR_INIT;

	for (size_t i = 0; i < SBX_ARRAY_LEN(stmts); i++) {
		int rc = stmts[i].v[0] ? sbx_db_exec(&ctx->db, NULL, &err, stmts[i].sql, stmts[i].n, stmts[i].v)
				       : sbx_db_prepare(&ctx->db, stmts[i].sql, stmts[i].n, &err);
		if (rc < 0) {
			/* not fatal: the request that needs it prepares it */
			log_warnx("warming the Postgres session: %s", err.msg);
			return;
		}
	}
	log_debug("Postgres session warmed in %lld ms", sbx_now_ms() - t0);
}
