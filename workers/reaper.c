/* The reaper: the records' side of cleaning up. Every reaper_interval it
 *  - asks for the destroy of sandboxes past their idle timeout or their
 *    lifetime (writing the intent and the reason first),
 *  - finishes destroys that were asked for but not done (a crash, a node
 *    that did not answer),
 *  - turns records stuck in 'starting' into 'failed',
 *  - lets the driver compare what it placed elsewhere with the records
 *    (Nomad: jobs without a live record, records whose allocation is gone),
 *  - deletes stats samples older than stats_retention_hours, in bounded
 *    batches (a pass never holds Postgres long).
 * Each pass is a set of conditional updates, so several reapers on several
 * machines can run at once. What is left on a node with no live record is
 * the node agent's to remove (it lists its own machine). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cleanup.h"
#include "daemon.h"
#include "db.h"
#include "driver.h"
#include "json.h"
#include "log.h"
#include "reply.h"
#include "roles.h"
#include "sandbox_state.h"

#define STATS_BATCH "5000"
#define STATS_BATCHES 20

static void stats_expire(sbx_db *db, const sbx_config *cfg)
{
	sbx_err err = SBX_ERR_INIT;
	char hours[24];
	long total = 0;

	snprintf(hours, sizeof(hours), "%lld", sbx_cfg_int(cfg, "stats_retention_hours"));
	for (int b = 0; b < STATS_BATCHES && !sbx_child_stop; b++) {
		cleanup_pgres PGresult *r = NULL;
		long n;

		if (sbx_db_query(db, &r, &err,
				 "WITH d AS (DELETE FROM sandbox_stats WHERE ctid = ANY(ARRAY("
				 "  SELECT ctid FROM sandbox_stats WHERE t < now() - make_interval(hours => $1::int) "
				 "  LIMIT " STATS_BATCH ")) RETURNING 1) SELECT count(*) FROM d",
				 1, hours) < 0) {
			log_warnx("reaper: stats samples: %s", err.msg);
			return;
		}
		n = atol(PQgetvalue(r, 0, 0));
		total += n;
		if (n < atol(STATS_BATCH))
			break;
	}
	if (total)
		log_info("reaper: %ld stats samples older than %s hours deleted", total, hours);
}

static void pass(sbx_db *db, struct driver *drv, const sbx_config *cfg)
{
	cleanup_pgres PGresult *r = NULL, *d = NULL, *st = NULL;
	sbx_err err = SBX_ERR_INIT;

	/* 1. expiry: the intent first, with the reason */
	if (sbx_sandbox_expire(db, sbx_cfg_int(cfg, "paused_limit"), &r, &err) < 0) {
		log_warnx("reaper: %s", err.msg);
		return;
	}
	for (int i = 0; i < PQntuples(r); i++)
		log_info("sandbox %s: expired (%s)", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));

	/* 2. stuck in 'starting' past any deadline a create could have */
	if (sbx_sandbox_fail_stuck(db, sbx_cfg_int(cfg, "rpc_timeout") + sbx_cfg_int(cfg, "start_timeout") + 30, &st,
				   &err) < 0)
		log_warnx("reaper: %s", err.msg);
	else
		for (int i = 0; i < PQntuples(st); i++)
			log_warnx("sandbox %s: stuck in starting; marked failed", PQgetvalue(st, i, 0));

	/* 3. every destroy asked for and not done */
	if (sbx_db_query(db, &d, &err,
			 "SELECT id FROM sandboxes WHERE destroy_requested_at IS NOT NULL AND status <> 'destroyed' "
			 "ORDER BY destroy_requested_at LIMIT 100",
			 0) < 0) {
		log_warnx("reaper: %s", err.msg);
		return;
	}
	for (int i = 0; i < PQntuples(d) && !sbx_child_stop; i++) {
		cleanup_json json_t *res = provisioner_destroy(db, drv, PQgetvalue(d, i, 0), NULL);
		cleanup_reply struct sbx_reply rep = { 0 };
		if (sbx_reply_unpack(&rep, res, NULL, &err) < 0 || !rep.ok)
			log_warnx("sandbox %s: destroy failed (%s); next pass retries", PQgetvalue(d, i, 0),
				  rep.json ? (rep.error ? rep.error : "no reason given") : err.msg);
	}

	/* 4. what the driver placed elsewhere (Nomad's jobs) against the records */
	if (drv->ops->reap && !sbx_child_stop)
		drv->ops->reap(drv);

	/* 5. old stats samples: STATS_BATCH rows a statement, at most
	 * STATS_BATCHES per pass; what is left, the next pass deletes */
	stats_expire(db, cfg);
}

int reaper_run(const sbx_config *cfg, int index, void *ctx)
{
	struct driver drv;
	sbx_db db;
	sbx_err err = SBX_ERR_INIT;

	(void)ctx;
	log_info("reaper #%d started (every %lld s)", index, sbx_cfg_int(cfg, "reaper_interval"));
	if (sbx_db_open(&db, sbx_cfg_str(cfg, "db_url"), &err) < 0)
		log_warnx("%s (retried)", err.msg);
	driver_init(&drv, cfg, &err);
	drv.db = &db;
	while (!sbx_child_stop) {
		pass(&db, &drv, cfg);
		worker_sleep_ms(sbx_cfg_int(cfg, "reaper_interval") * 1000);
	}
	driver_fini(&drv);
	sbx_db_close(&db);
	log_info("reaper #%d stopped", index);
	return 0;
}
